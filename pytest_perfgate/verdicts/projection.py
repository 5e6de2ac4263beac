"""How many samples a run an inconclusive quantile comparison would need if each run's observed
distribution held: the bound it projects is the per-run order-statistic one (each side's bounds at
1 - alpha/2, combined; :func:`pytest_perfgate.verdicts.comparison.evaluate_compare`). At n samples a
run, a side's bounds are the order statistics of ranks :func:`~.bounds.quantile_ranks` gives; with
the run's empirical distribution (linearly interpolated) standing in for the truth they are its
quantiles at rank / n."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from . import blocked
from . import bounds as stats
from .dependence import Dependence

Array = npt.NDArray[np.float64]


def _projected_side(x: Array, q: float, c: float, n: int) -> stats.Bounds:
    lo, hi = stats.quantile_ranks(n, q, c)

    def at(k: int) -> float:
        return float(np.quantile(x, min(k / n, 1.0), method="linear"))

    return stats.Bounds(stats.empirical_quantile(x, q), at(lo) if lo is not None else -math.inf,
                        at(hi) if hi is not None else math.inf, "projected")


def quantile_runs_needed(a: Array, r: Array, q: float, c: float, combine: Callable[[stats.Bounds, stats.Bounds], stats.Bounds],
                         decided: Callable[[stats.Bounds], bool], limit: int = 10**7) -> int | None:
    """The smallest n a run (both runs of n, each side's bounds at ``c``) at which ``combine`` of the
    two projected side bounds is ``decided``; None when no n up to ``limit`` decides it (the two
    observed distributions put the point on the threshold) or a run is empty."""
    if a.size == 0 or r.size == 0:
        return None

    def ok(n: int) -> bool:
        return decided(combine(_projected_side(a, q, c, n), _projected_side(r, q, c, n)))

    n0 = int(min(a.size, r.size))
    return stats._search(n0, ok, limit)


# ---------------------------------------------------------------- a dependent run's quantile gate
INFLATE = 1.5  # D of the projection: the run's own D times this (a short run's D runs low; issue 39)
TARGET = 0.8  # the chance the stated count is chosen for


def predictive_chance(x: Array, q: float, c: float, direction: str, thr: float, tau: float, n: int,
                      inflate: float = INFLATE) -> float:
    """The chance that a fresh run of ``n`` requests decides the q-quantile gate at ``thr``, averaged
    over what the run knows of its exceed rate: the run is ``size / D`` independent requests with
    ``count / D`` exceedances (``D = tau * inflate``), the rate's posterior Beta(k + 1/2, m - k + 1/2)
    (Jeffreys), and the fresh run's independent-equivalent count Beta-binomial on ``n / D`` (pass: at
    most the independent test's largest passing count; fail: mirrored)."""
    size = int(x.size)
    if size == 0 or n <= 0:
        return math.nan
    d = max(tau, 1.0) * inflate
    ne, m = size / d, max(1, int(n / d))
    over, under = np.count_nonzero(x >= thr) / d, np.count_nonzero(x <= thr) / d
    rp, rf = (over, under) if direction == "max" else (under, over)
    qq = q if direction == "max" else 1 - q
    chance = 0.0
    for k0, p0 in ((rp, 1 - qq), (rf, qq)):
        k = blocked._kmax(m, p0, c)
        if k >= 0:
            chance += betabinom_cdf(k, m, k0 + 0.5, max(ne - k0, 0.0) + 0.5)
    return min(chance, 1.0)


def betabinom_cdf(k: int, m: int, a: float, b: float) -> float:
    """``scipy.stats.betabinom.cdf(k, m, a, b)`` over the shorter side: the pmf from its end point by
    the ratio recurrence pmf(j + 1) / pmf(j) = (m - j) (j + a) / ((j + 1) (m - j - 1 + b)), summed in
    log space, 0..k when k < m / 2, else one less the sum over k + 1..m (scipy sums betaln terms over
    0..k: ~2 ms at m ~ 5,000, most of a sequential quantile verdict's time, in the projection)."""
    if k < 0:
        return 0.0
    if k >= m:
        return 1.0
    if k < m / 2:
        j = np.arange(k, dtype=np.float64)  # from pmf(0) up to pmf(k)
        steps = np.log((m - j) * (j + a)) - np.log((j + 1) * (m - j - 1 + b))
        start = spc.betaln(a, m + b) - spc.betaln(a, b)
    else:
        j = np.arange(m, k + 1, -1, dtype=np.float64)  # from pmf(m) down to pmf(k + 1)
        steps = np.log(j * (m - j + b)) - np.log((m - j + 1) * (j - 1 + a))
        start = spc.betaln(m + a, b) - spc.betaln(a, b)
    logpmf = np.empty(steps.size + 1)
    logpmf[0] = start
    np.cumsum(steps, out=logpmf[1:])
    logpmf[1:] += start
    top = float(logpmf.max())
    total = math.exp(top) * float(np.exp(logpmf - top).sum())
    return min(1.0, total if k < m / 2 else max(0.0, 1.0 - total))


def likely_needed(x: Array, q: float, c: float, direction: str, thr: float, tau: float, floor: int,
                  target: float = TARGET, limit: int = 10**8) -> tuple[int, float] | None:
    """(requests, chance): the fewest requests (from ``floor``, the count at the run's own D) at which
    :func:`predictive_chance` reaches ``target``; None when no count up to ``limit`` does (the run
    cannot tell the rate from the limit well enough: a longer run first)."""
    def ok(n: int) -> bool:
        return predictive_chance(x, q, c, direction, thr, tau, n) >= target

    if ok(floor):
        return floor, predictive_chance(x, q, c, direction, thr, tau, floor)
    got = stats._search(floor, ok, limit)
    return None if got is None else (got, predictive_chance(x, q, c, direction, thr, tau, got))


def floor_note(x: Array, q: float, c: float, direction: str, thr: float, dep: Dependence, needed: int,
               what: str = "requests") -> tuple[str, dict[str, float]]:
    """What a dependent run's projected count is (a floor: fresh runs of it decided 9-42% of the
    time on simulated queues, docs/statistics.md) and the count to plan for (:func:`likely_needed`),
    without a chance: neither is calibrated to within 5 points across queue models; and, for a limit
    >= 2x every value, the run the far rule needs (:func:`.blocked.far_pending`)."""
    note = (f"the count assumes this run's exceed rate and dependence, which a run of {int(x.size):,} pins down "
            "poorly: treat it as a floor (fresh runs of the projected size decided 9-42% of the time on simulated "
            "queues)")
    more: dict[str, float] = {}
    got = likely_needed(x, q, c, direction, thr, dep.tau, needed)
    if got is not None:
        note = (f"{note}; allowing for that uncertainty, plan for ~{got[0]:,} {what} (most such runs decided in "
                "simulation; not a promise for this server)")
        more["needed_likely"] = float(got[0])
    far = blocked.far_pending(x, thr, direction, dep, what)
    if far is not None:
        note = f"{far[0]}; {note}"
        more["far_needed"] = float(far[1])
    return note, more
