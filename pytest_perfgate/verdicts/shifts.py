"""Level shifts of a run: the stretches of requests between which the server's level moved (a CPU
changing its clock or its neighbours, a cache warming), told apart from short-memory dependence.

A run whose level shifts (the TPOT of a CPU run: 5.7, 6.4, 6.5, 9.5, 9.8, 10.0, 7.6, 6.2, 6.9, 7.9 ms
by tenths, issue 39) has a whole-run autocorrelation time that measures the shift and grows with the
run (tau 140 at 1,000 requests, 390 at 3,000), not the memory of its requests. Its requests are
almost independent *within* each stretch. :func:`find` fits a piecewise-constant level to the run's
normal scores (greedy binary segmentation by the drop in the sum of squares, segments of at least
``max(50, n / 40)`` requests, at most :data:`MAX_SHIFTS` shifts) and keeps the largest number of
shifts for which

* every shift's drop exceeds ``pen * log(n)`` times the long-run variance of what is left (the
  residual's variance times its own tau: a shift must stand out of the memory that remains;
  ``pen`` 2, or 1 when the shifts explain the run's memory away, tau falling >= 8-fold), and
* every segment is at least :data:`GUARD` times that residual tau long (the memory left is short
  against the stretches: a queue's long busy periods are memory, not shifts, and fail this).

A run longer than :data:`THIN` values (an ITL's gaps) is searched on the means of consecutive
blocks of ``ceil(n / THIN)`` (the search on 1,000,000 gaps took 41 s of CPU; now about the tau's own
1.5 s), its residual tau and the segment guard then checked on every value.

Measured (``benchmarks/bench_level_shifts.py``, ``GUARD`` 20 -> 15): segmented in 99% -> 100% of
1,000-request runs of the issue's decile levels and 0-5% of stationary queue runs (M/M/1 0.7-0.95,
M/M/4 0.8-0.9, M/G/1, AR(1)); the queues' false pass at their P99 is unchanged (docs/statistics.md).
What a segmented run's quantile claim covers: the run's own mix of levels (see :mod:`.blocked`).

**Drift** (a level that moves by many small steps: a CPU's state, ``transformers serve``'s TTFT
means by twentieths of a run 134-189 ms). No single shift of it stands out of the memory left, so the
penalised search finds none, or a few that leave the drift in the memory within them (a live
``transformers serve`` run: 3 shifts, tau within 66 of 713); its residual tau falls steadily with every
cut. The most segments the search takes (at least :data:`DRIFT_MIN_CUTS` shifts) are read as a local
level when they explain the memory away, tau falling >= :data:`DRIFT_FOLD`-fold, and every segment is
>= :data:`DRIFT_GUARD` x the residual tau long (``Shifts.drift``): where the penalised search finds
none, or finds shifts that leave >= :data:`DRIFT_OVER` x as much memory within them (a run of a few
clean levels keeps its shifts); the claim is the same as a shifted run's. Measured before choosing (``benchmarks/bench_drift_guard.py``, 200 runs a row): the recorded
``transformers serve`` run (tests/fixtures/runs/) is read so at 1,600-10,000 requests, stationary queue runs
(M/M/1 0.5-0.99, AR(1) 0.99-0.999, M/G/1, batching; n 3,000 and 10,000) in 0-2%; their P99 at the
true limit passes 0-4.5% with it (benchmarks/results-drift-guard.txt, docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

MAX_SHIFTS = 20
GUARD = 15.0  # every segment >= GUARD x the residual tau
PEN, PEN_STRONG, STRONG = 2.0, 1.0, 8.0  # penalty x log(n); PEN_STRONG when tau falls >= STRONG-fold
MIN_SEGMENT = 50
DRIFT_FOLD, DRIFT_GUARD, DRIFT_MIN_CUTS = 12.0, 10.0, 10  # a drift: the module doc
DRIFT_OVER = 2.0  # ... read over shifts that stand out when it leaves <= 1 / DRIFT_OVER of their memory within


@dataclass(frozen=True)
class Shifts:
    """``cuts``: the first request of each new segment (arrival order, increasing); ``tau``: the
    residual's integrated autocorrelation time (the memory within the segments); ``drift``: no shift
    stands out, the segments are a local level of a drifting run (module doc)."""

    cuts: tuple[int, ...]
    tau: float
    drift: bool = False


def min_segment(n: int) -> int:
    return max(MIN_SEGMENT, n // 40)


def _split(cs: Array, a: int, b: int, least: int) -> tuple[int, float]:
    """The best single cut of [a, b) and its drop in the sum of squares (-1, 0: none)."""
    m = b - a
    if m < 2 * least:
        return -1, 0.0
    k = np.arange(least, m - least + 1, dtype=np.float64)
    c = (cs[a + least: b - least + 1] - cs[a]) - k / m * (cs[b] - cs[a])
    gain = c * c * m / (k * (m - k))
    j = int(np.argmax(gain))
    return a + least + j, float(gain[j])


def greedy(s: Array, least: int, most: int) -> list[tuple[int, float]]:
    """Binary segmentation of ``s``: cuts with their drops, in the order taken (largest drop first)."""
    cs = np.concatenate([[0.0], np.cumsum(s)])
    open_: dict[tuple[int, int], tuple[int, float]] = {(0, s.size): _split(cs, 0, s.size, least)}
    out: list[tuple[int, float]] = []
    while len(out) < most and open_:
        (a, b), (cut, gain) = max(open_.items(), key=lambda kv: kv[1][1])
        if cut < 0 or gain <= 0:
            break
        del open_[(a, b)]
        out.append((cut, gain))
        open_[(a, cut)] = _split(cs, a, cut, least)
        open_[(cut, b)] = _split(cs, cut, b, least)
    return out


def residual(x: Array, cuts: tuple[int, ...]) -> Array:
    """``x`` less each segment's mean."""
    r = np.array(x, dtype=np.float64, copy=True)
    edges = (0, *cuts, r.size)
    for a, b in zip(edges[:-1], edges[1:], strict=False):
        r[a:b] -= r[a:b].mean()
    return r


