"""Change points in a gate's history over commits, with a stated false-alarm rate.

Input: the gate's runs in commit order on one branch, each a :class:`~.runeffects.RunEstimate` (log
estimate, within-run standard error from the run's own bounds, its commit). Model: a piecewise
constant level per commit range, plus a run effect ``u ~ (0, tau^2)`` and the run's own error.

Detection is binary segmentation with a permutation test:

* ``tau^2`` from the whole series, robustly: half the squared MAD-scale of successive differences
  (a step moves one difference, not the scale) less the runs' median within-run variance;
* each run weighted ``1 / (s_i^2 + tau^2)`` (a short run counts less); for every split between two
  commits (at least ``min_size`` runs each side) the difference of the weighted means studentized,
  ``|m_R - m_L| / sqrt(v (1/W_L + 1/W_R))`` with ``v`` the weighted residual variance about the two
  sides' means (at least 1: the weights' own scale); its maximum over the splits is the statistic;
* its p-value from ``permutations`` seeded shuffles of the segment's runs (run effects exchangeable
  under "no change": the maximum over splits is calibrated by the permutations themselves, heavy
  tails included); a split with ``p <= alpha`` is a change point and both sides are searched again;
* a drifting machine state (run effects correlated from run to run) is not exchangeable: the
  observed statistic is first divided by ``sqrt((1 + phi) / (1 - phi))``, phi the run effects' lag-1
  autocorrelation read off the successive differences (:func:`drift_phi`).

So a stationary series raises a false change point with probability at most ``alpha`` per gate and
analysis (more when run effects drift: measured in docs/statistics.md, "Change points"). Each change
reports the last commit before and the first after, the relative size ``exp(m_R - m_L) - 1`` with a
two-sided interval (Student t on the two adjacent segments' runs), and its confidence ``1 - p``.

Why not a package: ``ruptures`` (PELT/BinSeg) needs a penalty with no stated false-alarm rate and
ignores per-run errors; ``signal-processing-algorithms`` (MongoDB's E-divisive, sdist with a C
extension) and ``apache-otava`` (E-divisive means + Student t-test; pins numpy 2.2 and scipy < 1.17,
pulls google-cloud-bigquery and slack-sdk, so it cannot be installed beside this package's numpy)
work on one number per run without its error. Otava's method is reimplemented in
tests/stats/otava_ref.py as the comparison (tests/stats/test_change_points.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .runeffects import RunEstimate

Array = npt.NDArray[np.float64]
ALPHA = 0.01  # false change points per gate and analysis of a stationary series
PERMUTATIONS = 999
METHOD = "binary segmentation, weighted by within-run error and run effects, permutation-calibrated"


@dataclass(frozen=True)
class Change:
    index: int  # first run after the change
    before: str  # last commit before
    after: str  # first commit after
    size: float  # relative change of the statistic, exp(m_R - m_L) - 1
    lower: float
    upper: float  # two-sided interval of the size at ``level``
    level: float
    confidence: float  # 1 - p
    p: float
    n_before: int
    n_after: int
    mean_before: float  # the statistic's level (base units: exp of the weighted log mean)
    mean_after: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def run_effect_var(y: Array, s: Array) -> float:
    """``tau^2`` of a series with possible steps (see the module)."""
    if y.size < 3:
        return 0.0
    d = np.diff(y)
    mad = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    return max(0.0, mad * mad / 2 - float(np.median(s * s)))


def drift_phi(y: Array) -> float:
    """The run effects' lag-1 autocorrelation (a drifting machine state), from the successive
    differences: for AR(1) run effects corr(d_i, d_i+1) = -(1 - phi) / 2, and a step moves one
    difference only (clipped at 2.5 MAD-scales). Less one standard error (1/sqrt(n)), clipped to [0, 0.9]; 0 below 8 runs."""
    if y.size < 8:
        return 0.0
    d = np.diff(y)
    d = d - np.median(d)
    c = 2.5 * 1.4826 * float(np.median(np.abs(d)))  # a step's one big difference clipped (Huber)
    d = np.clip(d, -c, c)
    den = float(np.sum(d * d))
    if den <= 0:
        return 0.0
    rho = float(np.sum(d[1:] * d[:-1])) / den
    # less one standard error of the estimate (about 1 / sqrt(n) for phi): a short stationary series
    # reads as drifting by chance, and that would blind the search
    return min(0.9, max(0.0, 1 + 2 * rho - 1 / math.sqrt(y.size)))


def _max_split(y: Array, w: Array, allowed: Array) -> tuple[Array, Array]:
    """Rows of ``y`` (B x n) with weights ``w`` (B x n): (max studentized difference, its split).
    Studentized by the weighted residual scatter about the two sides' means (a t statistic), so the
    permuted series, whose scatter holds the step, is not compared with the observed on one scale."""
    n = y.shape[1]
    wy = np.cumsum(w * y, axis=1)
    wyy = np.cumsum(w * y * y, axis=1)
    ww = np.cumsum(w, axis=1)
    tw, twy, twyy = ww[:, -1:], wy[:, -1:], wyy[:, -1:]
    wl, wyl, wyyl = ww[:, :-1], wy[:, :-1], wyy[:, :-1]  # left = runs [0, k) for split k = 1..n-1
    wr, wyr, wyyr = tw - wl, twy - wyl, twyy - wyyl
    with np.errstate(divide="ignore", invalid="ignore"):
        ml, mr = wyl / wl, wyr / wr
        ss = np.maximum(wyyl - wyl * ml + wyyr - wyr * mr, 0.0)
        scale = np.maximum(ss / max(n - 2, 1), 1.0)  # never below the runs' own errors (weights 1/var)
        t = np.abs(mr - ml) / np.sqrt(scale * (1 / wl + 1 / wr))
    t = np.where(allowed[None, :], np.nan_to_num(t, nan=0.0), 0.0)
    k = np.argmax(t, axis=1)
    return t[np.arange(t.shape[0]), k], k + 1


def _allowed(commits: Sequence[str], min_size: int) -> Array:
    """Splits k (1..n-1) between two commits with at least ``min_size`` runs each side."""
    n = len(commits)
    ok = np.zeros(n - 1, dtype=bool)
    for k in range(1, n):
        ok[k - 1] = commits[k] != commits[k - 1] and min_size <= k <= n - min_size
    return ok


def detect(runs: Sequence[RunEstimate], *, alpha: float = ALPHA, min_size: int = 2,
           permutations: int = PERMUTATIONS, seed: int = 0, level: float = 0.95) -> list[Change]:
    """Change points of ``runs`` (commit order; see the module), oldest first."""
    n = len(runs)
    if n < 2 * min_size:
        return []
    y = np.array([r.y for r in runs], dtype=np.float64)
    s = np.array([r.s for r in runs], dtype=np.float64)
    commits = [r.commit for r in runs]
    tau2 = run_effect_var(y, s)
    w = 1 / np.maximum(s * s + tau2, 1e-12)
    phi = drift_phi(y)
    deflate = math.sqrt((1 - phi) / (1 + phi))  # long-run variance of drifting run effects
    rng = np.random.default_rng(seed)
    found: dict[int, float] = {}

    def search(a: int, b: int) -> None:
        allowed = _allowed(commits[a:b], min_size)
        if not allowed.any():
            return
        ys, ws = y[a:b], w[a:b]
        (t0,), (k0,) = _max_split(ys[None, :], ws[None, :], allowed)
        t0 *= deflate
        if t0 <= 0:
            return
        order = np.argsort(rng.random((permutations, b - a)), axis=1)
        tp, _ = _max_split(ys[order], ws[order], allowed)
        p = (1 + int(np.count_nonzero(tp >= t0 - 1e-12))) / (permutations + 1)
        if p > alpha:
            return
        found[a + int(k0)] = p
        search(a, a + int(k0))
        search(a + int(k0), b)

    search(0, n)
    cuts = sorted(found)
    bounds = [0, *cuts, n]
    out = []
    for i, k in enumerate(cuts):
        lo, hi = bounds[i], bounds[i + 2]
        l_, r_ = slice(lo, k), slice(k, hi)
        ml = float(np.sum(w[l_] * y[l_]) / np.sum(w[l_]))
        mr = float(np.sum(w[r_] * y[r_]) / np.sum(w[r_]))
        nl, nr = k - lo, hi - k
        # the segments' own scatter (run effects and within-run errors), pooled
        res = np.r_[y[l_] - ml, y[r_] - mr]
        df = max(1, nl + nr - 2)
        var = max(float(np.sum(res * res)) / df, float(np.median(s[lo:hi] ** 2)) + tau2)
        se = math.sqrt(var * (1 / nl + 1 / nr))
        from scipy import stats  # (here: scipy.stats takes ~1.3 s to import)
        q = float(stats.t.ppf(0.5 + level / 2, df))
        d = mr - ml
        out.append(Change(k, commits[k - 1], commits[k], math.expm1(d), math.expm1(d - q * se),
                          math.expm1(d + q * se), level, 1 - found[k], found[k], nl, nr, math.exp(ml),
                          math.exp(mr)))
    return out
