"""Confidence bounds and decision rules (see docs/statistics.md and METRICS.md).

Every bound here is one-sided at confidence ``c``: a ``max`` gate passes when the upper bound is
under the threshold (the claim holds with probability >= c), fails when the lower bound is over it.
- quantiles: exact distribution-free order-statistic bounds (the number of samples under the true
  q-quantile is Binomial(n, q)); the pass rule is MLPerf LoadGen's early-stopping criterion;
- proportions: exact Clopper-Pearson bounds;
- means: Student-t bounds;
- comparisons of two sample sets (ratio, difference, reduction): percentile bootstrap, fixed seed.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special as spc
from scipy import stats as sps

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Bounds:
    observed: float
    lower: float  # one-sided lower bound at confidence c (-inf when the data can't give one)
    upper: float  # one-sided upper bound at confidence c (+inf when the data can't give one)
    method: str


# ---------------------------------------------------------------- quantiles (order statistics)


def _bcdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k) (scipy.special.bdtr: a ufunc, ~50x faster than scipy.stats.binom.cdf)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(spc.bdtr(k, n, p))


def quantile_ranks(n: int, q: float, c: float) -> tuple[int | None, int | None]:
    """1-based ranks (k_lo, k_hi) of the order statistics that bound the q-quantile at confidence c.

    P(X_(k_hi) >= xi_q) = P(Binomial(n, q) <= k_hi - 1) >= c, smallest such k_hi;
    P(X_(k_lo) <= xi_q) = P(Binomial(n, q) >= k_lo) >= c, largest such k_lo. None: not enough data.
    """
    if n <= 0:
        return None, None
    k_hi = int(sps.binom.ppf(c, n, q)) + 1
    # ppf is the smallest j with cdf(j) >= c; guard against float fuzz
    while k_hi > 1 and _bcdf(k_hi - 2, n, q) >= c:
        k_hi -= 1
    while _bcdf(k_hi - 1, n, q) < c and k_hi <= n:
        k_hi += 1
    hi = k_hi if k_hi <= n else None
    # largest j = k_lo - 1 with cdf(j) <= 1 - c
    j = int(sps.binom.ppf(1 - c, n, q))
    while j >= 0 and _bcdf(j, n, q) > 1 - c:
        j -= 1
    while j + 1 < n and _bcdf(j + 1, n, q) <= 1 - c:
        j += 1
    lo = j + 1 if j >= 0 else None
    return lo, hi


def quantile_bounds(x: Array, q: float, c: float) -> Bounds:
    n = int(x.size)
    k_lo, k_hi = quantile_ranks(n, q, c)
    ks = sorted({k - 1 for k in (k_lo, k_hi) if k is not None})
    part = np.partition(x, ks) if ks else x
    lower = float(part[k_lo - 1]) if k_lo is not None else -math.inf
    upper = float(part[k_hi - 1]) if k_hi is not None else math.inf
    # the empirical quantile X_(ceil(nq)): an order statistic, consistent with its bounds
    observed = float(np.quantile(x, q, method="inverted_cdf"))
    return Bounds(observed, lower, upper, "order-statistic")


def quantile_pass_possible(n: int, exceed: int, q: float, c: float) -> bool:
    """MLPerf early stopping: with ``exceed`` of ``n`` samples at/over the bound, does
    "the q-quantile is under the bound" hold at confidence c?  P[Bin(n, 1-q) <= exceed] <= 1-c."""
    return n > 0 and float(_bcdf(exceed, n, 1 - q)) <= 1 - c


def early_stopping_min_samples(q: float, c: float, exceed: int) -> int:
    """Smallest n at which ``exceed`` samples over the bound still let the claim pass."""
    n = exceed + 1
    while not quantile_pass_possible(n, exceed, q, c):
        n = n * 2
    lo = n // 2
    while lo + 1 < n:
        mid = (lo + n) // 2
        if quantile_pass_possible(mid, exceed, q, c):
            n = mid
        else:
            lo = mid
    return n


def quantile_decision(x: Array, q: float, c: float, direction: str, thr: float) -> tuple[str, int | None]:
    """("pass" | "fail" | "inconclusive", samples needed in all if the observed rates hold).

    For ``max``: pass iff P[Bin(n, 1-q) <= #(x >= thr)] <= 1-c (upper bound < thr);
    fail iff P[Bin(n, q) <= #(x <= thr)] <= 1-c (lower bound > thr). ``min`` mirrors it.
    """
    n = int(x.size)
    over = int(np.count_nonzero(x >= thr))
    under = int(np.count_nonzero(x <= thr))
    if direction == "max":
        good_bad = (over, under)  # (samples against passing, samples against failing)
    else:
        good_bad = (under, over)
        q = 1 - q  # mirror: P(x <= xi_q) = q  <=>  P(-x <= -xi_q) = 1 - q
    against_pass, against_fail = good_bad
    if _decides(n, against_pass, q, c):
        return "pass", None
    if _decides(n, against_fail, 1 - q, c):
        return "fail", None
    return "inconclusive", _needed(n, against_pass, against_fail, q, c)


def _decides(n: int, against: int, q: float, c: float) -> bool:
    return quantile_pass_possible(n, against, q, c)


def _needed(n: int, against_pass: int, against_fail: int, q: float, c: float) -> int | None:
    """Total samples at which the verdict would be decided if the observed fractions hold."""
    if n == 0:
        return early_stopping_min_samples(q, c, 0)
    rp, rf = against_pass / n, against_fail / n

    def decided(m: int) -> bool:
        return _decides(m, math.floor(rp * m), q, c) or _decides(m, math.floor(rf * m), 1 - q, c)

    return _search(n, decided)


def _search(n: int, decided: Callable[[int], bool], limit: int = 10**9) -> int | None:
    hi = max(n + 1, 2)
    while not decided(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = max(n, hi // 2)
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if decided(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ---------------------------------------------------------------- proportions (Clopper-Pearson)


def clopper_pearson(k: int, n: int, c: float) -> Bounds:
    if n == 0:
        return Bounds(math.nan, 0.0, 1.0, "clopper-pearson")
    lower = 0.0 if k == 0 else float(sps.beta.ppf(1 - c, k, n - k + 1))
    upper = 1.0 if k == n else float(sps.beta.ppf(c, k + 1, n - k))
    return Bounds(k / n, lower, upper, "clopper-pearson")


def proportion_needed(k: int, n: int, c: float, direction: str, thr: float) -> int | None:
    if n == 0:
        return None
    p = k / n

    def decided(m: int) -> bool:
        b = clopper_pearson(round(p * m), m, c)
        return b.lower > thr or b.upper < thr if direction == "min" else b.upper < thr or b.lower > thr

    if p == thr:
        return None
    return _search(n, decided)


# ---------------------------------------------------------------- means (Student t)


def mean_bounds(x: Array, c: float) -> Bounds:
    n = int(x.size)
    m = float(np.mean(x))
    if n < 2:
        return Bounds(m, -math.inf, math.inf, "t")
    s = float(np.std(x, ddof=1))
    half = float(sps.t.ppf(c, n - 1)) * s / math.sqrt(n)
    return Bounds(m, m - half, m + half, "t")


def mean_needed(x: Array, c: float, thr: float) -> int | None:
    n = int(x.size)
    if n < 2:
        return None
    m, s = float(np.mean(x)), float(np.std(x, ddof=1))
    if m == thr:
        return None
    return _search(n, lambda k: float(sps.t.ppf(c, k - 1)) * s / math.sqrt(k) < abs(m - thr))


# ---------------------------------------------------------------- bootstrap (comparisons)

BOOTSTRAP_RESAMPLES = 2000


def seed_for(name: str) -> int:
    """A fixed seed per gate name, so verdicts are reproducible run to run."""
    return zlib.crc32(name.encode("utf-8"))


def bootstrap_bounds(
    stat: Callable[[Array], Array],
    observed: float,
    c: float,
    draws: Array,
    method: str = "bootstrap",
) -> Bounds:
    """Percentile bounds from ``draws`` (one statistic value per resample)."""
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return Bounds(observed, -math.inf, math.inf, method)
    lo, hi = np.quantile(finite, [1 - c, c])
    return Bounds(observed, float(lo), float(hi), method)


def resample_stat(
    x: Array, stat_kind: str, q: float | None, rng: np.random.Generator, b: int, den: Array | None = None
) -> Array:
    """``b`` bootstrap replicates of a statistic of ``x`` (vectorised; memory-bounded)."""
    n = x.size
    if n == 1 and den is None:
        return np.full(b, float(x[0]))
    out = np.empty(b)
    chunk = max(1, min(b, 4_000_000 // max(n, 1)))
    for start in range(0, b, chunk):
        m = min(chunk, b - start)
        idx = rng.integers(0, n, size=(m, n))
        xs = x[idx]
        if den is not None:
            out[start : start + m] = xs.sum(axis=1) / den[idx].sum(axis=1)
        elif stat_kind == "mean":
            out[start : start + m] = xs.mean(axis=1)
        elif stat_kind == "quantile":
            assert q is not None
            out[start : start + m] = np.quantile(xs, q, axis=1, method="inverted_cdf")
        else:
            out[start : start + m] = xs.mean(axis=1)
    return out
