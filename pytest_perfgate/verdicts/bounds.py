"""Confidence bounds and decision rules (see docs/statistics.md and METRICS.md).

Every bound here is one-sided at confidence ``c``: a ``max`` gate passes when the upper bound is
under the threshold (the claim holds with probability >= c), fails when the lower bound is over it.
- quantiles: exact distribution-free order-statistic bounds (the number of samples under the true
  q-quantile is Binomial(n, q)); the pass rule is MLPerf LoadGen's early-stopping criterion;
- proportions: exact Clopper-Pearson bounds for independent trials; for clustered trials (one entry
  per request) a ratio estimator with a bias-reduced cluster-robust variance (CR2) and t with
  clusters - 1 degrees of freedom, never narrower than Clopper-Pearson;
- ratios of sums (throughput of sequential requests): the same ratio estimator;
- means: Student t with Hall's skewness correction, and no bound on the tail side unless
  n >= 12 and n >= 25 G1^2 (Cochran's rule): heavy tails make a mean's bound unreliable;
- comparisons of two runs: each run's bounds at alpha/2, combined (Bonferroni: exact and
  conservative), or Welch t on the log ratio of sums (throughput ratios), or Welch t over runs when
  each side has several interleaved runs (the run as the unit).
See docs/statistics.md for the measured false-pass rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from ..config import looks
from .distributions import binom_cdf as binom_cdf
from .distributions import binom_ppf as binom_ppf
from .distributions import norm_ppf as norm_ppf

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Bounds:
    observed: float
    lower: float  # one-sided lower bound at confidence c (-inf when the data can't give one)
    upper: float  # one-sided upper bound at confidence c (+inf when the data can't give one)
    method: str
    warning: str = ""  # e.g. a heavy tail that withheld a bound


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
    k_hi = int(binom_ppf(c, n, q)) + 1
    # ppf is the smallest j with cdf(j) >= c; guard against float fuzz
    while k_hi > 1 and _bcdf(k_hi - 2, n, q) >= c:
        k_hi -= 1
    while _bcdf(k_hi - 1, n, q) < c and k_hi <= n:
        k_hi += 1
    hi = k_hi if k_hi <= n else None
    # largest j = k_lo - 1 with cdf(j) <= 1 - c
    j = int(binom_ppf(1 - c, n, q))
    while j >= 0 and _bcdf(j, n, q) > 1 - c:
        j -= 1
    while j + 1 < n and _bcdf(j + 1, n, q) <= 1 - c:
        j += 1
    lo = j + 1 if j >= 0 else None
    return lo, hi


def quantile_bounds(x: Array, q: float, c: float) -> Bounds:
    n = int(x.size)
    k_lo, k_hi = quantile_ranks(n, q, c)
    k_obs = empirical_rank(n, q)
    ks = sorted({k - 1 for k in (k_lo, k_hi, k_obs) if k is not None})
    part = np.partition(x, ks)  # one partition for the bounds and the observed value
    lower = float(part[k_lo - 1]) if k_lo is not None else -math.inf
    upper = float(part[k_hi - 1]) if k_hi is not None else math.inf
    # the empirical quantile X_(ceil(nq)): an order statistic, consistent with its bounds
    return Bounds(float(part[k_obs - 1]), lower, upper, "order-statistic")


def empirical_rank(n: int, q: float) -> int:
    """1-based rank of the empirical q-quantile X_(ceil(nq)) (numpy's "inverted_cdf"), the one
    percentile definition of the package: gates, reports and RunResult.summary() all use it."""
    k = math.ceil(n * q)
    if k - 1 >= 1 and math.isclose((k - 1) / n, q, rel_tol=1e-12):  # n*q an integer up to rounding
        k -= 1
    return min(max(k, 1), n)


def empirical_quantile(x: Array, q: float) -> float:
    k = empirical_rank(int(x.size), q)
    return float(np.partition(x, k - 1)[k - 1])


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
    if quantile_pass_possible(n, against_pass, q, c):
        return "pass", None
    if quantile_pass_possible(n, against_fail, 1 - q, c):
        return "fail", None
    return "inconclusive", _needed(n, against_pass, against_fail, q, c)


def _needed(n: int, against_pass: int, against_fail: int, q: float, c: float) -> int | None:
    """Total samples at which the verdict would be decided if the observed fractions hold."""
    if n == 0:
        return early_stopping_min_samples(q, c, 0)
    rp, rf = against_pass / n, against_fail / n

    def decided(m: int) -> bool:
        # counts against a decision round up: the prediction never promises more than the data show
        return quantile_pass_possible(m, math.ceil(rp * m), q, c) or quantile_pass_possible(m, math.ceil(rf * m), 1 - q, c)

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
    lower = 0.0 if k == 0 else float(spc.betaincinv(k, n - k + 1, 1 - c))
    upper = 1.0 if k == n else float(spc.betaincinv(k + 1, n - k, c))
    return Bounds(k / n, lower, upper, "clopper-pearson")


def proportion_needed(k: int, n: int, c: float, direction: str, thr: float, design_effect: float = 1.0) -> int | None:
    """Trials in all at which the observed rate would decide the gate (independent trials), times
    ``design_effect`` (the variance inflation of clustered trials). Successes round against the
    decision (down when the rate is over the threshold, up when under): never optimistic."""
    if n == 0:
        return None
    p = k / n
    if p == thr:
        return None
    over = p > thr

    def decided(m: int) -> bool:
        s = math.floor(p * m) if over else math.ceil(p * m)
        b = clopper_pearson(min(max(s, 0), m), m, c)
        return b.lower > thr if over else b.upper < thr

    got = _search(n, decided)
    if got is None:
        return None
    return max(n + 1, math.ceil(got * max(design_effect, 1.0)))


def paired_difference_bounds(b: int, d: int, n: int, c: float) -> Bounds:
    """Bounds of a paired difference of two accuracies, (b - d) / n: ``b`` pairs right only with the
    first (reference), ``d`` right only with the second, of ``n`` pairs (McNemar-style, exact). The
    difference is delta (2 pi - 1), delta = P(discordant), pi = P(first right | discordant): Clopper-
    Pearson bounds of delta (m = b + d of n) and of pi (b of m, exact given m), each at 1 - alpha/2,
    and the extreme of delta (2 pi - 1) over that rectangle (Bonferroni: together at >= c)."""
    m = b + d
    c2 = 1 - (1 - c) / 2
    dl = clopper_pearson(m, n, c2)
    pi = clopper_pearson(b, m, c2) if m else Bounds(math.nan, 0.0, 1.0, "clopper-pearson")
    hi_f, lo_f = 2 * pi.upper - 1, 2 * pi.lower - 1
    upper = max(dl.upper * hi_f, dl.lower * hi_f)
    lower = min(dl.upper * lo_f, dl.lower * lo_f)
    return Bounds((b - d) / n if n else math.nan, lower, upper, "exact paired (discordant pairs)")


# ---------------------------------------------------------------- means (skewness-corrected t)

MEAN_MIN_N = looks.MEAN_MIN_N  # defined with the look schedule, which must not import numpy
COCHRAN = 25.0  # n >= 25 G1^2: Cochran's rule for the mean's sampling distribution to be near normal


def skewness(x: Array) -> tuple[float, float]:
    """(g1, G1): the plain moment skewness and its small-sample adjusted form."""
    n = int(x.size)
    if n < 3:
        return 0.0, 0.0
    m = float(np.mean(x))
    d = x - m
    m2 = float(np.mean(d * d))
    if m2 <= (1e-12 * abs(m)) ** 2:  # all equal (up to rounding)
        return 0.0, 0.0
    g1 = float(np.mean(d * d * d)) / m2**1.5
    return g1, g1 * math.sqrt(n * (n - 1)) / (n - 2)


def hall_inverse(u: float, gam: float, n: int) -> float:
    """Inverse of Hall's (1992) skewness-removing transform T(t) = t + gam t^2/3 + gam^2 t^3/27 + gam/(6n)."""
    if abs(gam) < 1e-12:
        return u
    return 3.0 / gam * (float(np.cbrt(1.0 + gam * (u - gam / (6 * n)))) - 1.0)


def mean_tail_ok(n: int, big_g1: float) -> bool:
    return n >= MEAN_MIN_N and n >= COCHRAN * big_g1 * big_g1


def mean_bounds(x: Array, c: float, direction: str | None = None) -> Bounds:
    """One-sided bounds of the mean: Student t with Hall's skewness correction.

    On skewed data even that undercovers (lognormal sigma 1: 7% at n = 10 for a nominal 5%), so the
    bound on the side a false pass would use (upper for ``max``, lower for ``min``; both when
    ``direction`` is None) is withheld (infinite) unless n >= 12 and n >= 25 G1^2, and the verdict
    warns about the heavy tail. Measured rates: docs/statistics.md.
    """
    n = int(x.size)
    m = float(np.mean(x))
    if n < 2:
        return Bounds(m, -math.inf, math.inf, "t")
    s = float(np.std(x, ddof=1))
    if s <= 1e-12 * abs(m):  # all equal (up to rounding)
        lo, hi = m, m
        g1 = big = 0.0
    else:
        g1, big = skewness(x)
        gam = g1 / math.sqrt(n)
        scale = float(spc.stdtrit(n - 1, c)) / float(spc.ndtri(c))
        z = float(spc.ndtri(c))
        se = s / math.sqrt(n)
        hi = m - se * hall_inverse(-z, gam, n) * scale
        lo = m - se * hall_inverse(z, gam, n) * scale
    warning = ""
    if not mean_tail_ok(n, big):
        need = max(MEAN_MIN_N, math.ceil(COCHRAN * big * big))
        if n < MEAN_MIN_N:
            warning = f"a mean's bound needs >= {MEAN_MIN_N} samples"
        else:
            warning = (f"heavy tail (skewness {big:.2g}): a mean's bound needs n >= 25 x skewness^2 = {need}; "
                       "a quantile gate (pNN) is distribution-free")
        if direction in ("max", None) and (big >= 0 or n < MEAN_MIN_N):
            hi = math.inf
        if direction in ("min", None) and (big <= 0 or n < MEAN_MIN_N):
            lo = -math.inf
    return Bounds(m, lo, hi, "skew-corrected t", warning)


def mean_needed(x: Array, c: float, thr: float) -> int | None:
    n = int(x.size)
    if n < 2:
        return MEAN_MIN_N
    m, s = float(np.mean(x)), float(np.std(x, ddof=1))
    _, big = skewness(x)
    floor = max(MEAN_MIN_N, math.ceil(COCHRAN * big * big), n + 1)
    if m == thr:
        return None
    if s == 0:
        return floor
    got = _search(n, lambda k: float(spc.stdtrit(k - 1, c)) * s / math.sqrt(k) < abs(m - thr))
    return None if got is None else max(got, floor)


# ---------------------------------------------------------------- ratio estimator (clustered data)


def ratio_bounds(num: Array, den: Array, c: float, method: str = "cluster-robust t") -> Bounds:
    """Bounds of sum(num) / sum(den) with one (num, den) pair per independent cluster (a request).

    Ratio estimator with the bias-reduced cluster-robust variance CR2 (each squared residual over
    1 - h_i, h_i = den_i / sum(den)) and Student t with clusters - 1 degrees of freedom.
    """
    g = int(num.size)
    r, v = ratio_variance(num, den)
    if g < 2 or not math.isfinite(v):
        return Bounds(r, -math.inf, math.inf, method)
    half = float(spc.stdtrit(g - 1, c)) * math.sqrt(v)
    return Bounds(r, r - half, r + half, method)


def ratio_variance(num: Array, den: Array) -> tuple[float, float]:
    """(sum(num) / sum(den), its CR2 cluster-robust variance); variance nan below 2 clusters."""
    tot = float(den.sum())
    r = float(num.sum()) / tot if tot > 0 else math.nan
    if num.size < 2 or tot <= 0:
        return r, math.nan
    e = num - r * den
    h = den / tot
    with np.errstate(divide="ignore", invalid="ignore"):
        v = float(np.sum(np.where(h < 1, e * e / (1 - h), 0.0))) / (tot * tot)
    return r, v


def cluster_proportion_bounds(succ: Array, trials: Array, c: float) -> Bounds:
    """Clustered proportion (one entry per request): Korn & Graubard's (1998) Clopper-Pearson interval
    with the effective sample size n* = p(1-p) / V_CR2 * (z_c / t_{c,G-1})^2 (never above n), where V_CR2
    is the ratio estimator's bias-reduced cluster-robust variance. Clopper-Pearson's asymmetry keeps the
    coverage near rates close to 0 or 1, where a symmetric t bound undercovers (7.7% for a nominal 5% at
    20 requests, intra-request correlation 0.33; docs/statistics.md). No bound from fewer than 2 clusters."""
    keep = trials > 0
    s, t = succ[keep], trials[keep]
    k, n = float(s.sum()), float(t.sum())
    g = int(s.size)
    if n <= 0:
        return Bounds(math.nan, 0.0, 1.0, "cluster-robust Korn-Graubard")
    p = k / n
    if g < 2:
        return Bounds(p, 0.0, 1.0, "cluster-robust Korn-Graubard")
    e = s - p * t
    h = t / n
    with np.errstate(divide="ignore", invalid="ignore"):
        v = float(np.sum(np.where(h < 1, e * e / (1 - h), 0.0))) / (n * n)
    neff = n
    if 0.0 < p < 1.0 and v > 0:
        neff = min(n, p * (1 - p) / v * (float(spc.ndtri(c)) / float(spc.stdtrit(g - 1, c))) ** 2)
    elif p in (0.0, 1.0):  # no variation to estimate: the binomial of the clusters alone (conservative)
        neff = min(n, float(g))
    x = p * neff
    lower = 0.0 if x <= 0 else float(spc.betaincinv(x, neff - x + 1, 1 - c))
    upper = 1.0 if x >= neff else float(spc.betaincinv(x + 1, neff - x, c))
    return Bounds(p, lower, upper, "cluster-robust Korn-Graubard")


def design_effect(succ: Array, trials: Array) -> float:
    """Variance of the clustered estimate over the binomial variance (>= 1 means correlated trials)."""
    keep = trials > 0
    s, t = succ[keep].astype(np.float64), trials[keep].astype(np.float64)
    n = float(t.sum())
    if s.size < 2 or n <= 0:
        return 1.0
    p = float(s.sum()) / n
    if p in (0.0, 1.0):
        return 1.0
    e = s - p * t
    v = float(np.sum(e * e)) * s.size / (s.size - 1) / (n * n)
    return max(1.0, v / (p * (1 - p) / n))


# ---------------------------------------------------------------- comparisons of two runs


def combine(kind: str, a: Bounds, b: Bounds, observed: float, method: str) -> Bounds:
    """Bounds of ``a ? b`` from each run's own bounds (each at 1 - alpha/2: together at 1 - alpha).

    ratio a/b and reduction 1 - a/b assume positive quantities; an infinite input bound gives an
    infinite output bound on that side."""

    def fin(*v: float) -> bool:
        return all(math.isfinite(x) for x in v)

    if kind == "difference":
        lo = a.lower - b.upper if fin(a.lower, b.upper) else -math.inf
        hi = a.upper - b.lower if fin(a.upper, b.lower) else math.inf
    else:
        ratio_lo = a.lower / b.upper if fin(a.lower, b.upper) and b.upper > 0 and a.lower >= 0 else -math.inf
        ratio_hi = a.upper / b.lower if fin(a.upper, b.lower) and b.lower > 0 else math.inf
        if kind == "ratio":
            lo, hi = ratio_lo, ratio_hi
        else:  # reduction = 1 - a/b
            lo = 1 - ratio_hi if math.isfinite(ratio_hi) else -math.inf
            hi = 1 - ratio_lo if math.isfinite(ratio_lo) else math.inf
    return Bounds(observed, lo, hi, method, "; ".join(w for w in (a.warning, b.warning) if w))


def _log_welch(la: float, va: float, dfa: float, lb: float, vb: float, dfb: float, c: float) -> tuple[float, float]:
    """(lower, upper) of la - lb with Welch-Satterthwaite degrees of freedom."""
    v = va + vb
    if v <= 0:
        return la - lb, la - lb
    df = v * v / ((va * va / dfa if dfa > 0 else 0.0) + (vb * vb / dfb if dfb > 0 else 0.0))
    half = float(spc.stdtrit(df, c)) * math.sqrt(v)
    d = la - lb
    return d - half, d + half


def _log_transform(kind: str, lo: float, hi: float, observed: float, method: str) -> Bounds:
    """Bounds of log(a/b) -> bounds of the ratio or of the reduction 1 - a/b."""
    if kind == "ratio":
        return Bounds(observed, math.exp(lo), math.exp(hi), method)
    return Bounds(observed, 1 - math.exp(hi), 1 - math.exp(lo), method)


def ratio_of_sums_compare(kind: str, a_num: Array, a_den: Array, b_num: Array, b_den: Array, c: float,
                          run_cv: float = 0.0) -> Bounds:
    """Ratio (or reduction) of two ratios of sums, e.g. throughputs of two sequential runs: Welch t on
    log(R_a) - log(R_b), each log-ratio's variance from the CR2 ratio-estimator variance (delta method),
    plus ``run_cv``: an assumed run-to-run coefficient of variation of each run's level, a known
    variance log(1 + cv^2) a run that one run a side cannot measure."""
    ra, rb = float(a_num.sum() / a_den.sum()), float(b_num.sum() / b_den.sum())
    obs = ra / rb if kind == "ratio" else 1 - ra / rb
    method = "Welch t on the log ratio of sums"
    if a_num.size < 2 or b_num.size < 2 or ra <= 0 or rb <= 0:
        return Bounds(obs, -math.inf, math.inf, method)
    va = ratio_variance(a_num, a_den)[1] / (ra * ra)  # delta method: var(log R) = var(R) / R^2
    vb = ratio_variance(b_num, b_den)[1] / (rb * rb)
    if run_cv > 0:
        extra = 2 * math.log1p(run_cv * run_cv)  # known, so it adds no Welch degrees of freedom
        v = va + vb + extra
        den = va * va / (a_num.size - 1) + vb * vb / (b_num.size - 1)
        half = float(spc.stdtrit(v * v / den, c) if den > 0 else spc.ndtri(c)) * math.sqrt(v)
        d = math.log(ra) - math.log(rb)
        lo, hi = d - half, d + half
    else:
        lo, hi = _log_welch(math.log(ra), va, a_num.size - 1, math.log(rb), vb, b_num.size - 1, c)
    return _log_transform(kind, lo, hi, obs, method)


def runs_compare(kind: str, a: Array, b: Array, c: float) -> Bounds:
    """Two sets of run-level values (several interleaved runs per side, the run as the unit): Welch t,
    on the logs for a ratio or reduction, on the values for a difference."""
    method = f"Welch t over runs ({a.size} vs {b.size})"
    ma, mb = float(np.mean(a)), float(np.mean(b))
    if kind == "difference":
        obs = ma - mb
        if a.size < 2 or b.size < 2:
            return Bounds(obs, -math.inf, math.inf, method)
        lo, hi = _log_welch(ma, float(np.var(a, ddof=1)) / a.size, a.size - 1,
                            mb, float(np.var(b, ddof=1)) / b.size, b.size - 1, c)
        return Bounds(obs, lo, hi, method)
    if np.any(a <= 0) or np.any(b <= 0):
        obs = ma / mb if kind == "ratio" else 1 - ma / mb
        return Bounds(obs, -math.inf, math.inf, method)
    la, lb = np.log(a), np.log(b)
    gm = math.exp(float(la.mean() - lb.mean()))  # ratio of geometric means: what the log-scale bound is about
    obs = gm if kind == "ratio" else 1 - gm
    if a.size < 2 or b.size < 2:
        return Bounds(obs, -math.inf, math.inf, method)
    lo, hi = _log_welch(float(la.mean()), float(np.var(la, ddof=1)) / a.size, a.size - 1,
                        float(lb.mean()), float(np.var(lb, ddof=1)) / b.size, b.size - 1, c)
    return _log_transform(kind, lo, hi, obs, method)
