"""Phase 1's re-tune is phase 2's input: a vLLM engine phase 2 names runs with the recorded batch size."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from pytest_perfgate import Engines, Runs
from pytest_perfgate.config import EngineSpec


def _engines(tmp_path: Path) -> Engines:
    specs = {"vlm": EngineSpec("vlm", "vllm-server", {"model": "llava", "max_num_seqs": 64}),
             "hosted": EngineSpec("hosted", "openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"})}
    return Engines.open(specs, {}, tmp_path, contextlib.nullcontext, lambda m: None, Runs())


def _decision(outcome: str) -> dict[str, object]:
    return {"verdicts": [{"gate": "batch_retune_capacity", "outcome": outcome,
                          "details": {"arg.max_num_seqs": 4.0, "arg.max_num_batched_tokens": 8192.0, "sustained": 2.0}}]}


def test_a_passing_retune_sets_the_batch_arguments_of_a_vllm_engine(tmp_path: Path) -> None:
    e = _engines(tmp_path)
    name = e.retuned("vlm", _decision("pass"))
    assert name == "vlm-retuned"
    assert dict(e.spec(name).args) == {"model": "llava", "max_num_seqs": 4, "max_num_batched_tokens": 8192}
    assert e.retuned("vlm", _decision("pass")) == name  # declared once, same arguments


@pytest.mark.parametrize("decision", [None, {"verdicts": []}])
def test_nothing_recorded_keeps_the_engine(tmp_path: Path, decision: dict[str, object] | None) -> None:
    assert _engines(tmp_path).retuned("vlm", decision) == "vlm"


def test_a_failed_retune_or_a_non_vllm_engine_keeps_the_engine(tmp_path: Path) -> None:
    e = _engines(tmp_path)
    assert e.retuned("vlm", _decision("fail")) == "vlm"
    assert e.retuned("hosted", _decision("pass")) == "hosted"  # batch arguments don't apply to a hosted endpoint
