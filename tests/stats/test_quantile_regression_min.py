"""Baseline regression of a quantile, mirrored (issue 22): a bigger-is-better gate (``min``, e.g. the
P1 of per-request decode rate) regresses when its quantile drops below (1 - tolerance) x the
baseline's. store/baseline.py passes factor 1 - tolerance and ``larger_is_worse=False`` to the
permutation test (verdicts/regression.py), whose p-value for "worse" is then the lower tail
(1 + #{permuted <= observed}) / (B + 1). Lognormal sigma 0.5, 500 requests a run, seeded: false
alarms at no change and exactly at -10% <= 1 - c + 3 SE; a 40% slower decode (rate / 1.4) detected."""

from __future__ import annotations

import numpy as np
import pytest
from simhelp import assert_rate

from pytest_perfgate.config import Thresholds, load_thresholds
from pytest_perfgate.store import baseline
from pytest_perfgate.verdicts.regression import quantile_shift_test
from pytest_perfgate.verdicts.samples import make_samples

C = 0.95
N = 500
TOL = 0.10
B = 199  # permutations a trial (the test is exact for any B; the gate uses 1,999)

TOML = """
[phases.p1]
title = "p1"
[gates.p1_rate]
phase = "p1"
metric = "decode_rate"
statistic = "p1"
min = "5 tok/s"
regression = "10%"
"""


def _rate(factor: float, trials: int, seed: int, tol: float = TOL, q: float = 0.01) -> float:
    """Alarms of the mirrored test: current = baseline's distribution x ``factor`` (a drop below 1)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for i in range(trials):
        cur = rng.lognormal(np.log(30.0), 0.5, N) * factor
        ref = rng.lognormal(np.log(30.0), 0.5, N)
        shift = quantile_shift_test(cur, ref, q, 1 - tol, larger_is_worse=False, permutations=B, seed=i)
        hits += shift.p_worse <= 1 - C
    return hits / trials


@pytest.mark.parametrize("q,factor,label", [(0.01, 1.0, "P1, no change"), (0.01, 1 - TOL, "P1, exactly at -10%"),
                                            (0.5, 1 - TOL, "P50, exactly at -10%")])
def test_false_regression_alarms_bigger_is_better(q: float, factor: float, label: str) -> None:
    trials = 1000
    rate = _rate(factor, trials, seed=int(q * 1000 + factor * 100), q=q)
    assert_rate(f"mirrored quantile regression, {label}, {N} a run", rate, trials)


def test_power_forty_percent_slower_decode_on_p1() -> None:
    """Every request's decode rate / 1.4 (the mirror of +40% on a latency P99): measured 67.7% / 62.0% at
    a 5% / 10% tolerance, 300 trials each (the plain permutation test: 80.7% / 68.0%, without the
    studentization that keeps runs of different shape or dependent runs honest)."""
    at5, at10 = _rate(1 / 1.4, 300, seed=141, tol=0.05), _rate(1 / 1.4, 300, seed=142)
    print(f"POWER mirrored P1 rate / 1.4 at n = {N}: {at5:.3f} (tolerance 5%), {at10:.3f} (10%)")
    assert at5 >= 0.62 and at10 >= 0.55


def test_min_gate_through_the_baseline_comparison(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "thresholds.toml"
    p.write_text(TOML)
    th: Thresholds = load_thresholds(p)
    g = th.gate("p1_rate")
    assert not baseline.smaller_is_better(g)
    rng = np.random.default_rng(5)
    ref = make_samples(rng.lognormal(np.log(30), 0.5, N), "tok/s")
    drop = make_samples(rng.lognormal(np.log(30 * 0.6), 0.5, N), "tok/s")
    cmp = baseline.compare(g, drop, ref, confidence=C, thresholds=th)
    assert cmp is not None and cmp.regressed and "permutation test of the p1 against 0.9 x baseline" in cmp.text, cmp
    again = baseline.compare(g, drop, ref, confidence=C, thresholds=th)
    assert again is not None and again.text == cmp.text  # seeded: the stored file re-evaluates the same
    up = make_samples(rng.lognormal(np.log(30 * 1.3), 0.5, N), "tok/s")
    better = baseline.compare(g, up, ref, confidence=C, thresholds=th)
    assert better is not None and not better.regressed and "within the 10% regression tolerance" in better.text
