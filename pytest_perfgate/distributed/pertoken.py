"""The cross-node cost of one decoded token, and its gate.

**Per-token model.** A decoded token of a Megatron-style tensor-parallel model runs
``layers x 2`` all-reduces of ``batch x hidden x dtype bytes`` one after the other. The per-token
communication time is the sum of that many consecutive measured all-reduce times: the measured
per-iteration series is cut into disjoint blocks of ``allreduces_per_token`` (in measurement order,
so slow phases of the link stay together as they would in a real decode step), and each block sum
is one per-token sample. No resampling: every per-token sample is a real measured sequence.

**Gate: P99(cross) - P99(single) < max**, an exact, distribution-free order-statistic bound (not a
percentile bootstrap). With n i.i.d. samples the number of samples under the true q-quantile
xi_q is Binomial(n, q), so for the order statistics X_(k):
- upper bound: P(X_(k) >= xi_q) = P(Bin(n, q) <= k - 1); the smallest k with this >= 1 - a;
- lower bound: P(X_(k) <= xi_q) = P(Bin(n, q) >= k); the largest k with this >= 1 - a.
(``scipy.stats.binom``.) The difference D = xi_q(cross) - xi_q(single) is bounded by combining one
bound of each run with a Bonferroni split of the error a = 1 - c, a/2 each:
- D <= U_cross - L_single with probability >= 1 - a/2 - a/2 = c (upper bound of D);
- D >= L_cross - U_single with probability >= c (lower bound of D).
The gate passes when the upper bound is under the threshold, fails when the lower bound is over
it, and is inconclusive otherwise (too few samples for a bound, or the bounds straddle it); the
inconclusive verdict states the per-run sample count at which a bound would exist. The two runs
must be independent of each other (separate measurements), which they are.

**The gate is evaluated by the framework**: this bound is exactly the quantile Method's
``compare = "difference"`` (each run's one-sided order-statistic bounds at ``1 - a/2``, combined), so
the suite passes the two per-token :class:`~pytest_perfgate.verdicts.samples.Samples` to
``perfgate.check`` (stored data, ``--perfgate-baseline``, ``--perfgate-confidence``).
:func:`quantile_difference` stays as the stand-alone statement of it (the tuning sweep's median gain
uses it; a test shows both agree).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

Array = npt.NDArray[np.float64]

METHOD = "order-statistic difference (Bonferroni, scipy.stats.binom)"


def per_token_times(allreduce_times_s: Sequence[float] | Array, allreduces_per_token: int) -> Array:
    """Disjoint consecutive block sums of ``allreduces_per_token`` measured times (leftover dropped)."""
    if allreduces_per_token < 1:
        raise ValueError(f"allreduces_per_token must be >= 1, got {allreduces_per_token}")
    x = np.asarray(allreduce_times_s, dtype=np.float64)
    if x.ndim != 1 or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError("all-reduce times must be a 1-D series of finite, non-negative seconds")
    n = x.size // allreduces_per_token
    return np.asarray(x[: n * allreduces_per_token].reshape(n, allreduces_per_token).sum(axis=1), dtype=np.float64)


def upper_rank(n: int, q: float, alpha: float) -> int | None:
    """Smallest 1-based k with P(Bin(n, q) <= k - 1) >= 1 - alpha, i.e. X_(k) >= xi_q w.p. >= 1 - alpha."""
    if n <= 0:
        return None
    k = int(sps.binom.ppf(1 - alpha, n, q)) + 1
    while k > 1 and sps.binom.cdf(k - 2, n, q) >= 1 - alpha:
        k -= 1
    while k <= n and sps.binom.cdf(k - 1, n, q) < 1 - alpha:
        k += 1
    return k if k <= n else None


def lower_rank(n: int, q: float, alpha: float) -> int | None:
    """Largest 1-based k with P(Bin(n, q) >= k) >= 1 - alpha, i.e. X_(k) <= xi_q w.p. >= 1 - alpha."""
    if n <= 0:
        return None
    k = int(sps.binom.ppf(alpha, n, q))  # P(Bin >= k) = 1 - cdf(k - 1)
    while k < n and sps.binom.sf(k, n, q) >= 1 - alpha:  # sf(k) = P(Bin >= k + 1)
        k += 1
    while k >= 1 and sps.binom.sf(k - 1, n, q) < 1 - alpha:
        k -= 1
    return k if k >= 1 else None


def samples_for_upper(q: float, alpha: float) -> int:
    """Fewest samples for which an upper bound of the q-quantile exists: q^n <= alpha."""
    return math.ceil(math.log(alpha) / math.log(q))


@dataclass(frozen=True)
class DiffBound:
    q: float
    confidence: float
    observed: float  # empirical q-quantile (inverted CDF) of cross minus that of single, seconds
    lower: float  # -inf when no bound exists
    upper: float  # +inf when no bound exists
    n_cross: int
    n_single: int
    cross_q: float
    single_q: float
    needed: int | None  # per-run samples at which both bounds exist (None: they do)

    def decide(self, max_s: float) -> str:
        if self.upper < max_s:
            return "pass"
        if self.lower > max_s:
            return "fail"
        return "inconclusive"


def quantile_difference(cross: Array, single: Array, q: float = 0.99, confidence: float = 0.95) -> DiffBound:
    """Bounds of xi_q(cross) - xi_q(single) at ``confidence`` (see the module doc)."""
    a = (1 - confidence) / 2
    xc, xs = np.sort(np.asarray(cross, dtype=np.float64)), np.sort(np.asarray(single, dtype=np.float64))
    if xc.size == 0 or xs.size == 0:
        raise ValueError("quantile_difference: both runs need at least one sample")

    def at(x: Array, k: int | None, default: float) -> float:
        return float(x[k - 1]) if k is not None else default

    uc, ls = at(xc, upper_rank(xc.size, q, a), math.inf), at(xs, lower_rank(xs.size, q, a), -math.inf)
    lc, us = at(xc, lower_rank(xc.size, q, a), -math.inf), at(xs, upper_rank(xs.size, q, a), math.inf)
    qc = float(np.quantile(xc, q, method="inverted_cdf"))
    qs = float(np.quantile(xs, q, method="inverted_cdf"))
    need = samples_for_upper(q, a)
    needed = need if min(xc.size, xs.size) < need else None
    return DiffBound(q, confidence, qc - qs, lc - us, uc - ls, int(xc.size), int(xs.size), qc, qs, needed)


@dataclass
class PerToken:
    """The per-token times (seconds) a module measured, single-node and cross-node, for the tests
    after the one that measured them (a module-scoped fixture holds one)."""

    single: Array | None = None
    cross: Array | None = None

    @property
    def single_s(self) -> float | None:
        """Median per-token time on one node, None when not measured."""
        return float(np.median(self.single)) if self.single is not None and self.single.size else None

    @property
    def overhead_s(self) -> float | None:
        """Median per-token cross-node overhead (cross minus single), None when not measured."""
        if self.cross is None or self.single_s is None or not self.cross.size:
            return None
        return float(np.median(self.cross)) - self.single_s
