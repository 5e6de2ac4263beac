"""How dependent the requests of one run are, and the blocks a verdict decides on.

The requests of a load test share a queue and a batch: a slow request is followed by slow ones, and
the exceedances of a high quantile come in clusters. A bound that counts every request as an
independent draw then claims far more than the run shows (a P99 gate at its true limit passed 17-79%
of M/M/1 runs instead of <= 5%: docs/statistics.md). Every per-request verdict therefore decides in
arrival order with the run's dependence (:mod:`.blocked`): quantiles and rates on the effective
sample ``n / tau`` (``tau`` raised to the clustering of the tail / the failures), means on **blocks**
(the run cut into ``m`` non-overlapping blocks of about ``block`` consecutive requests, long enough
that one block says almost nothing about the next: batch means). ``block = 1`` and ``tau = 1`` when
the run looks independent: the verdict is then exactly the independent one.

The block length comes from the data (:func:`estimate`): the integrated autocorrelation time ``tau``
of the run's normal scores (ranks, so a heavy tail cannot dominate it), Geyer's initial positive
sequence estimator; the run is taken as dependent when the first lags' autocorrelations sum clearly
above zero (a one-sided 1% test: an independent run is called dependent in about 1 run of 100), and
then ``block = max(ceil(MULTIPLE * tau), ceil(n ** (1/3)))``.

API (stable; :mod:`pytest_perfgate.load` and the comparison gates use it too)::

    dep = estimate(values, send_times=sent)   # values in any order; send_times put them in arrival order
    dep.block, dep.tau, dep.n_eff, dep.describe()   # "n = 3,000, about 410 independent"
    sums = blocks(values_in_arrival_order, dep.block)         # per-block sums (float)
    sizes = block_sizes(n, dep.block)                          # requests per block (int)
    order = arrival_order(send_times)                          # the stable argsort, arrival order
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from . import shifts as level_shifts
from .ranks import normal_scores
from .sorting import stable_argsort

Array = npt.NDArray[np.float64]

MULTIPLE = 3.0  # block = MULTIPLE x tau (tuned by simulation: docs/statistics.md)
DETECT_ALPHA = 0.01  # an independent run is called dependent this often
MAX_LAG = 10  # lags of the detection test
MIN_N = 30  # fewer requests: no dependence estimate (block 1, "too few to estimate")

INDEPENDENT, BLOCKS, GIVEN = "independent", "blocks", "given"


@dataclass(frozen=True)
class Dependence:
    """The dependence of one run's per-request values and the block length that accounts for it.

    ``n``: requests; ``block``: requests per block (1: independent); ``tau``: the estimated
    integrated autocorrelation time (>= 1; 1 for independent draws); ``method``: ``"independent"``
    (no dependence detected), ``"blocks"`` (block from tau), ``"given"`` (set by the caller)."""

    n: int
    block: int = 1
    method: str = INDEPENDENT
    tau: float = 1.0
    shifts: tuple[int, ...] = ()  # level shifts (first request of each new segment, arrival order)
    within: float = 1.0  # tau within the segments (when ``shifts``): the memory the shifts leave
    far: float = 0.0  # D for a limit far beyond every value (blocked.for_quantile; 0: none)
    far_span: float = 0.0  # ... and the run's length in memories (n / memory) that rule asks of (blocked.far_length)
    heavy: float = 1.0  # D raised this much for a heavy-tailed run (blocked.for_quantile, :func:`heavy_factor`)
    tail_index: float = math.inf  # the tail index of the run's upward jumps (:func:`jump_index`)
    window: int = 0  # the lag at which Geyer's sequence for ``tau`` stopped (its summation window M)
    within_window: int = 0  # ... and for ``within`` (the level-shifted run's residual scores)
    spread: float = 1.0  # D raised this much for the estimate's own uncertainty (:func:`spread_factor`)
    drift: bool = False  # ``shifts`` are the local level of a drifting run (:mod:`.shifts`), not shifts that stand out

    @property
    def shifted(self) -> bool:
        """The run's level shifted (:mod:`.shifts`): quantiles then count its memory within segments."""
        return bool(self.shifts)

    @property
    def blocks(self) -> int:
        """The number of blocks ``m`` (the last ones take the remainder: sizes differ by <= 1)."""
        return max(1, self.n // self.block) if self.n else 0

    @property
    def n_eff(self) -> float:
        """Independent-equivalent samples: ``n / tau`` (``n`` when independent)."""
        if self.block <= 1:
            return float(self.n)
        return self.n / max(self.tau, 1.0)

    @property
    def dependent(self) -> bool:
        return self.block > 1

    @property
    def per_independent(self) -> float:
        """Requests that carry one independent request's information (``tau``; 1 when independent)."""
        return max(self.tau, 1.0) if self.dependent else 1.0

    def describe(self) -> str:
        """``"n = 3,000, about 410 independent"``; ``"n = 300"`` when independent."""
        if not self.dependent:
            return f"n = {self.n:,}"
        return f"n = {self.n:,}, about {_round(self.n_eff):,} independent"

    def cost(self, what: tuple[str, str] = ("requests", "request")) -> str:
        """What dependence costs, in words: ``"about 4.1 requests carry one request's information"``;
        ``what``: the samples' (plural, singular) name, e.g. ``("chunk gaps", "gap")`` for ITL."""
        if not self.dependent:
            return ""
        said = f"about {self.per_independent:.3g} {what[0]} carry one independent {what[1]}'s information"
        if self.heavy > 1:
            said += (f" (raised {self.heavy:.3g}x: the run's jumps have a heavy tail, index {self.tail_index:.2g}, "
                     f"and a run of {self.n:,} rarely shows the long busy periods that sets its memory)")
        return said

    def scale(self, independent_n: int | None) -> int | None:
        """Requests that carry ``independent_n`` independent requests' information at this dependence."""
        if independent_n is None:
            return None
        return int(math.ceil(independent_n * self.per_independent))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"n": self.n, "block": self.block, "method": self.method, "tau": self.tau}
        if self.window:
            d["window"] = self.window
        if self.shifts:
            d.update(shifts=list(self.shifts), within=self.within)
            if self.within_window:
                d["within_window"] = self.within_window
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Dependence:
        n, b, tau = d.get("n", 0), d.get("block", 1), d.get("tau", 1.0)
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (n, b, tau))
        if not ok:
            return cls(0)
        cuts, within = d.get("shifts", []), d.get("within", 1.0)
        good = (isinstance(cuts, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in cuts)
                and isinstance(within, (int, float)) and not isinstance(within, bool))
        return cls(int(n), max(1, int(b)), str(d.get("method", INDEPENDENT)), max(1.0, float(tau)),
                   tuple(cuts) if good else (), max(1.0, float(within)) if good else 1.0,
                   window=_count(d.get("window", 0)), within_window=_count(d.get("within_window", 0)) if good else 0)

    def details(self) -> dict[str, float]:
        """The numbers a verdict stores in its ``details`` (decisions.json)."""
        d = {"dependence_block": float(self.block), "dependence_tau": float(self.tau),
             "dependence_n_eff": float(self.n_eff)}
        if self.heavy > 1:
            d.update(dependence_heavy=float(self.heavy), jump_tail_index=float(self.tail_index))
        return d

    @classmethod
    def from_details(cls, n: int, details: Mapping[str, float]) -> Dependence | None:
        if "dependence_block" not in details:
            return None
        b = int(details["dependence_block"])
        return cls(n, max(1, b), BLOCKS if b > 1 else INDEPENDENT, max(1.0, float(details.get("dependence_tau", 1.0))))


