"""How much larger is one setting's max safe batch than another's? A distribution-free bound.

Runs of a setting are repeated (the sweep is noisy); the ratio of two settings is estimated on the
log scale by Hodges-Lehmann (the median of all pairwise log ratios) and bounded by the exact
Mann-Whitney confidence interval for a shift: with n and m runs, the one-sided lower bound at
confidence c is the k-th smallest of the n*m pairwise log ratios, k the largest rank with
P(U <= k - 1) <= 1 - c under the null (exact distribution of U, no normal approximation). The
closed bound keeps its coverage for integer batches with ties (Noether 1967). When the best of
several candidate settings is chosen from the same runs, the bound is Bonferroni-split over the
candidates, so choosing the winner does not inflate its claimed gain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=256)
def _u_cdf(n: int, m: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0..n*m under the null (all rankings equally likely)."""
    # counts[k] = number of rankings with U = k, built by the standard recursion on (n, m)
    f = np.zeros((n + 1, m + 1, n * m + 1))
    f[0, :, 0] = 1.0
    f[:, 0, 0] = 1.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            # the largest observation is an x (adds j to U) or a y
            f[i, j, j:] += f[i - 1, j, : n * m + 1 - j]
            f[i, j, :] += f[i, j - 1, :]
    counts = f[n, m]
    return tuple(float(v) for v in np.cumsum(counts) / counts.sum())


def rank_for(n: int, m: int, alpha: float) -> int:
    """The largest k >= 1 with P(U <= k - 1) <= alpha; 0 when even k = 1 is out of reach."""
    cdf = _u_cdf(n, m)
    k = 0
    while k < len(cdf) and cdf[k] <= alpha + 1e-12:
        k += 1
    return k


def min_runs(alpha: float) -> int:
    """Fewest runs per setting (equal numbers) for which any bound exists: 1 / C(2n, n) <= alpha."""
    n = 1
    while 1.0 / math.comb(2 * n, n) > alpha + 1e-12:
        n += 1
    return n


@dataclass(frozen=True)
class RatioBound:
    estimate: float  # Hodges-Lehmann ratio
    lower: float     # one-sided lower bound (0 when no bound exists)
    upper: float     # one-sided upper bound (inf when none)
    confidence: float
    n: int
    m: int
    k: int

    @property
    def bounded(self) -> bool:
        return self.k > 0


def ratio_bound(treatment: Sequence[float], reference: Sequence[float], confidence: float,
                candidates: int = 1) -> RatioBound:
    """Bounds (each one-sided at ``confidence``, Bonferroni-split over ``candidates``) on the ratio
    treatment / reference of two positive measurements (e.g. max safe batches)."""
    x = np.asarray(treatment, dtype=float)
    y = np.asarray(reference, dtype=float)
    for name, a in (("treatment", x), ("reference", y)):
        if a.size == 0:
            raise ValueError(f"ratio_bound: no {name} runs")
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ValueError(f"ratio_bound: {name} values must be finite and > 0, got {a.tolist()}")
    if not 0 < confidence < 1 or candidates < 1:
        raise ValueError(f"ratio_bound: confidence {confidence} must be in (0, 1), candidates {candidates} >= 1")
    alpha = (1 - confidence) / candidates
    if (np.ptp(x) == 0) != (np.ptp(y) == 0):  # one side without spread: no shift model holds (sign bounds)
        return _sign_ratio(x, y, confidence, alpha)
    d = np.sort((np.log(x)[:, None] - np.log(y)[None, :]).ravel())
    k = rank_for(x.size, y.size, alpha)
    est = float(np.exp(np.median(d)))
    if k == 0:
        return RatioBound(est, 0.0, math.inf, confidence, x.size, y.size, 0)
    return RatioBound(est, float(np.exp(d[k - 1])), float(np.exp(d[d.size - k])), confidence, x.size, y.size, k)


def _sign_ratio(x: np.ndarray, y: np.ndarray, confidence: float, alpha: float) -> RatioBound:
    """The ratio of medians when one side's repeats are all equal (e.g. a deterministic default batch):
    a Mann-Whitney shift interval assumes both sides share a shape, which a point mass cannot (false
    pass 8-12% with both candidates at exactly 2x). The varying side's median is bounded by its order
    statistics (exact sign bounds: rank k with P(Binomial(n, 1/2) <= k - 1) <= alpha), the constant
    side is its value. No bound below log(alpha)/log(1/2) repeats (6 at 0.025)."""
    flip = np.ptp(x) == 0
    v, const = (y, float(x[0])) if flip else (x, float(y[0]))
    n = v.size
    k = 0
    while k < n and sum(math.comb(n, j) for j in range(k + 1)) / 2**n <= alpha + 1e-12:
        k += 1
    srt = np.sort(v)
    med = float(np.median(v))
    if k == 0:
        est = const / med if flip else med / const
        return RatioBound(est, 0.0, math.inf, confidence, x.size, y.size, 0)
    lo_v, hi_v = float(srt[k - 1]), float(srt[n - k])
    if flip:  # constant treatment over a varying reference
        return RatioBound(const / med, const / hi_v, const / lo_v, confidence, x.size, y.size, k)
    return RatioBound(med / const, lo_v / const, hi_v / const, confidence, x.size, y.size, k)


def runs_needed(treatment: Sequence[float], reference: Sequence[float], alpha: float) -> int:
    """Repeats a setting needs before any bound exists: the Mann-Whitney minimum, or the sign
    bound's log(alpha) / log(1/2) when one side's repeats are all equal."""
    if (np.ptp(np.asarray(treatment)) == 0) != (np.ptp(np.asarray(reference)) == 0):
        return math.ceil(math.log(alpha) / math.log(0.5) - 1e-12)
    return min_runs(alpha)
