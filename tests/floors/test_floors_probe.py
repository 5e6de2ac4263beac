"""The CPU probe: a stable peak, cached per machine, keeping the best ever measured."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from pytest_perfgate.roofline import probe
from pytest_perfgate.roofline.probe import cpu_hardware, measure_cpu


def test_cpu_peak_is_stable_across_three_runs() -> None:
    runs = [measure_cpu() for _ in range(3)]
    print("GEMM peaks", [round(r["gemm_fp32_flops"] / 1e9, 1) for r in runs], "GFLOP/s")
    gemm = [r["gemm_fp32_flops"] for r in runs]
    assert min(gemm) > 1e9  # any CPU this runs on does > 1 GFLOP/s fp32
    assert max(gemm) / min(gemm) <= 1.15, f"GEMM peaks {[round(g / 1e9, 1) for g in gemm]} GFLOP/s"
    assert all(r["copy_bytes_per_s"] > 1e8 for r in runs)


def test_probe_is_cached_and_keeps_the_best(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the caching, not the figure (the test above): a real probe, a short one
    monkeypatch.setattr(probe, "measure_cpu", functools.partial(probe.measure_cpu, gemm_s=0.3, read_s=0.2))
    assert cpu_hardware(run=False, cache=tmp_path) is None  # nothing cached, no measuring
    hw = cpu_hardware(run=True, cache=tmp_path)
    assert hw is not None and hw.is_cpu and hw.peak("fp32") > 1e9 and hw.peak("bf16") == hw.peak("fp32")
    (f,) = tmp_path.glob("cpu-*.json")
    assert cpu_hardware(run=False, cache=tmp_path) == hw  # read back, not measured again
    data = json.loads(f.read_text())
    data["gemm_fp32_flops"] = 1e15  # a better figure measured earlier is never replaced by a lower one
    f.write_text(json.dumps(data))
    again = cpu_hardware(run=True, cache=tmp_path, refresh=True)
    assert again is not None and again.peak("fp32") == 1e15
