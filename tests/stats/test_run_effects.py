"""Run effects in regression verdicts (verdicts/runeffects.py): seeded simulation of the false
regression rate at the tolerance (normal, heavy-tailed and drifting run effects, CV 0-30%), power at
+10/20/40%, and the verdict when the history is too short. The full table: docs/statistics.md
("Run-to-run variation"), benchmarks/bench_history_stats.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from runsim import runs
from simhelp import assert_rate

from pytest_perfgate.verdicts.runeffects import RunEstimate, regression_test, spread

TOL, C, K, TRIALS = 0.05, 0.95, 10, 800


def _rate(cv: float, kind: str, true: float, trials: int = TRIALS, seed: int = 7, k: int = K) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        rs = runs(rng, np.r_[np.zeros(k), math.log1p(true)], cv, kind)
        hits += regression_test(rs[k:], rs[:k], tolerance=TOL, confidence=C).regressed
    return hits / trials


@pytest.mark.parametrize(("kind", "cv"), [("normal", 0.0), ("normal", 0.05), ("normal", 0.3), ("heavy", 0.1),
                                          ("heavy", 0.3), ("drift", 0.05), ("drift", 0.2)])
def test_false_regression_at_the_tolerance(kind: str, cv: float) -> None:
    assert_rate(f"run effects {kind} CV {cv:.0%}, true change = tolerance", _rate(cv, kind, TOL), TRIALS, C)


def test_a_single_run_bound_ignoring_run_effects_would_flag_a_third() -> None:
    """What the verdict replaces: one run vs the latest baseline run, within-run errors only."""
    rng = np.random.default_rng(3)
    flagged = 0
    for _ in range(TRIALS):
        a, b = runs(rng, np.r_[0.0, math.log1p(TOL)], 0.1, "normal")
        flagged += (b.y - a.y - math.log1p(TOL)) / math.hypot(a.s, b.s) > 1.6448536
    assert flagged / TRIALS > 0.25


@pytest.mark.parametrize(("cv", "true", "least"), [(0.05, 0.2, 0.6), (0.05, 0.4, 0.95), (0.1, 0.4, 0.7),
                                                   (0.0, 0.1, 0.5)])
def test_power(cv: float, true: float, least: float) -> None:
    assert _rate(cv, "normal", true, trials=300) >= least


def test_too_little_history_says_so_and_what_decides() -> None:
    base = [RunEstimate(math.log(0.100), 0.01), RunEstimate(math.log(0.102), 0.01)]
    cur = [RunEstimate(math.log(0.125), 0.01)]
    r = regression_test(cur, base, tolerance=TOL, confidence=C)
    assert not r.known and not r.regressed and not r.ruled_out and r.more_runs == 1
    assert "run-to-run variation unknown (2 baseline runs in history, 3 needed)" in r.text
    assert "a regression only if runs of the same code vary by less than CV" in r.text
    assert "1 more baseline run (the suite run again on the baseline's code" in r.text
    assert 0.05 < r.needed_cv < 0.15


def test_enough_history_names_the_spread_and_decides() -> None:
    ys = [0.100, 0.104, 0.097, 0.101, 0.099, 0.103]
    base = [RunEstimate(math.log(y), 0.005) for y in ys]
    r = regression_test([RunEstimate(math.log(0.150), 0.005)], base, tolerance=TOL, confidence=C)
    assert r.known and r.regressed and r.df == 5
    assert "vs 6 baseline runs, between-run spread CV" in r.text and "REGRESSED" in r.text
    ok = regression_test([RunEstimate(math.log(0.0995), 0.005)], base, tolerance=TOL, confidence=C)
    assert ok.ruled_out and "within the 5% regression tolerance" in ok.text
    big = regression_test([RunEstimate(math.log(30.0), 0.01)], [RunEstimate(math.log(y * 400), 0.01) for y in ys],
                          tolerance=0.10, confidence=C, smaller_is_better=False)
    assert big.regressed  # throughput 40 -> 30: lower is worse


def test_from_bounds_and_spread() -> None:
    r = RunEstimate.from_bounds(1.0, math.exp(-0.1645), math.exp(0.1645), 0.95)
    assert r is not None and r.s == pytest.approx(0.1, rel=1e-3)
    assert RunEstimate.from_bounds(0.0, None, None, 0.95) is None
    one = RunEstimate.from_bounds(2.0, None, 2.0 * math.exp(0.1645), 0.95)
    assert one is not None and one.s == pytest.approx(0.1, rel=1e-3)
    s = spread([RunEstimate(math.log(x), 0.0) for x in (1.0, 1.1, 0.9)])
    assert s.k == 3 and s.cv == pytest.approx(0.1, abs=0.01)


def test_one_run_with_a_blown_up_bound_does_not_swallow_the_run_effect() -> None:
    """Seen on a busy machine: one run's bounds 20.2 ms - 1794 ms (a burst of slow requests). With
    the mean of the within-run variances the run effect read 0 and the current run's own was left out."""
    ys = [20.7, 30.5, 21.2, 22.3, 20.8, 20.6, 20.7, 20.6, 28.9]
    base = [RunEstimate(math.log(y), 0.01) for y in ys]
    base[4] = RunEstimate(math.log(20.8), math.log(1794 / 20.2) / (2 * 1.645))
    s = spread(base)
    assert s.cv > 0.1
    r = regression_test([RunEstimate(math.log(26.8), 0.01)], base, tolerance=TOL, confidence=C)
    assert not r.regressed and "between-run spread CV 1" in r.text
