"""A regression test for a quantile against a baseline run (``--perfgate-baseline``, ``perfgate diff``).

Each run's exact order-statistic bounds, combined, need both bounds at 1 - alpha/2 and compare the
current run's lower bound (a P98 at n = 500) with the baseline's upper one (a P99.8): a 40% slower
P99 was detected 31.5% of the time at n = 500 and never below 368 samples a run. This module tests
the quantile itself by permutation:

H0 (no regression beyond the tolerance): the current run's q-quantile is at most ``factor`` x the
baseline's (1 + tolerance for smaller-is-better, 1 - tolerance otherwise). The statistic is the
difference of the two runs' empirical q-quantiles (current minus scaled baseline) **studentized** by
each run's own standard error: the spread of its order statistics one binomial standard deviation of
ranks either side of the quantile, times the run's tau (requests per independent one, from
:func:`~.dependence.estimate` on its values in arrival order; 1 when no dependence shows). Its
permutation distribution (the pooled values shuffled, the same studentized statistic) gives the
p-value ``(1 + #{permuted >= observed}) / (B + 1)``, B seeded permutations (the same data give the
same p-value, so re-evaluating a stored file reproduces the verdict).

Why studentized: the plain difference's permutation test assumes the two runs exchangeable under H0.
A current run narrower than the baseline with the same P99 x 1.05 breaks that (11.1% false alarms
for a nominal 5%), and so does dependence within a run (AR(1) phi 0.5 / 0.9: 9.3% / 26.5%); a
studentized permutation test stays asymptotically valid without exchangeability (Chung & Romano
2013), and the tau-widened standard error carries each run's own dependence. Measured rates:
docs/statistics.md ("Regression and two-run comparisons under dependence");
tests/stats/test_dependent_regression.py, tests/stats/test_quantile_regression.py (the mirrored,
bigger-is-better direction, ``larger_is_worse=False``, in tests/stats/test_quantile_regression_min.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
PERMUTATIONS = 1999
_CHUNK = 200  # permutations a batch (memory: CHUNK x pooled values)
SE_RANKS = 1.0  # ranks either side of the quantile for its standard error, in binomial standard deviations
METHOD = "studentized permutation test of the quantile"


@dataclass(frozen=True)
class QuantileShift:
    """The test's outcome: p-values of "worse beyond the tolerance" and of "not worse beyond it"."""

    p_worse: float
    p_within: float
    observed: float  # current quantile minus the scaled baseline's (the metric's base unit)
    permutations: int


def _quantile_rows(x: Array, q: float) -> Array:
    """Empirical q-quantile X_(ceil(nq)) of each row (the package's one percentile definition)."""
    return _studentized_rows(x, q)[0]


def _studentized_rows(x: Array, q: float) -> tuple[Array, Array]:
    """(q-quantile, its standard error) of each row. The quantile here is the order statistic at rank
    q(n + 1), interpolated (Hyndman-Fan type 6: E F(X_(k)) = k / (n + 1), so a wide and a narrow run are
    biased alike; X_(ceil(nq)) sits lower in a wider tail, and a narrower current run then read as a
    regression: 7.5% at the tolerance for a nominal 5%); the standard error is the spread of the order
    statistics ``SE_RANKS`` binomial standard deviations of ranks either side, sqrt(nq(1-q)) ranks
    (an estimate of sqrt(q(1-q)/n) / f(xi_q) that needs no density)."""
    n = int(x.shape[1])
    pos = min(max(q * (n + 1), 1.0), float(n))
    k = math.floor(pos)
    frac = pos - k
    h = max(1.0, SE_RANKS * math.sqrt(n * q * (1 - q)))
    lo, hi = max(1, math.floor(pos - h)), min(n, math.ceil(pos + h))
    kth = sorted({k - 1, min(k, n - 1), lo - 1, hi - 1})
    part = np.partition(x, kth, axis=1)
    quant = part[:, k - 1] + frac * (part[:, min(k, n - 1)] - part[:, k - 1])
    se = (part[:, hi - 1] - part[:, lo - 1]) * h / max(1, hi - lo)
    return quant, se


def _run_tau(x: Array, q: float) -> float:
    """Requests per independent one at the q-quantile of a run (values in arrival order): the dependence
    estimate's tau raised to its tail's clustering (:func:`~.blocked.for_quantile`); 1 when no
    dependence shows."""
    from .blocked import for_quantile
    from .dependence import estimate

    return for_quantile(x, q, estimate(x)).per_independent


def quantile_shift_test(current: Array, baseline: Array, q: float, factor: float, larger_is_worse: bool = True,
                        permutations: int = PERMUTATIONS, seed: int = 0,
                        taus: tuple[float, float] | None = None) -> QuantileShift:
    """Studentized permutation test of the q-quantile of ``current`` against ``factor`` x ``baseline``
    (values in arrival order; see the module). ``taus``: each run's requests per independent one
    when the caller knows them (a stored run's send times); else estimated from the values' order."""
    cur = np.asarray(current, dtype=np.float64)
    ref = np.asarray(baseline, dtype=np.float64) * factor
    if cur.size < 1 or ref.size < 1:
        raise ValueError("a quantile regression test needs samples in both runs")
    pooled = np.concatenate([cur, ref])
    n = int(cur.size)
    (qc,), (sc,) = _studentized_rows(cur[None, :], q)
    (qr,), (sr,) = _studentized_rows(ref[None, :], q)
    obs = float(qc - qr)
    # each run's own spread, widened by its own dependence (tau requests carry one request's information)
    tc, tr = taus if taus is not None else (_run_tau(cur, q), _run_tau(ref, q))
    se = math.sqrt(float(sc) ** 2 * tc + float(sr) ** 2 * tr)
    t_obs = obs / se if se > 0 else math.copysign(math.inf, obs) if obs else 0.0
    rng = np.random.default_rng(seed)
    ge = le = 0
    done = 0
    while done < permutations:
        b = min(_CHUNK, permutations - done)
        perm = pooled[np.argsort(rng.random((b, pooled.size)), axis=1)]
        q1, s1 = _studentized_rows(perm[:, :n], q)
        q2, s2 = _studentized_rows(perm[:, n:], q)
        den = np.sqrt(s1 * s1 + s2 * s2)
        d = q1 - q2
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(den > 0, d / np.where(den > 0, den, 1.0), np.sign(d) * np.inf)
        t = np.nan_to_num(t, nan=0.0)
        ge += int(np.count_nonzero(t >= t_obs))
        le += int(np.count_nonzero(t <= t_obs))
        done += b
    p_hi, p_lo = (1 + ge) / (permutations + 1), (1 + le) / (permutations + 1)
    worse, within = (p_hi, p_lo) if larger_is_worse else (p_lo, p_hi)
    return QuantileShift(worse, within, obs, permutations)


def bound_size(q: float, c: float) -> int:
    """Samples one run needs before both its one-sided q-quantile bounds at ``c`` exist."""
    return math.ceil(math.log(1 - c) / math.log(max(q, 1 - q)))
