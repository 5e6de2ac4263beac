"""Sweep and max-safe-batch search end to end on the CPU: child processes run the transformer-style
allocation pattern on the glibc heap under a real RLIMIT_AS, so out-of-memory is a real limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate import evaluate
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.memory.method import batch_pair, candidates
from pytest_perfgate.memory.sweep import Setting, SweepError, SweepResult, child_env, run_child, sweep
from pytest_perfgate.memory.workload import Pattern, max_safe_batch

MiB = 2**20
# small enough for a 2-core CI machine: ~0.05 s of allocations per child, ~1 s with start-up
CPU_PATTERN = dict(layers=4, hidden=256, kv_width=64, intermediate=1024, bytes_per_elem=4, min_len=16,
                   max_len=512, steps=40, probe_len=512, max_probe_batch=1024)
SETTINGS = (Setting("default", {}), Setting("heap_32m", {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432"}))


def spec(budget_mib: int) -> dict[str, Any]:
    return {"backend": "cpu", "pattern": CPU_PATTERN, "address_space_bytes": budget_mib * MiB}


def test_search_is_exponential_then_binary() -> None:
    s = max_safe_batch(lambda b: b <= 37, cap=4096)
    assert s.best == 37 and not s.capped
    assert [b for b, _ in s.probes] == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert max_safe_batch(lambda b: False).best == 0
    capped = max_safe_batch(lambda b: True, cap=100)
    assert capped.best == 100 and capped.capped
    assert max_safe_batch(lambda b: b <= 100, cap=100).best == 100


def test_child_finds_a_real_limit_that_scales_with_the_budget() -> None:
    small = run_child(spec(64), SETTINGS[0], timeout=300)
    large = run_child(spec(160), SETTINGS[0], timeout=300)
    for r in (small, large):
        assert r["rlimit_as"] > 0 and not r["capped"]
        probes = dict((b, ok) for b, ok in r["probes"])
        assert probes[r["max_safe_batch"]] is True and probes[r["max_safe_batch"] + 1] is False
        assert r["memory"]["samples"] == 42  # entry, 40 steps, exit
        assert r["memory"]["peak_reserved_bytes"] >= r["memory"]["peak_allocated_bytes"] > 0
    # the limit is real: 96 MiB more address space holds ~96 MiB / (bytes of one 512-token sequence:
    # K and V of 4 layers kept, hidden + MLP of the running layer) more sequences
    p = Pattern.from_dict(CPU_PATTERN)
    per_seq = p.probe_len * p.bytes_per_elem * (p.layers * 2 * p.kv_width + p.hidden + p.intermediate)
    assert per_seq == 3.5 * MiB
    gained = large["max_safe_batch"] - small["max_safe_batch"]
    assert 0.7 * (96 * MiB / per_seq) <= gained <= 1.1 * (96 * MiB / per_seq), gained


def test_child_setting_replaces_the_parents_allocator_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    env = child_env(SETTINGS[1])
    assert "PYTORCH_CUDA_ALLOC_CONF" not in env and env["GLIBC_TUNABLES"] == "glibc.malloc.mmap_threshold=33554432"
    r = run_child(spec(64), SETTINGS[1], timeout=300)
    assert r["env"] == {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432"}


def test_child_failure_names_the_setting() -> None:
    bad = {"backend": "cpu", "pattern": {"layers": 0}}
    with pytest.raises(SweepError, match=r"setting default .*Pattern.layers = 0"):
        run_child(bad, SETTINGS[0], timeout=300)


def test_sweep_table_best_and_ratio_gate(tmp_path: Path) -> None:
    progress: list[str] = []
    res = sweep(spec(96), SETTINGS, repeats=3, timeout=300, progress=progress.append, parallel=2)
    assert [(r.setting, r.repeat) for r in res.runs] == [
        ("default", 0), ("heap_32m", 0), ("default", 1), ("heap_32m", 1), ("default", 2), ("heap_32m", 2)]
    assert len(progress) == 6
    assert len({r.result["pid"] for r in res.runs}) == 6  # a fresh process per run
    # repeat r runs seed r under every setting: the same requests
    assert [r.result["pattern"]["seed"] for r in res.of("heap_32m")] == [0, 1, 2]
    table = res.table()
    assert table[0].startswith("| setting |") and any(line.startswith("| heap_32m |") for line in table)
    best = res.best(0.95)
    assert best.setting == "heap_32m" and best.candidates == 1
    assert "lower bound" in best.statement() and "exact Mann-Whitney, 3 vs 3 runs" in best.statement()
    assert SweepResult.from_dict(res.to_dict()).batches("default") == res.batches("default")

    th_path = tmp_path / "thresholds.toml"
    th_path.write_text(
        '[phases.p]\n[gates.batch]\nphase = "p"\nmetric = "value"\nstatistic = "p50"\ncompare = "ratio"\n'
        'runs = ["best", "default"]\nmin = 2.0\nparams = { estimator = "hodges_lehmann" }\n'
    )
    th = load_thresholds(th_path)
    assert list(candidates(res)) == ["heap_32m"]
    v = evaluate(th.gate("batch"), batch_pair(res, "heap_32m"), thresholds=th)
    # a glibc tunable can't double the batch under the same address-space limit
    assert v.outcome == "fail", v.summary()
    assert v.upper < 2.0 and "vs default" in v.note and v.n == 3 and v.method.startswith("hodges-lehmann")
    assert "gate batch: ratio of value p50" in v.summary()
    assert (v.observed, v.upper) == pytest.approx((best.bound.estimate, best.bound.upper))


def test_pattern_rejects_bad_fields() -> None:
    with pytest.raises(ValueError, match="unknown keys"):
        Pattern.from_dict({"layer": 3})
    with pytest.raises(ValueError, match="min_len 10 > max_len 5"):
        Pattern(min_len=10, max_len=5)
