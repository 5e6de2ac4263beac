"""A regression test for a quantile against a baseline run (``--perfgate-baseline``, ``perfgate diff``).

Each run's exact order-statistic bounds, combined, need both bounds at 1 - alpha/2 and compare the
current run's lower bound (a P98 at n = 500) with the baseline's upper one (a P99.8): a 40% slower
P99 was detected 31.5% of the time at n = 500 and never below 368 samples a run. This module tests
the quantile itself by permutation:

H0 (no regression beyond the tolerance): the current run's values are distributed as the
baseline's scaled by ``factor`` (1 + tolerance for smaller-is-better, 1 - tolerance otherwise).
The statistic is the difference of the two runs' empirical q-quantiles (current minus scaled
baseline); under H0 the pooled values are exchangeable, so its permutation distribution gives an
exact p-value (``(1 + #{permuted >= observed}) / (B + 1)``, B seeded permutations: the same data
give the same p-value, so re-evaluating a stored file reproduces the verdict). The assumption: a
change within the tolerance moves the distribution by a scale, not its shape alone. Measured rates:
docs/statistics.md (tests/stats/test_quantile_regression.py; the mirrored, bigger-is-better direction,
``larger_is_worse=False`` with factor 1 - tolerance, in tests/stats/test_quantile_regression_min.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
PERMUTATIONS = 1999
_CHUNK = 200  # permutations a batch (memory: CHUNK x pooled values)
METHOD = "permutation test of the quantile"


@dataclass(frozen=True)
class QuantileShift:
    """The test's outcome: p-values of "worse beyond the tolerance" and of "not worse beyond it"."""

    p_worse: float
    p_within: float
    observed: float  # current quantile minus the scaled baseline's (the metric's base unit)
    permutations: int


def _quantile_rows(x: Array, q: float) -> Array:
    """Empirical q-quantile X_(ceil(nq)) of each row (the package's one percentile definition)."""
    from .bounds import empirical_rank

    k = empirical_rank(int(x.shape[1]), q)
    return np.partition(x, k - 1, axis=1)[:, k - 1]


def quantile_shift_test(current: Array, baseline: Array, q: float, factor: float, larger_is_worse: bool = True,
                        permutations: int = PERMUTATIONS, seed: int = 0) -> QuantileShift:
    """Permutation test of the q-quantile of ``current`` against ``factor`` x ``baseline`` (see the module)."""
    cur = np.asarray(current, dtype=np.float64)
    ref = np.asarray(baseline, dtype=np.float64) * factor
    if cur.size < 1 or ref.size < 1:
        raise ValueError("a quantile regression test needs samples in both runs")
    pooled = np.concatenate([cur, ref])
    n = int(cur.size)
    obs = float(_quantile_rows(cur[None, :], q)[0] - _quantile_rows(ref[None, :], q)[0])
    rng = np.random.default_rng(seed)
    ge = le = 0
    done = 0
    while done < permutations:
        b = min(_CHUNK, permutations - done)
        perm = pooled[np.argsort(rng.random((b, pooled.size)), axis=1)]
        d = _quantile_rows(perm[:, :n], q) - _quantile_rows(perm[:, n:], q)
        ge += int(np.count_nonzero(d >= obs))
        le += int(np.count_nonzero(d <= obs))
        done += b
    p_hi, p_lo = (1 + ge) / (permutations + 1), (1 + le) / (permutations + 1)
    worse, within = (p_hi, p_lo) if larger_is_worse else (p_lo, p_hi)
    return QuantileShift(worse, within, obs, permutations)


def bound_size(q: float, c: float) -> int:
    """Samples one run needs before both its one-sided q-quantile bounds at ``c`` exist."""
    return math.ceil(math.log(1 - c) / math.log(max(q, 1 - q)))
