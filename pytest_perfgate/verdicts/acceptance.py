"""Clustered proportions whose clusters differ in size and rate: vLLM's draft acceptance.

vLLM counts acceptance as accepted / proposed draft tokens: each step proposes k drafts, accepts
them up to the first rejection, and a request stops at its token limit, so a request with a low
acceptance proposes more drafts, and per-request rates are skewed (most requests near the top, a
few far below). The pooled rate R = sum(accepted) / sum(proposed) estimates E[accepted] /
E[proposed]; its Wald-type bounds (a ratio estimator's variance at the estimate) undercover there
(7.6-11.5% false pass at 20 requests for a nominal 5%, docs/statistics.md).

The bound here inverts a test at each candidate rate r (Fieller's construction): R > r exactly
when E[accepted - r proposed] > 0, a mean of one number per request, bounded by Student t with
Hall's (1992) skewness correction. Each side's correction uses the skewness one standard error
(of G1, sqrt(6n(n-1) / ((n-2)(n+1)(n+3)))) beyond its estimate towards that side: with the
estimate itself, the bound passed a truth on the threshold 5.6-6.2% of the time at 12-24 requests
(binomial tokens, Beta heterogeneity) and 6.7% for vLLM's counting at 20 requests, for a nominal 5%
(the estimate of the skewness is small and noisy there). A side the residuals skew towards is taken
at the stricter 1 - (1 - c) / 20 unless n >= 10 G1^2 (G1 their adjusted skewness), and no bound
exists below 12 requests: a guard calibrated on the seeded simulation of vLLM's counting
(tests/stats/test_accepted_prefix.py; Cochran's 25 G1^2 withholding the side, the mean gates'
guard, held 0.4-3.4% but left no power at 60 requests; withholding at 10 G1^2 failed a 76% draft
against a 30% minimum 15% of the time). The verdict says how many requests the guard needs, and an
inconclusive one how many requests would decide (:func:`requests_to_decide`). Requests are the
independent units; nothing is assumed about the tokens within one.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from . import bounds as stats

Array = npt.NDArray[np.float64]
METHOD = "Fieller skew-corrected t over requests"


GUARD = 10.0  # a side's bound at c needs n >= GUARD x G1^2 when the residuals skew towards it
STRICT = 20.0  # else that side's bound is at 1 - (1 - c) / STRICT
SKEW_SE = 1.0  # each side's Hall correction at the skewness this many standard errors beyond the estimate
_GRID, _ROUNDS = 65, 6  # candidate rates a round, rounds of refinement: a bound to 1 / 64^6 (1.5e-11)


def skew_se(n: int) -> float:
    """Standard error of the adjusted skewness G1 of ``n`` values (0 below 3)."""
    return math.sqrt(6.0 * n * (n - 1) / ((n - 2) * (n + 1) * (n + 3))) if n > 2 else 0.0


def _residual_bounds(succ: Array, trials: Array, r: Array, c: float,
                     size: int | None = None) -> tuple[Array, Array, Array]:
    """(lower, upper, G1) of the mean of accepted - r x proposed (one value per request) for each
    candidate rate in ``r``: Student t with Hall's skewness correction; a side the skew makes
    unreliable is withheld (-inf / +inf). ``size``: the bounds ``size`` requests in the same
    proportions as these would give (the same mean, spread and skewness: :func:`requests_to_decide`)."""
    n = int(size if size is not None else succ.size)
    y = succ[:, None] - trials[:, None] * r[None, :]
    m = y.mean(axis=0)
    d = y - m
    m2 = (d * d).mean(axis=0)
    flat = m2 <= (1e-12 * np.maximum(np.abs(m), 1.0)) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        g1 = np.where(flat, 0.0, (d * d * d).mean(axis=0) / np.where(flat, 1.0, m2) ** 1.5)
    big = g1 * math.sqrt(n * (n - 1)) / (n - 2) if n > 2 else np.zeros_like(g1)
    z = float(spc.ndtri(c))
    scale, se = float(spc.stdtrit(n - 1, c)) / z, np.sqrt(m2 * n / (n - 1) / n)
    # each side corrected at the skewness one standard error beyond the estimate towards it (see the module)
    shift = SKEW_SE * skew_se(n) * (n - 2) / math.sqrt(n * (n - 1)) if n > 2 else 0.0  # in g1's scale
    gam_lo, gam_hi = (g1 - shift) / math.sqrt(n), (g1 + shift) / math.sqrt(n)
    lo, hi = m - se * _hall(z, gam_lo, n) * scale, m - se * _hall(-z, gam_hi, n) * scale
    weak = (n < stats.MEAN_MIN_N) | (n < GUARD * big * big)
    # a side the skew makes unreliable: the same bound at 1 - (1 - c) / STRICT (far from the
    # threshold the data still decide), none below MEAN_MIN_N requests
    zs = float(spc.ndtri(1 - (1 - c) / STRICT))
    scale_s = float(spc.stdtrit(n - 1, 1 - (1 - c) / STRICT)) / zs
    lo_s, hi_s = m - se * _hall(zs, gam_lo, n) * scale_s, m - se * _hall(-zs, gam_hi, n) * scale_s
    few = n < stats.MEAN_MIN_N
    hi = np.where(weak & ((big >= 0) | few) & ~flat, np.inf if few else hi_s, hi)
    lo = np.where(weak & ((big <= 0) | few) & ~flat, -np.inf if few else lo_s, lo)
    return np.where(flat, m, lo), np.where(flat, m, hi), big


def _hall(u: float, gam: Array, n: int) -> Array:
    """:func:`bounds.hall_inverse` over an array of skewness terms."""
    small = np.abs(gam) < 1e-12
    g = np.where(small, 1.0, gam)
    return np.where(small, u, 3.0 / g * (np.cbrt(1.0 + g * (u - g / (6 * n))) - 1.0))


def _edge(succ: Array, trials: Array, c: float, side: str, p: float, size: int | None = None,
          top: float = 1.0) -> float:
    """The confidence bound: the largest rate r the data show the rate above (side "above": the
    lower bound, searched in [0, p]), the smallest they show it below ("below": the upper bound, in
    [p, top]); 0 / top when there is none. The tests are monotone in r where they exist; the search
    keeps the rates every candidate up to it rejects. ``size``: as in :func:`_residual_bounds`."""
    lo, hi = (0.0, p) if side == "above" else (p, top)
    for _ in range(_ROUNDS):
        r = np.linspace(lo, hi, _GRID)
        lb, ub, _ = _residual_bounds(succ, trials, r, c, size)
        if side == "above":
            ok = lb > 0
            if not ok[0]:
                return lo if lo > 0 else 0.0
            i = int(np.argmin(ok)) if not ok.all() else _GRID - 1  # first candidate not shown
            lo, hi = float(r[max(i - 1, 0)]), float(r[i])
        else:
            ok = ub < 0
            if not ok[-1]:
                return hi if hi < top else top
            j = _GRID - 1 - int(np.argmin(ok[::-1])) if not ok.all() else 0  # last candidate not shown
            lo, hi = float(r[j]), float(r[min(j + 1, _GRID - 1)])
    return lo if side == "above" else hi


def accepted_prefix_bounds(succ: Array, trials: Array, c: float, top: float = 1.0) -> stats.Bounds:
    """One-sided bounds at ``c`` of sum(succ) / sum(trials), one (succ, trials) pair per request.

    Each bound is the edge of the rates a one-sided test at ``c`` rejects (see the module); a side
    without enough requests for the skewness guard is 0 (lower) or ``top`` (upper: the largest ratio
    searched, 1 for a proportion), with the guard's warning."""
    keep = trials > 0
    s, t = succ[keep].astype(np.float64), trials[keep].astype(np.float64)
    n = float(t.sum())
    if n <= 0:
        return stats.Bounds(math.nan, 0.0, top, METHOD)
    p = float(s.sum()) / n
    if s.size < 2:
        return stats.Bounds(p, 0.0, top, METHOD, "a bound needs >= 2 requests")
    lower, upper = _edge(s, t, c, "above", p, top=top), _edge(s, t, c, "below", p, top=top)
    _, _, big = _residual_bounds(s, t, np.asarray([p]), c)
    need = max(stats.MEAN_MIN_N, math.ceil(GUARD * float(big[0]) ** 2))
    warning = ""
    if s.size < stats.MEAN_MIN_N:
        warning = f"a bound needs >= {stats.MEAN_MIN_N} requests"
    elif s.size < need:
        warning = (f"skewed per-request acceptance (skewness {float(big[0]):.2g} of accepted - rate x proposed): "
                   f"its side's bound is at the stricter {1 - (1 - c) / STRICT:.4g} below {need} requests")
    return stats.Bounds(p, min(lower, p), max(upper, p), METHOD, warning)


def requests_to_decide(succ: Array, trials: Array, c: float, thr: float) -> int | None:
    """Requests in all at which the bound at ``c`` would clear ``thr`` (the lower bound above it when
    the pooled rate is above, the upper below it when under) if these requests' mix held: ``m``
    requests in the same proportions as these (the same pooled rate, and the same spread and skewness
    of accepted - rate x proposed, so the skewness guard and the stricter side apply as they would
    then). None on the threshold, or when no count up to 10^9 would decide."""
    keep = trials > 0
    s, t = succ[keep].astype(np.float64), trials[keep].astype(np.float64)
    if s.size < 2 or t.sum() <= 0:
        return None
    p = float(s.sum() / t.sum())
    if p == thr:
        return None
    over = p > thr

    # the bound clears thr exactly when every candidate rate between it and the far end of the search
    # is shown (_edge's first failing candidate lies beyond thr): one grid of rates, not _edge's rounds
    far = np.linspace(0.0, thr, _GRID) if over else np.linspace(thr, 1.0, _GRID)

    def decided(m: int) -> bool:
        lb, ub, _ = _residual_bounds(s, t, far, c, m)
        return bool((lb > 0).all()) if over else bool((ub < 0).all())

    return stats._search(int(s.size), decided)
