"""The statistics behind every verdict: exact bounds, MLPerf's table, false-pass rates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from pytest_perfgate.verdicts import bounds as stats


@pytest.mark.parametrize(
    ("q", "c", "exceed", "n"),
    [
        (0.99, 0.99, 0, 459),
        (0.99, 0.99, 1, 662),
        (0.99, 0.99, 2, 838),
        (0.99, 0.99, 5, 1307),
        (0.99, 0.99, 10, 2010),
        (0.90, 0.99, 0, 44),
        (0.999, 0.99, 0, 4603),
        (0.99, 0.95, 0, 299),
    ],
)
def test_mlperf_early_stopping_table(q: float, c: float, exceed: int, n: int) -> None:
    assert stats.early_stopping_min_samples(q, c, exceed) == n
    assert stats.quantile_pass_possible(n, exceed, q, c)
    assert not stats.quantile_pass_possible(n - 1, exceed, q, c)


@pytest.mark.parametrize("n", [1, 2, 5, 50, 299, 1000])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_order_statistic_ranks_have_exact_coverage(n: int, q: float) -> None:
    c = 0.95
    lo, hi = stats.quantile_ranks(n, q, c)
    if hi is not None:
        assert sps.binom.cdf(hi - 1, n, q) >= c
        assert hi == 1 or sps.binom.cdf(hi - 2, n, q) < c  # smallest such rank
    else:
        assert sps.binom.cdf(n - 1, n, q) < c  # even the maximum is not a 95% upper bound
    if lo is not None:
        assert sps.binom.sf(lo - 1, n, q) >= c  # P(Bin >= lo) >= c
        assert lo == n or sps.binom.sf(lo, n, q) < c


def _false_pass_rate(draw: object, q: float, thr: float, direction: str, n: int, trials: int, c: float) -> float:
    rng = np.random.default_rng(12345)
    passes = 0
    for _ in range(trials):
        x = draw(rng, n)  # type: ignore[operator]
        outcome, _needed = stats.quantile_decision(x, q, c, direction, thr)
        passes += outcome == "pass"
    return passes / trials


@pytest.mark.parametrize("n", [300, 600])
def test_false_pass_rate_at_threshold_p99_lognormal(n: int) -> None:
    """True P99 exactly at the threshold: a max gate may pass at most (1 - c) of the time."""
    mu, sigma = math.log(100.0), 0.3
    thr = float(sps.lognorm.ppf(0.99, sigma, scale=math.exp(mu)))
    rate = _false_pass_rate(lambda r, k: r.lognormal(mu, sigma, k), 0.99, thr, "max", n, 2000, 0.95)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)  # within sampling noise of 1 - c
    assert rate > 0.0  # the rule is not vacuously conservative


def test_false_pass_rate_min_gate_p10_exponential() -> None:
    thr = float(sps.expon.ppf(0.10, scale=30.0))
    rate = _false_pass_rate(lambda r, k: r.exponential(30.0, k), 0.10, thr, "min", 400, 2000, 0.95)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)


def test_clopper_pearson_false_pass_rate() -> None:
    """acceptance >= 70% gate when the true rate is exactly 70%."""
    rng = np.random.default_rng(7)
    trials, n, p, c = 4000, 500, 0.70, 0.95
    k = rng.binomial(n, p, size=trials)
    passes = sum(stats.clopper_pearson(int(ki), n, c).lower > p for ki in k)
    assert passes / trials <= 0.05


def test_clopper_pearson_edges() -> None:
    b = stats.clopper_pearson(0, 10, 0.95)
    assert b.lower == 0.0 and 0 < b.upper < 0.3
    b = stats.clopper_pearson(10, 10, 0.95)
    assert b.upper == 1.0 and 0.7 < b.lower < 1
    assert math.isnan(stats.clopper_pearson(0, 0, 0.95).observed)


def test_mean_bounds_edges() -> None:
    one = stats.mean_bounds(np.array([3.0]), 0.95)
    assert one.observed == 3.0 and one.lower == -math.inf and one.upper == math.inf
    eq = stats.mean_bounds(np.array([2.0] * 12), 0.95)
    assert eq.lower == eq.upper == 2.0
    few = stats.mean_bounds(np.array([2.0, 2.0, 2.0]), 0.95, "max")  # < 12 samples: no upper bound
    assert few.upper == math.inf and few.lower == 2.0 and "12 samples" in few.warning


def test_needed_is_reported_and_consistent() -> None:
    x = np.full(100, 10.0)  # all well under a 20 ms P99 bound, but 100 samples can't pass at 95%
    outcome, needed = stats.quantile_decision(x, 0.99, 0.95, "max", 20.0)
    assert outcome == "inconclusive" and needed == 299
    x = np.full(299, 10.0)
    assert stats.quantile_decision(x, 0.99, 0.95, "max", 20.0) == ("pass", None)


def test_clear_failure_decides_with_a_handful() -> None:
    x = np.full(5, 500.0)
    assert stats.quantile_decision(x, 0.99, 0.95, "max", 150.0)[0] == "fail"
