"""verdicts/sorting.stable_argsort is np.argsort(x, kind="stable"), index for index (issue 41: it
replaced the scalar argsort of the ranks and the arrival order)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_perfgate.verdicts import sorting
from pytest_perfgate.verdicts.ranks import doubled_ranks
from pytest_perfgate.verdicts.sorting import stable_argsort

EPS = np.finfo(float).eps


def _draw(rng: np.random.Generator, kind: int, n: int) -> np.ndarray:
    if kind == 0:
        return rng.normal(size=n)
    if kind == 1:  # ties
        return np.round(rng.normal(size=n), 2)
    if kind == 2:  # one top-bits run: only the lowest mantissa bits differ (the put-right path, every value)
        return 1.0 + rng.integers(0, 50, n) * EPS
    if kind == 3:  # both zeros, infinities, subnormals, the largest double
        return rng.choice([-0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 5e-324, -5e-324, 1e308, -1e308], n)
    if kind == 4:  # heavy tail of both signs
        return rng.lognormal(-3, 1, n) * rng.choice([1, -1], n)
    if kind == 5:  # send times: runs of equal times (one a request, its chunk gaps share it)
        return np.repeat(np.cumsum(rng.exponential(0.01, n // 8 + 1)), 8)[:n]
    return np.full(n, 3.25)


@pytest.mark.parametrize("kind", range(7))
def test_it_is_numpys_stable_argsort(kind: int) -> None:
    rng = np.random.default_rng(kind)
    for n in (1, 2, 3, sorting.SMALL - 1, sorting.SMALL, sorting.SMALL + 1, 1 << 14, (1 << 14) + 1,
              *rng.integers(sorting.SMALL, 80_000, 8)):
        x = _draw(rng, kind, int(n))
        got = stable_argsort(x)
        assert got.dtype == np.int64
        assert np.array_equal(got, np.argsort(x, kind="stable")), (kind, n)


def test_values_that_share_their_top_bits_are_put_right() -> None:
    """With k bits of the word for the index, a word keeps 52 - k bits of the mantissa: distinct
    values within a relative 2**-(52 - k) of each other share their top bits, and only the sort of
    their run by value orders them."""
    rng = np.random.default_rng(7)
    x = 0.5 + rng.integers(0, 1 << 20, 300_000) * EPS / 2
    assert np.unique(x).size > 200_000
    assert np.array_equal(stable_argsort(x), np.argsort(x, kind="stable"))


def test_nan_is_numpys_own_sort() -> None:
    x = np.random.default_rng(3).normal(size=10_000)
    x[[5, 700, 9000]] = np.nan
    assert np.array_equal(stable_argsort(x), np.argsort(x, kind="stable"))


def test_ranks_through_it_are_scipys() -> None:
    from scipy.stats import rankdata

    rng = np.random.default_rng(11)
    for kind in range(7):
        x = _draw(rng, kind, 50_000)
        assert np.array_equal(doubled_ranks(x), (2 * rankdata(x)).astype(np.int64))
