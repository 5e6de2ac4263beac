"""Real multi-process gloo all-reduce (2 ranks spawned as child processes, env:// over TCP) in a
tuning sweep over real gloo settings, applied to the ranks' environment only."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from pytest_perfgate.distributed.bench import BenchSpec, SizeResult
from pytest_perfgate.distributed.launch import Rank, launch
from pytest_perfgate.distributed.tuning import CommConfig, parse_configs, run_sweep


def test_parse_configs_default_first_and_bad_keys_named() -> None:
    cs = parse_configs({"omp1": {"OMP_NUM_THREADS": 1}})
    assert [c.name for c in cs] == ["default", "omp1"] and cs[1].env == {"OMP_NUM_THREADS": "1"}
    with pytest.raises(ValueError, match=r"\[x\]: fast.NCCL_ALG0X|not a communication setting"):
        parse_configs({"fast": {"PATH": "/"}}, "[x]")
    with pytest.raises(ValueError, match="at least one configuration besides"):
        parse_configs({"default": {}})


def test_sweep_over_two_real_gloo_settings() -> None:
    spec = BenchSpec((8, 1024), iters=150, warmup=5)
    configs = parse_configs({"omp1": {"OMP_NUM_THREADS": "1"}, "lazy_init": {"TORCH_GLOO_LAZY_INIT": "1"}})
    docs: dict[str, Any] = {}

    def measure(c: CommConfig) -> tuple[list[float], dict[str, str]]:
        doc = docs[c.name] = launch(spec, [Rank(), Rank()], comm=c.env)
        return [t / 1e6 for t in doc["sizes"][1]["times_us"]], doc["comm_env"]

    res = run_sweep(configs, measure, 0.95)
    table: list[dict[str, Any]] = res.table()
    assert [r["config"] for r in table] == ["default", "omp1", "lazy_init"]
    assert "OMP_NUM_THREADS" not in table[0]["comm_env"] or table[0]["comm_env"]["OMP_NUM_THREADS"] == os.environ.get(
        "OMP_NUM_THREADS")
    assert table[1]["comm_env"]["OMP_NUM_THREADS"] == "1" and table[2]["comm_env"]["TORCH_GLOO_LAZY_INIT"] == "1"
    assert all(r["n"] == 150 and len(r["times_us"]) == 150 for r in table)
    assert res.per_config_confidence == pytest.approx(1 - 0.05 / 2)
    best = min(res.rows, key=lambda r: r.median)
    assert res.best == best.config.name
    if res.best != "default":
        assert res.gain_s == pytest.approx(res.rows[0].median - best.median) and res.gain_lower_s <= res.gain_s
    print(res.summary())
    assert "tuning sweep (3 configs)" in res.summary()
    assert np.isfinite([r["p50_us"] for r in table]).all()
    # the benchmark itself: every timed iteration kept (warm-up excluded), nccl-tests bandwidths
    doc = docs["default"]
    assert doc["backend"] == "gloo" and doc["world_size"] == 2 and doc["timing"] == "perf_counter_ns after barrier"
    assert doc["comm_env"]["WORLD_SIZE"] == "2" and "TORCH_GLOO_LAZY_INIT" not in os.environ
    assert [s["bytes"] for s in doc["sizes"]] == [8, 1024]
    for s in doc["sizes"]:
        r = SizeResult.from_dict(s)
        assert len(r.times_s) == 150 and all(t > 0 for t in r.times_s)
        assert s["algbw_GBps_p50"] == pytest.approx(s["bytes"] / r.quantile(0.5) / 1e9, rel=1e-6)
        assert s["busbw_GBps_p50"] == pytest.approx(s["algbw_GBps_p50"] * 2 * (2 - 1) / 2, rel=1e-9)
        assert s["p99_us"] >= s["p50_us"]