def _count(v: Any) -> int:
    """A stored window (lags): a non-negative int, 0 when missing or malformed."""
    return max(0, v) if isinstance(v, int) and not isinstance(v, bool) else 0


def _round(x: float) -> int:
    """Two significant digits: an estimate, not a count."""
    if x < 100:
        return max(1, int(round(x)))
    p = 10 ** (int(math.floor(math.log10(x))) - 1)
    return int(round(x / p) * p)


ORDER_CHUNK = 1 << 20  # sorted positions checked at a time by :func:`arrival_order` and :func:`in_order`


def arrival_order(send_times: Any) -> npt.NDArray[np.intp]:
    """Indices that put values in arrival order: the stable sort of the send times (equal times in
    index order), by :func:`.sorting.stable_argsort` (numpy's SIMD sort of packed words; 31M ITL
    send times: ~3 s where ``np.argsort`` took ~8; NaN: numpy's own stable sort)."""
    return stable_argsort(np.asarray(send_times, dtype=np.float64).ravel())


def in_order(send_times: Any) -> bool:
    """Whether the send times never decrease (their stable arrival order is the identity), in
    chunks (no full-size temporary)."""
    t = np.asarray(send_times, dtype=np.float64).ravel()
    for a in range(0, max(0, t.size - 1), ORDER_CHUNK):
        k = t[a: a + ORDER_CHUNK + 1]
        if not bool((k[1:] >= k[:-1]).all()):
            return False
    return True


