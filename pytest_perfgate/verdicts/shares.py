"""A share of a run's requests (good ones, ones over a limit) when the requests are not independent.

A run's requests share a queue: a bad request is followed by bad ones, so bad requests come in
clusters and a binomial bound (Clopper-Pearson on the requests) passes a server at its boundary far
too often (a goodput gate on M/M/1 response times 27-70% for a nominal 5%). Here the unit of
information is a **block** of consecutive requests in send order:

* a run in which no dependence shows (:func:`~.dependence.estimate` on the memory series, else on the
  flags: a one-sided 1% test on its first autocorrelations) is bounded as independent requests, by
  Clopper-Pearson: the verdict is then exactly the independent one and loses no power;
* otherwise the run is cut into ``BLOCKS`` (30) equal blocks: a fixed number of batch means, so a block grows
  with n (n / 30 requests) and a queue's long memory near saturation is not cut short, as a batch of
  sqrt(n) requests cuts it (its tau was ~70 where the true one was 738-1,667);
* the share's bounds are the Fieller test inversion of :func:`~.acceptance.accepted_prefix_bounds`
  over the blocks (the share exceeds r exactly when the mean over blocks of bad - r x requests is
  above 0: Student t on 29 degrees of freedom with Hall's skewness correction at the skewness one
  standard error beyond its estimate, a side the blocks skew towards at 1 - (1 - c) / 20 unless
  30 >= 10 G1^2): clusters of bad requests make the block shares skewed, and a plain t undercovers;
* never narrower than Clopper-Pearson on n / tau effective requests, tau the integrated
  autocorrelation time of the underlying series (``memory``, e.g. the latencies, by the same 30
  batch means): a run whose few bad requests sit in one cluster shows no spread between blocks, but
  its latencies show how long it remembers (without this a capacity term at utilisation 0.897
  passed 15%);
* a run with no bad request at all (or no good one) has no spread to measure: its bound is that
  Clopper-Pearson on n / tau alone, or on the 30 blocks themselves when no series is given.

Regeneration cycles (a new unit at each idle instant, no request of ours in flight) were simulated
too (as the clusters of the same Fieller bound): on M/M/1 they held 1.2-1.8% at utilisation 0.3-0.7
but 10-18% at 0.9-0.95, where busy periods are heavy-tailed and a run sees too few long ones; fixed
blocks held 3.5-6.8% there. Measured rates: docs/statistics.md ("Goodput, capacity, regression and
comparisons under dependence"), benchmarks/bench_dependence_gates.py.

Assumption: the run is stationary apart from its start, and its memory is short against a block
(n / 30 requests). A queue started empty at utilisation 0.9 with 2,000 requests (about 8 independent
requests' worth) still passes 22% of the time at the boundary: the start's empty queue makes the
run better than the steady state, and nothing in so short a run shows it; at utilisation 0.3 with
80-500 requests from empty the dependence is too weak for the 1% test to see (8-11%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from .acceptance import accepted_prefix_bounds
from .bounds import Bounds
from .dependence import estimate

Array = npt.NDArray[np.float64]
BLOCKS = 30  # blocks of a run (t on 29 degrees of freedom)
METHOD = "blocks of consecutive requests (30), Fieller skew-corrected t over blocks"


def block_labels(n: int, blocks: int = BLOCKS) -> npt.NDArray[np.int64]:
    """``blocks`` runs of consecutive requests, as equal as n allows (n blocks of one when n < blocks)."""
    g = max(1, min(n, blocks))
    return (np.arange(n, dtype=np.int64) * g // max(1, n)).astype(np.int64)


def batch_tau(x: Array, blocks: int = BLOCKS) -> float:
    """Integrated autocorrelation time of ``x`` by ``blocks`` batch means (>= 1; 1 below 2 blocks)."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    g = min(n, blocks)
    v = float(np.var(x, ddof=1)) if n > 1 else 0.0
    if g < 2 or not v > 0:
        return 1.0
    lab = block_labels(n, g)
    means = np.bincount(lab, weights=x) / np.bincount(lab)
    return max(1.0, n / g * float(np.var(means, ddof=1)) / v)


