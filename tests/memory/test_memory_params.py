"""``[params.memory]`` as the typed workload the memory suite reads (memory.MemoryParams)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate import load_thresholds, memory

ROOT = Path(__file__).resolve().parents[2]


def test_the_roadmap_params() -> None:
    p = memory.MemoryParams.parse(load_thresholds(ROOT / "thresholds.toml").params["memory"])
    assert p.repeats == 6 and p.parallel == 3 and p.cuda_fraction == pytest.approx(0.115)
    assert p.settings[0].name == "default" and p.settings[0].env == {}
    assert p.pattern.hidden == 2048 and p.spec()["pattern"]["probe_len"] == 4096 and p.spec()["backend"] == "cuda"
    assert p.setting(p.settings[-1].name) == p.settings[-1]


def test_bad_params_name_the_key() -> None:
    with pytest.raises(ValueError, match=r"\[params.memory\] repeats: must be a positive integer"):
        memory.MemoryParams.parse({"repeats": 0})
    with pytest.raises(ValueError, match=r"\[params.memory\] pattern: Pattern: unknown keys"):
        memory.MemoryParams.parse({"pattern": {"layer": 2}})
    with pytest.raises(ValueError, match=r"cuda_fraction"):
        memory.MemoryParams.parse({"cuda_fraction": 2})
    with pytest.raises(KeyError, match="no setting 'x'"):
        memory.MemoryParams.parse({}).setting("x")
