"""Warm-up and steady state (issue 22, item 3). The stated rule: every phase-1 run sends
``[params.phase1] warmup`` requests of the same shape as its measured ones first (recorded apart,
never gated), so an engine's cold first requests never decide a steady-state gate; the sequential
verdict says how many were excluded and why. Simulated in the suite's design (the TTFT gate's first
look at the first run's 4 or 100 requests): an engine whose first 1-3 requests after start are cold
(3x the limit) and which is at 0.5x the limit in steady state."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special as spc
from simhelp import assert_rate

from pytest_perfgate import Engines, LoadConfig, load_thresholds
from pytest_perfgate.verdicts.sequential import plan_for

ROOT = Path(__file__).parents[2]
LIMIT = 0.150


def _series(rng: np.random.Generator, trials: int, n: int, p99: float, warmup: int) -> np.ndarray:
    """TTFTs of the measured requests (in order): the engine's first 1-3 requests are cold; the first
    ``warmup`` requests of the run are sent before the measured ones and excluded."""
    total = n + warmup
    x = p99 * np.exp(0.5 * (rng.standard_normal((trials, total)) - float(spc.ndtri(0.99))))
    cold = rng.integers(1, 4, trials)
    x[np.arange(total)[None, :] < cold[:, None]] = 3 * LIMIT
    return x[:, warmup:]


def _outcomes(x: np.ndarray, plan: Any) -> np.ndarray:
    over = np.cumsum(x >= LIMIT, axis=1)
    under = np.arange(1, x.shape[1] + 1) - over
    out, open_ = np.zeros(x.shape[0], int), np.ones(x.shape[0], bool)
    for n in plan.looks:
        fail = open_ & (spc.bdtr(under[:, n - 1], n, 0.99) <= 1 - plan.c_fail)
        out[fail], open_ = -1, open_ & ~fail
        if n in plan.pass_looks:
            ok = open_ & (spc.bdtr(over[:, n - 1], n, 0.01) <= 1 - plan.c_pass)
            out[ok], open_ = 1, open_ & ~ok
    return out


@pytest.mark.parametrize("first", [4, 100])
def test_cold_starts_never_decide_the_ttft_gate(first: int) -> None:
    th = load_thresholds(ROOT / "thresholds.toml")
    warmup, budget = th.params["phase1"]["warmup"], th.params["phase1"]["ttft_max_samples"]
    gate = th.gate("long_context_ttft")
    plan = plan_for(gate, 0.95, budget, first)
    rng = np.random.default_rng(2230 + first)
    trials = 1000
    before = _outcomes(_series(rng, trials, budget, 0.5 * LIMIT, 1), plan)
    after = _outcomes(_series(rng, trials, budget, 0.5 * LIMIT, warmup), plan)
    print(f"RATE warm-up, first look {first}: FAIL of a 0.5x system with 1 warm-up {np.mean(before == -1):.3f}, "
          f"with {warmup}: {np.mean(after == -1):.3f}; passes {np.mean(after == 1):.3f}")
    if first == 4:
        assert np.mean(before == -1) > 0.2  # the case: cold requests decided the gate
    assert np.mean(after == -1) == 0 and np.mean(after == 1) >= 0.9
    at = _outcomes(_series(rng, trials, budget, LIMIT, warmup), plan)
    assert_rate(f"warm-up {warmup}, first look {first}, steady P99 at the limit", float(np.mean(at == 1)), trials)


def test_the_suite_warms_with_the_same_shape() -> None:
    """The rule is the suite's: every phase-1 run's LoadConfig carries the warm-up count."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("phase1_suite_module", ROOT / "perf_tests" / "test_phase1.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["phase1_suite_module"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    th = load_thresholds(ROOT / "thresholds.toml")
    from pytest_perfgate import workload

    p = workload(mod.Phase1, th, "phase1")
    assert p.load == LoadConfig(max_seconds=p.max_seconds, warmup=th.params["phase1"]["warmup"])
    assert Engines  # the runs go through perfgate_engines.run(..., phase1.load)