@dataclass(frozen=True)
class Share:
    """A share's bounds with the dependence it allowed for."""

    bounds: Bounds
    n: int
    blocks: int
    tau: float  # integrated autocorrelation time of the flags (or of the memory series), >= 1

    @property
    def n_eff(self) -> float:
        return self.n / self.tau

    @property
    def dependent(self) -> bool:
        return self.blocks < self.n

    def describe(self) -> str:
        """``n = 3,000, about 410 independent (30 blocks of 100 requests in arrival order)``;
        ``n = 300, no dependence shown`` when bounded as independent."""
        if not self.dependent:
            return f"n = {self.n:,}, no dependence shown"
        size = math.ceil(self.n / max(1, self.blocks))
        return (f"n = {self.n:,}, about {max(1, round(self.n_eff)):,} independent "
                f"({self.blocks} blocks of {size:,} requests in arrival order)")


def share_bounds(flags: npt.ArrayLike, c: float, memory: npt.ArrayLike | None = None,
                 blocks: int = BLOCKS, dependent: bool | None = None) -> Share:
    """One-sided bounds at ``c`` of the share of true ``flags`` (per request, in send order).
    ``dependent``: whether the run shows dependence, when the caller has estimated it already
    (:func:`~.dependence.estimate` of ``memory``, else of ``flags``)."""
    f = np.asarray(flags, dtype=np.float64)
    n = int(f.size)
    k = float(f.sum())
    if n == 0:
        return Share(Bounds(math.nan, 0.0, 1.0, METHOD), 0, 0, 1.0)
    mem = np.asarray(memory, dtype=np.float64) if memory is not None else f
    if not (estimate(mem).dependent if dependent is None else dependent):
        lower, upper = clopper_pearson_real(k, n, c)
        return Share(Bounds(k / n, lower, upper, "clopper-pearson (no dependence shown)"), n, n, 1.0)
    lab = block_labels(n, blocks)
    g = int(lab[-1]) + 1
    # never narrower than Clopper-Pearson on n / tau effective requests, tau the memory series' (the
    # requests themselves when none is given): few bad requests in one cluster show no spread
    # between blocks, but the series shows how long the run remembers
    tau_m = batch_tau(np.asarray(memory, dtype=np.float64), blocks) if memory is not None else 1.0
    lo_m, hi_m = clopper_pearson_real(k / tau_m, n / tau_m, c)
    if 0 < k < n:
        tau = max(tau_m, batch_tau(f, blocks))
        b = accepted_prefix_bounds(np.bincount(lab, weights=f).astype(np.float64), np.bincount(lab).astype(np.float64), c)
        warn = ("clustered requests: the blocks' shares are skewed, so the side they skew towards is bounded at "
                f"the stricter {1 - (1 - c) / 20:.4g}") if b.warning else ""
        out = Bounds(k / n, min(b.lower, lo_m), max(b.upper, hi_m), METHOD, warn)
        return Share(out, n, g, tau)
    # no spread in the flags: the memory series' n / tau, or the blocks as the independent units
    tau = tau_m if memory is not None else n / g
    lower, upper = clopper_pearson_real(k / tau, n / tau, c)
    return Share(Bounds(k / n, lower, upper, METHOD), n, g, tau)


def clopper_pearson_real(x: float, n: float, c: float) -> tuple[float, float]:
    """Clopper-Pearson one-sided bounds for real-valued (effective) counts ``x`` of ``n``."""
    n = max(1.0, n)
    lower = 0.0 if x <= 0 else float(spc.betaincinv(x, n - x + 1, 1 - c))
    upper = 1.0 if x >= n else float(spc.betaincinv(x + 1, n - x, c))
    return lower, upper