def autocorrelation(x: Array, lags: int) -> Array:
    """Sample autocorrelations at lags 0..lags (biased estimator, FFT)."""
    return _acf(x - x.mean(), lags)


def _acf(y: Array, lags: int) -> Array:
    """:func:`autocorrelation` of the centred ``y``."""
    n = y.size
    size = 1 << int(math.ceil(math.log2(2 * n)))
    f = np.fft.rfft(y, size)
    acov = np.fft.irfft(f * np.conj(f), size)[: lags + 1] / n
    return np.asarray(acov / acov[0], dtype=np.float64) if acov[0] > 0 else np.zeros(lags + 1)


DIRECT_LAGS = 512  # autocorrelations by dot products up to this lag (memory O(n)); one FFT beyond


def _direct(y: Array, lo: int, hi: int) -> list[float]:
    """Autocovariances of the centred ``y`` at lags lo..hi-1 (biased, as :func:`autocorrelation`),
    by dot products: no copy of ``y`` (an FFT of a 3.1M-gap ITL run took ~400 MB)."""
    n = y.size
    return [_dot(y[: n - k], y[k:]) / n for k in range(lo, hi)]


def _dot(a: Array, b: Array) -> float:
    """``a . b`` on one thread: past :data:`THREADED` elements einsum's loop (OpenBLAS threads a ddot
    there, and on a busy 2-core machine each threaded call waited for a time slice: 64 lags of 20,000
    scores took 1.3 s instead of 0.3 ms; one ddot of 12,000 values 0.32 ms against einsum's 0.028 at load 2; its
    sum also depended on the thread count, einsum's does not)."""
    if a.size > THREADED:
        return float(np.einsum("i,i->", a, b))
    return float(np.dot(a, b))


THREADED = 10_000  # OpenBLAS's ddot runs on one thread up to this many elements