def find(scores: Array, tau_run: float, tau_of: Callable[[Array], float]) -> Shifts | None:
    """The run's level shifts from its normal scores (arrival order), or None when it has none that
    stand out of its memory (``tau_run``: the whole run's tau of the scores; ``tau_of``: the package's
    one tau estimator, :func:`.dependence.tau_of`)."""
    n = int(scores.size)
    if n > THIN:  # a long run (an ITL's gaps): the search on means of g consecutive scores (its cost)
        return find_thinned(thin_means(scores), n, tau_run, tau_of, lambda: scores)
    return _search(scores, tau_run, tau_of)


THIN = 20_000  # runs longer than this are searched on block means


def thin_means(scores: Array) -> Array:
    """The means of ``g = ceil(n / THIN)`` consecutive scores that :func:`find` searches a run longer
    than :data:`THIN` on (a caller may take them, then centre its scores in place)."""
    n = int(scores.size)
    g = -(-n // THIN)
    m = n // g
    return np.asarray(scores[: m * g].reshape(m, g).mean(axis=1), dtype=np.float64)


def find_thinned(means: Array, n: int, tau_run: float, tau_of: Callable[[Array], float],
                 scores: Callable[[], Array]) -> Shifts | None:
    """:func:`find` of a run of ``n > THIN`` scores from their :func:`thin_means`; ``scores`` makes
    the scores themselves, asked for only when the search finds shifts (the residual's tau)."""
    g = -(-n // THIN)
    found = _search(means, tau_run / g, tau_of)
    if found is None:
        return None
    cuts = tuple(c * g for c in found.cuts)
    tau = tau_of(residual(scores(), cuts))
    if found.drift:
        return Shifts(cuts, tau, True) if _drift_ok(cuts, n, tau, tau_run) else None
    return Shifts(cuts, tau) if _segments_ok(cuts, n, tau) else None


def _segments_ok(cuts: tuple[int, ...], n: int, tau: float, guard: float = GUARD) -> bool:
    edges = (0, *cuts, n)
    return min(b - a for a, b in zip(edges[:-1], edges[1:], strict=False)) >= guard * tau


def _drift_ok(cuts: tuple[int, ...], n: int, tau: float, tau_run: float) -> bool:
    return len(cuts) >= DRIFT_MIN_CUTS and tau * DRIFT_FOLD <= tau_run and _segments_ok(cuts, n, tau, DRIFT_GUARD)


def _search(scores: Array, tau_run: float, tau_of: Callable[[Array], float]) -> Shifts | None:
    n = int(scores.size)
    least = min_segment(n)
    order = greedy(scores, least, min(MAX_SHIFTS, n // least - 1))
    drift = None  # the most segments as a local level (module doc)
    for k in range(len(order), 0, -1):
        cuts = tuple(sorted(c for c, _ in order[:k]))
        r = residual(scores, cuts)
        tau = tau_of(r)
        if k == len(order) and _drift_ok(cuts, n, tau, tau_run):
            drift = Shifts(cuts, tau, True)
        pen = (PEN_STRONG if tau * STRONG <= tau_run else PEN) * math.log(n)
        if min(g for _, g in order[:k]) < pen * float(r.var()) * tau:
            continue
        if _segments_ok(cuts, n, tau):  # shifts that stand out, unless they leave a drift's memory within
            return drift if drift is not None and drift.tau * DRIFT_OVER <= tau else Shifts(cuts, tau)
    return drift


def levels(x: Array, cuts: tuple[int, ...]) -> list[float]:
    """Each segment's median of ``x`` (arrival order): the levels a verdict names."""
    edges = (0, *cuts, x.size)
    return [float(np.median(x[a:b])) for a, b in zip(edges[:-1], edges[1:], strict=False)]
