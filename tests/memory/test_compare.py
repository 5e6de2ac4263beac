"""The max-safe-batch ratio bound: exact null distribution, seeded false-pass simulations at the
boundary (<= 1 - c + 3 standard errors) and power."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pytest_perfgate.memory.compare import _u_cdf, min_runs, rank_for, ratio_bound

C = 0.95
TRIALS = 3000


def brute_cdf(n: int, m: int) -> list[float]:
    """P(U <= u) by enumerating which ranks of n + m the x's take (U = pairs with x above y)."""
    counts = [0] * (n * m + 1)
    for xs in itertools.combinations(range(n + m), n):
        u = sum(r - i for i, r in enumerate(xs))  # y's below each x
        counts[u] += 1
    total = sum(counts)
    return list(np.cumsum(counts) / total)


@pytest.mark.parametrize(("n", "m"), [(1, 1), (2, 3), (3, 3), (4, 5), (5, 5)])
def test_null_distribution_is_exact(n: int, m: int) -> None:
    assert _u_cdf(n, m) == pytest.approx(brute_cdf(n, m))


def test_ranks_and_fewest_runs() -> None:
    assert rank_for(3, 3, 0.05) == 1  # P(U = 0) = 1/20
    assert rank_for(2, 2, 0.05) == 0  # 1/6: no bound
    assert min_runs(0.05) == 3 and min_runs(0.025) == 4 and min_runs(0.0125) == 5
    cdf = _u_cdf(6, 6)
    k = rank_for(6, 6, 0.05)
    assert cdf[k - 1] <= 0.05 < cdf[k]


def test_bound_on_known_data() -> None:
    b = ratio_bound([32, 32, 32], [27, 27, 27], 0.95)
    assert b.estimate == pytest.approx(32 / 27) and b.lower == pytest.approx(32 / 27) and b.bounded
    few = ratio_bound([32, 31], [27, 26], 0.95)
    assert not few.bounded and few.lower == 0.0 and math.isinf(few.upper)
    with pytest.raises(ValueError, match="must be finite and > 0"):
        ratio_bound([0, 1, 2], [1, 2, 3], 0.95)
    with pytest.raises(ValueError, match="no reference runs"):
        ratio_bound([1, 2, 3], [], 0.95)


def _false_pass(rng: np.random.Generator, draw_pair: object, thr: float, n: int, candidates: int = 1) -> float:
    passes = 0
    for _ in range(TRIALS):
        best_lower = -math.inf
        ys = draw_pair(rng, n, 1.0)  # type: ignore[operator]
        for _c in range(candidates):
            xs = draw_pair(rng, n, thr)  # type: ignore[operator]
            b = ratio_bound(xs, ys, C, candidates=candidates)
            best_lower = max(best_lower, b.lower)
        passes += best_lower > thr
    return passes / TRIALS


def _limit(alpha: float) -> float:
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / TRIALS)


def lognormal(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    return scale * 30 * np.exp(rng.normal(0, 0.1, n))


def integer_batches(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    """Max safe batches are integers with ties: default ~ 26..30, treatment exactly ``scale`` x it."""
    return scale * rng.integers(26, 31, n).astype(float)


@pytest.mark.parametrize("n", [3, 5])
def test_false_pass_rate_at_the_boundary_continuous(n: int) -> None:
    rate = _false_pass(np.random.default_rng(1401 + n), lognormal, 2.0, n)
    assert rate <= _limit(1 - C), rate


def test_false_pass_rate_at_the_boundary_integer_ties() -> None:
    rate = _false_pass(np.random.default_rng(1402), integer_batches, 2.0, 4)
    assert rate <= _limit(1 - C), rate


def test_false_pass_rate_when_the_best_of_two_settings_is_picked() -> None:
    """Both candidates sit exactly on the threshold; the winner's bound is Bonferroni-split."""
    rate = _false_pass(np.random.default_rng(1403), lognormal, 2.0, 4, candidates=2)
    assert rate <= _limit(1 - C), rate


def test_power() -> None:
    """A true ratio 30% above the threshold passes >= 90% of the time with 5 runs a side."""
    rng = np.random.default_rng(1404)
    passes = sum(ratio_bound(lognormal(rng, 5, 2.6), lognormal(rng, 5, 1.0), C).lower > 2.0 for _ in range(1000))
    assert passes / 1000 >= 0.9, passes