def tau_of(x: Array, max_lag: int | None = None) -> float:
    """:func:`geyer_tau` of ``x``'s autocorrelations at lags up to ``max_lag`` (default
    ``max(2 * MAX_LAG, n // 4)``), computed only as far as Geyer's sequence runs: in doubling batches
    of dot products until a pair sums to <= 0 (the same tau as from every lag), by one FFT when it
    runs past :data:`DIRECT_LAGS`."""
    n = int(x.size)
    return centred_tau(x - x.mean(), min(n - 1, max_lag if max_lag is not None else max(2 * MAX_LAG, n // 4)))


# where each batch of direct lags ends: short first batches (a run whose sequence stops within a few
# lags computes only those: 16 dot products of 31M scores instead of 64), then the doubling batches
# (64, 128, 256) as before: the lags computed directly, and where the FFT takes over (past lag 448),
# are the same as with them, so tau is the same number
LAG_ENDS = (9, 17, 33, 65, 193, 449)


def _next_lag(k: int) -> int:
    """The end (exclusive) of the batch of lags that starts at lag ``k``."""
    for end in LAG_ENDS:
        if end > k:
            return end
    return k + 512


def centred_tau(y: Array, top: int) -> float:
    """:func:`tau_of` of ``x`` from its centred ``y = x - x.mean()`` (the same number, no second
    copy) at lags up to ``top``."""
    return centred_tau_window(y, top)[0]


def centred_tau_window(y: Array, top: int) -> tuple[float, int]:
    """(:func:`centred_tau`, the lag its Geyer sequence stopped at: :func:`geyer_window`)."""
    n = int(y.size)
    c0 = _dot(y, y) / n if n else 0.0
    if top < 1 or not c0 > 0:
        return 1.0, 0
    acov, k = [c0], 1
    while k <= top:
        hi = min(top + 1, _next_lag(k))
        if hi > DIRECT_LAGS + 1:
            return geyer_window(_acf(y, top))
        acov += _direct(y, k, hi)
        k = hi
        rho = np.asarray(acov) / c0
        pairs = rho[: 2 * (rho.size // 2)].reshape(-1, 2).sum(axis=1)
        if (pairs <= 0).any():
            break
    return geyer_window(np.asarray(acov) / c0)


def first_autocorrelations(x: Array, lags: int) -> Array:
    """Autocorrelations of ``x`` at lags 0..lags (biased), by dot products."""
    return centred_autocorrelations(x - x.mean(), lags)


def centred_autocorrelations(y: Array, lags: int) -> Array:
    """:func:`first_autocorrelations` of ``x`` from its centred ``y = x - x.mean()``."""
    c0 = _dot(y, y) / y.size
    if not c0 > 0:
        return np.zeros(lags + 1)
    return np.asarray([c0, *_direct(y, 1, lags + 1)], dtype=np.float64) / c0


def geyer_tau(rho: Array) -> float:
    """Integrated autocorrelation time from autocorrelations ``rho[0..]``: Geyer's initial positive
    (and monotone) sequence estimator, ``-1 + 2 * sum(Gamma_k)``, Gamma_k = rho_2k + rho_2k+1."""
    return geyer_window(rho)[0]


def geyer_window(rho: Array) -> tuple[float, int]:
    """(:func:`geyer_tau`, its summation window ``M``: the last lag summed, ``2 K - 1`` for ``K``
    positive pairs; 0 when none is)."""
    pairs = rho[: 2 * (rho.size // 2)].reshape(-1, 2).sum(axis=1)
    stop = np.flatnonzero(pairs <= 0)
    g = pairs[: stop[0]] if stop.size else pairs
    if g.size == 0:
        return 1.0, 0
    g = np.minimum.accumulate(g)
    return max(1.0, float(-1.0 + 2.0 * g.sum())), 2 * int(g.size) - 1


SPREAD_Z = 1.0  # D is raised to this one-sided normal bound of its estimate (:func:`spread_factor`)


def spread_factor(window: int, n: int, z: float | None = None) -> float:
    """How much a quantile's ``D`` is raised for the uncertainty of its own estimate: the estimated
    integrated autocorrelation time summed over a window of ``M`` lags has a relative variance of
    about ``2 (2 M + 1) / n`` (Madras and Sokal 1988), so ``D (1 + z sqrt(2 (2 M + 1) / n))`` is an
    upper bound at ``z`` (:data:`SPREAD_Z`). About 1 for a short memory against ``n`` (a small
    window), larger where the memory is long against the run, where ``D`` runs low most."""
    z = SPREAD_Z if z is None else z
    if n <= 0 or not z > 0:
        return 1.0
    return 1.0 + z * math.sqrt(2.0 * (2.0 * max(window, 0) + 1.0) / n)


def detected(rho: Array, n: int) -> bool:
    """Positive dependence: the first ``MAX_LAG`` autocorrelations sum above what independent draws
    give in ``1 - DETECT_ALPHA`` of runs (their sum is about N(0, L/n) under independence)."""
    lags = min(MAX_LAG, rho.size - 1)
    z = float(rho[1: lags + 1].sum()) * math.sqrt(n / lags)
    return z > float(spc.ndtri(1 - DETECT_ALPHA))  # scipy.stats.norm.ppf's own function


def estimate(values: Any, *, send_times: Any = None, end_times: Any = None, shifts: bool = True) -> Dependence:
    """The dependence of per-request ``values`` and the block length a verdict decides on.

    ``values`` are in arrival order, or put in it by ``send_times`` (one per value). ``end_times``
    is accepted for open-loop runs (idle instants: reserved; the block length comes from the values).
    ``shifts``: look for level shifts (:mod:`.shifts`) in a dependent run; ``tau`` and ``block``
    stay the whole run's (means and rates), ``shifts`` and ``within`` serve the quantiles."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if send_times is not None:
        x = x[arrival_order(send_times)]
    n = int(x.size)
    if n < MIN_N or np.ptp(x) == 0:
        return Dependence(n)
    s = normal_scores(x)  # in one full-size array (the argsort index's)
    means = None  # a long run's level-shift search: on block means of the scores (taken before centring)
    if n > level_shifts.THIN:
        means = level_shifts.thin_means(s) if shifts else None
        s -= s.mean()  # centred in place: the same numbers as ``s - s.mean()``, no second copy
        y = s
    else:
        y = s - s.mean()  # the centred scores: the detection test's and tau's (one copy for both)
    if not detected(centred_autocorrelations(y, min(n - 1, MAX_LAG)), n):
        return Dependence(n)
    tau, window = centred_tau_window(y, min(n - 1, max(2 * MAX_LAG, n // 4)))  # tau_of(s)
    del y
    b = max(int(math.ceil(MULTIPLE * tau)), int(math.ceil(n ** (1 / 3))), 2)
    if not shifts:
        return Dependence(n, min(b, n), BLOCKS, tau, window=window)
    if means is None:
        found = level_shifts.find(s, tau, tau_of)
        uncentred: Callable[[], Array] = lambda: s  # noqa: E731
    else:  # s was centred in place: the uncentred scores made again (the same numbers), only where shifts are found
        del s
        uncentred = functools.cache(lambda: normal_scores(x))
        found = level_shifts.find_thinned(means, n, tau, tau_of, uncentred)
    if found is None:
        return Dependence(n, min(b, n), BLOCKS, tau, window=window)
    r = level_shifts.residual(uncentred(), found.cuts)
    r -= r.mean()
    _, inside = centred_tau_window(r, min(n - 1, max(2 * MAX_LAG, n // 4)))  # the window of found.tau
    return Dependence(n, min(b, n), BLOCKS, tau, found.cuts, max(1.0, found.tau), window=window, within_window=inside,
                      drift=found.drift)


HEAVY = 3.0  # a tail index of the jumps under this raises a quantile's D (docs/statistics.md, issue 39)
HEAVY_POWER = 1.5  # ... by ((HEAVY - 1) / (index - 1)) ** HEAVY_POWER (tuned by simulation)
HEAVY_MAX = 16.0  # at most (an index near 1: the run cannot bound its own dependence)
JUMP_SHARE = 0.02  # the Hill estimate's top share of the jumps (at least JUMP_MIN of them)
JUMP_MIN = 10
JUMP_CHUNK = 1 << 20  # differences taken at a time by :func:`jump_index`
JUMP_XI = 0.15  # ... and only when the moment estimator of the same jumps finds a heavy tail (index <= 1 / JUMP_XI)


def jump_index(x: Array) -> float:
    """The tail index of the run's upward jumps (``x`` in arrival order, its finite values): Hill's
    estimate on the largest ``max(JUMP_MIN, JUMP_SHARE * n)`` positive first differences. A queue's
    jump up is about the service of the request that makes it, so this sees the service's tail
    (exponential service: ~4; Pareto shape 2.5: ~2.1; log-normal sigma 1: ~2.5) even in a run whose
    long busy periods, the ones that set its memory, never came. ``inf``: too few jumps."""
    fin = np.isfinite(x)
    v = x if bool(fin.all()) else x[fin]
    del fin
    k = max(JUMP_MIN, int(JUMP_SHARE * v.size))
    top, jumps = np.zeros(0), 0  # the k + 1 largest positive jumps so far, and how many there were
    for a in range(0, max(0, v.size - 1), JUMP_CHUNK):  # in chunks: no full-size diff
        d = np.diff(v[a: a + JUMP_CHUNK + 1])
        d = d[d > 0]
        jumps += d.size
        top = np.concatenate([top, d])
        if top.size > k + 1:
            top = np.partition(top, top.size - k - 1)[top.size - k - 1:]
    if jumps <= k:
        return math.inf
    top = np.sort(top)[::-1]
    logs = np.log(top[:k] / top[k])
    mean_log = float(np.mean(logs))
    if not mean_log > 0 or moment_index(logs) < JUMP_XI:
        return math.inf
    return 1.0 / mean_log


def moment_index(logs: Array) -> float:
    """The moment estimator of the extreme-value index (Dekkers, Einmahl and de Haan) from the log
    excesses over the threshold: about 1 / tail index for a heavy (Pareto) tail, <= 0 for a light or
    bounded one, where Hill's estimate (which assumes a heavy tail) is biased low."""
    m1, m2 = float(np.mean(logs)), float(np.mean(logs * logs))
    if not m2 > m1 * m1:
        return -math.inf
    return m1 + 1.0 - 0.5 / (1.0 - m1 * m1 / m2)


def heavy_factor(index: float) -> float:
    """How much a quantile's ``D`` is raised for a jump tail index ``index``: 1 from :data:`HEAVY`
    up, ``((HEAVY - 1) / (index - 1)) ** HEAVY_POWER`` below (2.0 at 2.2), at most :data:`HEAVY_MAX`."""
    if not index < HEAVY:
        return 1.0
    if index <= 1.0:
        return HEAVY_MAX
    return float(min(HEAVY_MAX, ((HEAVY - 1.0) / (index - 1.0)) ** HEAVY_POWER))


def block_sizes(n: int, block: int) -> npt.NDArray[np.int64]:
    """Requests per block: ``n // block`` blocks (at least 1), sizes ``block`` or ``block + 1``."""
    m = max(1, n // max(1, block))
    edges = (np.arange(m + 1, dtype=np.int64) * n) // m
    return np.diff(edges)


def blocks(values: Any, block: int) -> Array:
    """Per-block sums of ``values`` (already in arrival order), non-overlapping, sizes from
    :func:`block_sizes`. Counts per block: pass a 0/1 array."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        return np.zeros(0)
    sizes = block_sizes(int(x.size), block)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.asarray(np.add.reduceat(x, starts), dtype=np.float64)
