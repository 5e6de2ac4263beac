"""Per-request decisions on a dependent run (see :mod:`.dependence`), in arrival order.

**Quantiles: an effective sample size.** A ``max`` gate on the q-quantile at limit ``t`` claims that
the exceed probability ``P(X >= t)`` is under ``p0 = 1 - q``. When the requests are dependent the
count of exceedances ``K`` is over-dispersed: its variance is ``n p (1 - p) D`` with ``D`` the
integrated autocorrelation time of the exceedance indicator (for clustered exceedances about the mean
cluster size weighted by size). The test is the independent one on ``n / D`` requests with ``K / D``
exceedances (rounded against the decision): ``P(Binomial(n / D, p0) <= ceil(K / D)) <= 1 - c``. At
zero exceedances it is conservative for clustered counts (the chance of no cluster,
``exp(-n p / E[L])``, is under ``exp(-n p / D)`` because ``D >= E[L]``). ``D`` is the larger of the
run's ``tau`` (normal scores: the bulk) and the integrated autocorrelation time of the indicator of
the run's own empirical q-quantile (the tail: queues cluster their slow requests more than their
typical ones; a stalled server makes 50 slow requests in a row), raised one standard error of its
own estimate by :func:`~.dependence.spread_factor` (the estimate runs low where the memory is long
against the run, and a pass is most likely in exactly those runs; issue 39 row 2), and by
:func:`~.dependence.heavy_factor` when the run's jumps have a heavy tail (index under 3: a heavy-tailed
service's long busy periods set the memory, and a run of n rarely shows them; issue 39). With ``D = 1`` (no dependence
detected) this is the independent order-statistic test (MLPerf early stopping) exactly. A ``min``
gate and the fail side mirror it. The bounds are the smallest / largest observed values at which
the test decides, so a verdict and its bounds always agree.

A block version (each block one Bernoulli, the extreme [0, 1] variable) was simulated first: valid,
but a block weighs as one request, so a P99 pass needed 299 blocks (0% power at twice the limit on
M/M/1 runs of 2,000-5,000 requests): docs/statistics.md.

**Means.** Batch means: the ``m`` block means, Student t with ``m - 1`` degrees of freedom and the
same skewness checks as independent samples (:func:`bounds.mean_bounds`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from ..runtime.heap import trim_large
from . import bounds as stats
from . import shifts as level_shifts
from .dependence import (
    Dependence,
    block_sizes,
    blocks,
    centred_tau_window,
    estimate,
    heavy_factor,
    jump_index,
    spread_factor,
    tau_of,
)
from .samples import ARRIVAL, Proportion

Array = stats.Array
MEAN_MULTIPLE = 3.0
FAR = 2.0  # a limit >= FAR x the largest value is "far": decided on the tail's clustering ...
FAR_MEMORY = 50.0  # ... when the run is >= FAR_MEMORY x its memory long at FAR (benchmarks/bench_level_shifts.py),
FAR_MEMORY_MIN = 10.0  # ... less as the limit is farther (far_length), never under this (benchmarks/bench_far_limit.py)
MIN_BLOCKS = 20
HEAVY_SHARE = 0.25  # the heavy-tail raise applies to quantiles with at most this share beyond them


def censor(x: Array, over: int) -> Array:
    """``x`` (arrival order) with ``over`` failed requests as +inf, spread evenly over the run (their
    send times are not kept with the values)."""
    if over <= 0:
        return x
    return np.insert(x, _censor_at(int(x.size), over), np.inf)


def _censor_at(n: int, over: int) -> npt.NDArray[np.int64]:
    return np.linspace(0, n, over, endpoint=False).astype(np.int64) if over > 1 else np.asarray([n // 2], dtype=np.int64)


def censor_dependence(dep: Dependence, over: int) -> Dependence:
    """``dep`` of a run with ``over`` failed requests inserted by :func:`censor` (its level shifts
    moved past them)."""
    if over <= 0:
        return dep
    at = _censor_at(dep.n, over)
    cuts = tuple(int(c + np.count_nonzero(at <= c)) for c in dep.shifts)
    return replace(dep, n=dep.n + over, shifts=cuts)


def indicator_tau(hit: np.ndarray) -> float:
    """Integrated autocorrelation time of a 0/1 series (Geyer); 1 with fewer than 2 hits or misses."""
    return indicator_tau_window(hit)[0]


def indicator_tau_window(hit: np.ndarray) -> tuple[float, int]:
    """(:func:`indicator_tau`, its Geyer summation window: :func:`~.dependence.geyer_window`)."""
    k = int(np.count_nonzero(hit))
    if k < 2 or k > hit.size - 2:
        return 1.0, 0
    y = hit.astype(np.float64)
    y -= y.mean()  # centred in place: tau_of's own y, without its second copy
    return centred_tau_window(y, min(hit.size - 1, max(20, hit.size // 4)))


def for_quantile(x: Array, q: float, dep: Dependence, sojourn: bool = True) -> Dependence:
    """``dep`` with ``tau`` raised to the clustering of the q-quantile's tail (``D`` above), then by
    its estimate's spread (:func:`~.dependence.spread_factor` of that ``D``'s Geyer window). A run
    whose level shifted (``dep.shifts``, :mod:`.shifts`) counts the memory within its segments: the
    larger of the scores' tau there and the tail indicator's, less each segment's share of the tail.

    The heavy-tail raise (:func:`~.dependence.heavy_factor`) applies to a tail quantile (at most
    :data:`HEAVY_SHARE` of the run beyond it) of per-request times (``sojourn``: a queue's waits
    accumulate a long busy period); a median, and chunk gaps (step times, no waiting carried from one
    to the next), keep the measured ``D``: without the raise a P50 on M/G/1 Pareto runs passes 2.5% at
    its boundary (docs/statistics.md), and with it a server 184x inside a P50 limit was inconclusive.
    The spread raise applies where it was measured, to the same tail quantiles of per-request times:
    a median of 358 chunk gaps of a real vLLM export 5x inside its limit was inconclusive under it."""
    if not dep.dependent:
        return dep
    level = stats.empirical_quantile(_finite(x), q) if np.isfinite(x).any() else math.inf
    tail = x >= level if q >= 0.5 else x <= level
    shifted = dep.shifted and dep.shifts[-1] < x.size
    memory = dep.within if shifted else dep.tau
    tail_tau, tail_window = _within_indicator_tau(tail, dep.shifts) if shifted else indicator_tau_window(tail)
    far = max(1.0, tail_tau) if q >= 0.5 and x.size >= FAR_MEMORY_MIN * memory else 0.0
    index = jump_index(x if q >= 0.5 else -x)  # a min gate's tail is the low one: its jumps down
    tail_of_sojourns = sojourn and min(q, 1 - q) <= HEAVY_SHARE
    heavy = heavy_factor(index) if tail_of_sojourns else 1.0
    memory_window = dep.within_window if shifted else dep.window
    spread = spread_factor(tail_window if tail_tau >= memory else memory_window, int(x.size)) if tail_of_sojourns else 1.0
    del tail
    trim_large(int(x.size))  # its freed temporaries (~70 MiB at 31M ITL gaps) before the bounds' sorted copy
    return replace(dep, tau=max(memory, tail_tau) * spread * heavy, far=far, far_span=x.size / max(memory, 1.0),
                   shifts=dep.shifts if shifted else (), heavy=heavy, tail_index=index, spread=spread)


def far_length(ratio: float) -> float:
    """How many memories long a run must be for a ``max`` limit ``ratio`` times its largest value to
    be decided on the tail's clustering: :data:`FAR_MEMORY` at :data:`FAR`, falling as
    ``sqrt(FAR / ratio)`` (a quiet stretch of a long-memory queue sits under half its P99 far more
    often than under a tenth), never under :data:`FAR_MEMORY_MIN` (benchmarks/bench_far_limit.py)."""
    return max(FAR_MEMORY_MIN, FAR_MEMORY * math.sqrt(FAR / ratio)) if ratio > 0 else math.inf


def far_ratio(span: float) -> float:
    """The nearest limit, as a multiple of the run's largest value, that a run ``span`` memories long
    may decide on the far rule (the inverse of :func:`far_length`; ``inf`` under :data:`FAR_MEMORY_MIN`)."""
    if not span >= FAR_MEMORY_MIN:
        return math.inf
    return max(FAR, FAR * (FAR_MEMORY / span) ** 2 * (1 + 1e-12))  # a hair over: far_length(it) <= span


def far_limit(x: Array, thr: float, direction: str, dep: Dependence) -> bool:
    """A ``max`` limit at least :data:`FAR` times every value of a run long against its memory
    (:func:`far_length` of how far the limit is): its pass is decided on the tail's own clustering
    (``D = dep.far``)."""
    if not (direction == "max" and dep.far > 0 and x.size > 0 and bool(np.isfinite(x).all())):
        return False
    top = float(x.max())
    return top > 0 and thr >= FAR * top and dep.far_span >= far_length(thr / top)


def far_pending(x: Array, thr: float, direction: str, dep: Dependence, what: str = "requests") -> tuple[str, int] | None:
    """A ``max`` limit >= :data:`FAR` times every value of a dependent run too short against its
    memory for the far rule (:func:`far_limit`): what the rule needs, as a note and a count of
    ``what`` at this run's memory (``dep`` from :func:`for_quantile`); None otherwise. A drifting
    server's inconclusive verdict then names the run that decides it, not only the bulk's count
    (issue 39: TTFT P95 217 ms against 1.5 s, the largest 0.60 s, "plan for ~713,809 requests")."""
    if not (direction == "max" and dep.dependent and x.size > 0 and dep.far_span > 0 and bool(np.isfinite(x).all())):
        return None
    top = float(x.max())
    if not (top > 0 and thr >= FAR * top):
        return None
    need = far_length(thr / top)
    if dep.far_span >= need:
        return None
    count = int(math.ceil(need * x.size / dep.far_span))
    return (f"the limit is {thr / top:.3g}x the largest value: a run >= {need:.3g}x its memory long (~{count:,} "
            f"{what} at this run's memory; this one is {dep.far_span:.3g}x) is decided on how its slowest "
            "requests cluster, not on the memory of its bulk, if none comes near the limit"), count


def _within_indicator_tau(hit: np.ndarray, cuts: tuple[int, ...]) -> tuple[float, int]:
    """:func:`indicator_tau_window` of the indicator less each segment's mean (its share of the tail)."""
    k = int(np.count_nonzero(hit))
    if k < 2 or k > hit.size - 2:
        return 1.0, 0
    y = level_shifts.residual(hit, cuts)  # float64 (its own copy)
    y -= y.mean()
    return centred_tau_window(y, min(hit.size - 1, max(20, hit.size // 4)))


def _finite(x: Array) -> Array:
    """The finite values of ``x``: ``x`` itself (no copy) when all are."""
    fin = np.isfinite(x)
    return x if bool(fin.all()) else x[fin]


def _effective(n: int, count: int, dep: Dependence) -> tuple[int, int]:
    """(requests, counts) of the independent-equivalent test: ``n / D`` and ``ceil(count / D)``."""
    if not dep.dependent:
        return n, count
    d = max(dep.tau, 1.0)
    return max(1, int(n / d)), int(math.ceil(count / d - 1e-9))


def _far(dep: Dependence) -> Dependence:
    return replace(dep, tau=dep.far)


def _passes(n: int, count: int, q: float, c: float, dep: Dependence) -> bool:
    return stats.quantile_pass_possible(*_effective(n, count, dep), q, c)


def decision(x: Array, q: float, c: float, direction: str, thr: float, dep: Dependence) -> tuple[str, int | None]:
    """("pass" | "fail" | "inconclusive", requests needed in all if the observed rates and the
    dependence hold) for the q-quantile of ``x`` (arrival order) against ``thr``; ``dep`` from
    :func:`for_quantile`."""
    if not dep.dependent:
        return stats.quantile_decision(x, q, c, direction, thr)
    n = int(x.size)
    over, under = int(np.count_nonzero(x >= thr)), int(np.count_nonzero(x <= thr))
    against_pass, against_fail = (over, under) if direction == "max" else (under, over)
    if direction != "max":
        q = 1 - q
    if _passes(n, against_pass, q, c, dep) or (far_limit(x, thr, direction, dep) and _passes(n, 0, q, c, _far(dep))):
        return "pass", None
    if _passes(n, against_fail, 1 - q, c, dep):
        return "fail", None
    ne, ap = _effective(n, against_pass, dep)
    _, af = _effective(n, against_fail, dep)
    independent = stats._needed(ne, ap, af, q, c)
    return "inconclusive", dep.scale(independent)


def _kmax(m: int, p: float, c: float) -> int:
    """Largest count at which ``P(Bin(m, p) <= k) <= 1 - c`` (-1: none)."""
    k = int(stats.binom_ppf(1 - c, m, p))
    while k >= 0 and stats._bcdf(k, m, p) > 1 - c:
        k -= 1
    while k + 1 < m and stats._bcdf(k + 1, m, p) <= 1 - c:
        k += 1
    return k


def decide_chance(x: Array, q: float, c: float, direction: str, thr: float, dep: Dependence, needed: int) -> float:
    """The chance that a run of ``needed`` requests decides (passes or fails) if the observed rates
    over and under ``thr`` and the dependence hold: the exceedances of the independent-equivalent
    run are then Binomial(needed / D, observed rate)."""
    n = int(x.size)
    if n == 0 or needed <= 0:
        return math.nan
    over, under = np.count_nonzero(x >= thr) / n, np.count_nonzero(x <= thr) / n
    rp, rf = (over, under) if direction == "max" else (under, over)
    qq = q if direction == "max" else 1 - q
    m = max(1, int(needed / max(dep.tau, 1.0))) if dep.dependent else needed
    chance = 0.0
    for rate, p0 in ((rp, 1 - qq), (rf, qq)):
        k = _kmax(m, p0, c)
        if k >= 0:
            chance += stats.binom_cdf(k, m, min(max(rate, 0.0), 1.0))
    return min(chance, 1.0)


def quantile_bounds(x: Array, q: float, c: float, dep: Dependence) -> stats.Bounds:
    """One-sided bounds at ``c`` on the q-quantile: the upper bound is the smallest observed value
    ``t`` at which the (effective) test passes ``max = t``, the lower bound the largest at which it
    fails it; just above the largest (below the smallest) value when only a limit beyond every
    observed value decides (zero exceedances); +-inf when none does. ``dep`` from :func:`for_quantile`."""
    if not dep.dependent:
        return stats.quantile_bounds(x, q, c)
    n = int(x.size)
    observed = stats.empirical_quantile(x, q)  # before the sorted copy: one full-size copy at a time
    s = np.sort(_finite(x))  # the finite values sorted (a monotone test takes the same value from
    # them as from their distinct values: np.unique held ~3 copies of a 31M-gap run)
    # the counts of x at or beyond s[i] by binary search in s (the same integers as counting x: a
    # pass over 31M values a step took ~1 s): the finite ones from s, the infinite ones once
    above, below = int(np.count_nonzero(x == math.inf)), int(np.count_nonzero(x == -math.inf))

    def upper_ok(i: int) -> bool:  # count_nonzero(x >= s[i])
        return _passes(n, int(s.size - np.searchsorted(s, s[i], "left")) + above, q, c, dep)

    def lower_fails(i: int) -> bool:  # monotone: once the lower test stops holding it never holds again
        return not _passes(n, int(np.searchsorted(s, s[i], "right")) + below, 1 - q, c, dep)

    upper = float(s[_first(s.size, upper_ok)]) if s.size and upper_ok(s.size - 1) else math.inf
    if math.isinf(upper) and s.size and not np.isinf(x).any() and _passes(n, 0, q, c, dep):
        upper = float(np.nextafter(s[-1], math.inf))  # no observed value passes, but any limit above them all does
    far = far_ratio(dep.far_span) * float(s[-1]) if s.size else math.inf  # the nearest limit the far rule takes
    if math.isinf(upper) and math.isfinite(far) and far_limit(x, far, "max", dep) and _passes(n, 0, q, c, _far(dep)):
        upper = far  # a far limit passes (far_limit): the smallest is far_ratio x the largest value
    j = _first(s.size, lower_fails)
    lower = float(s[j - 1]) if j > 0 else -math.inf
    if j == 0 and s.size and not np.isinf(x).any() and _passes(n, 0, 1 - q, c, dep):
        lower = float(np.nextafter(s[0], -math.inf))  # mirrored: any limit under them all fails
    return stats.Bounds(observed, lower, upper, "order-statistic, dependence-adjusted")


def _first(size: int, ok: Callable[[int], bool]) -> int:
    """Smallest index in [0, size) where the monotone predicate ``ok`` holds (``size``: none)."""
    return bisect.bisect_left(range(size), True, key=ok)


def for_mean(x: Array, dep: Dependence) -> Dependence:
    """``dep`` with its block raised to ``MULTIPLE`` times the integrated autocorrelation time of the
    values themselves (a mean weighs its tail: a queue's long busy periods dominate it)."""
    if not dep.dependent:
        return dep
    tau = tau_of(x, max(20, x.size // 4))
    b = min(max(dep.block, int(math.ceil(MEAN_MULTIPLE * tau))), x.size)
    # the batch-means variance still growing with the block: the block is too short; take the
    # block (doubling while >= MIN_BLOCKS blocks remain) whose standard error is the largest
    best, se = b, _batch_se(x, b)
    while x.size // (2 * b) >= MIN_BLOCKS:
        b *= 2
        got = _batch_se(x, b)
        if got > se:
            best, se = b, got
    return replace(dep, block=best, tau=max(dep.tau, tau))


def _batch_se(x: Array, b: int) -> float:
    bm = blocks(x, b) / block_sizes(x.size, b)
    return float(np.std(bm, ddof=1) / math.sqrt(bm.size)) if bm.size >= 2 else math.inf


def block_means(x: Array, dep: Dependence) -> Array:
    """The block means of ``x`` (arrival order)."""
    return blocks(x, dep.block) / block_sizes(x.size, dep.block)


def mean_bounds(x: Array, c: float, direction: str | None, dep: Dependence) -> stats.Bounds:
    """Batch-means bounds on the mean of ``x`` (arrival order); the observed value is the run's mean."""
    if dep.block <= 1:
        return stats.mean_bounds(x, c, direction)
    dep = for_mean(x, dep)
    bm = block_means(x, dep)
    b = stats.mean_bounds(bm, c, direction) if bm.size >= 2 else stats.Bounds(float(x.mean()), -math.inf, math.inf, "none")
    shift = float(x.mean()) - float(bm.mean())
    return stats.Bounds(float(x.mean()), b.lower + shift, b.upper + shift, f"batch means ({bm.size} blocks), {b.method}",
                        b.warning)


def mean_needed(x: Array, c: float, thr: float, dep: Dependence) -> int | None:
    """Requests in all at which the batch-means bound would decide if the block means' spread holds."""
    if dep.block <= 1:
        return stats.mean_needed(x, c, thr)
    dep = for_mean(x, dep)
    bm = block_means(x, dep)
    if bm.size < 2:
        return None
    got = stats.mean_needed(bm, c, thr)
    return None if got is None else got * dep.block


def arrival_rate(d: Proportion) -> tuple[Proportion, Dependence]:
    """A proportion with one cluster per request in arrival order (``samples.ARRIVAL``), unclustered
    (one binomial), with the run's dependence: ``tau`` the larger of the failures' normal-score tau
    and the failure indicator's integrated autocorrelation time (a crashed server fails many requests
    in a row). Other proportions are returned as they are, independent."""
    if d.cluster_unit != ARRIVAL or not d.clustered:
        return d, Dependence(d.trials)
    hit = np.asarray(d.cluster_successes, dtype=np.float64) > 0
    flat = replace(d, cluster_successes=(), cluster_trials=(), cluster_unit="request")
    dep = estimate(hit.astype(np.float64), shifts=False)  # a failure burst is memory, not a level
    if not dep.dependent:
        return flat, dep
    return flat, replace(dep, tau=max(dep.tau, indicator_tau(hit)))


def rate_bounds(d: Proportion, c: float, dep: Dependence) -> stats.Bounds:
    """Clopper-Pearson on the independent-equivalent counts ``k / D`` of ``n / D`` (the exact
    binomial bound at a real-valued count: the regularized incomplete beta)."""
    if not dep.dependent:
        return stats.clopper_pearson(d.successes, d.trials, c)
    f = max(dep.tau, 1.0)
    k, n = d.successes / f, d.trials / f
    lower = 0.0 if d.successes == 0 else float(spc.betaincinv(k, n - k + 1, 1 - c))
    upper = 1.0 if d.successes == d.trials else float(spc.betaincinv(k + 1, n - k, c))
    return stats.Bounds(d.successes / d.trials, lower, upper, "clopper-pearson, dependence-adjusted")
