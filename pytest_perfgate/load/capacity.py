"""Capacity: does a server *sustain* a load under its SLOs, at the gate's confidence?

The claim at one level (a request rate, or a number of concurrent users): every SLO term holds,
e.g. P99 TTFT <= a and P99 TPOT <= b, and the server keeps up (no saturation). Method:

* **Terms** (one per SLO quantile): the share of the level's requests over the limit (failed
  requests counted as over every limit) in send order, bounded by
  :func:`~pytest_perfgate.verdicts.shares.share_bounds`: Clopper-Pearson when the latencies show no
  dependence; else 30 blocks of consecutive requests (a block grows with n, so a queue's memory near
  saturation is not cut short: batches of sqrt(n) saw tau ~70-390 where the true integrated
  autocorrelation time at utilisation 0.954 is 738-1,667, and an exact-capacity server passed
  13.6-24.8% on 150k-400k-request levels), the Fieller skew-corrected t over the blocks, never
  narrower than Clopper-Pearson on n / tau of the latency series. The term passes when the
  over-limit share's upper bound is under 1 - q, fails when the under-limit share's is under q;
  ``tau`` (the larger of the series' and the indicator's, 30 batch means) gives the quantile's upper
  bound (the order statistic at the rank that bounds it with n / tau samples) and the requests needed.
* **Multiplicity**: k terms, each at ``1 - (1 - c) / k`` (Bonferroni; valid whatever their
  dependence).
* **Saturation** (open-loop levels): achieved rate (completed requests over first send to last
  completion) below 90% of the offered rate, or requests in flight growing (mean of the last third of sends over the
  middle third > 2): the level fails as *saturated*, whatever its latencies. The guard can only turn
  a pass into a fail, so it spends no error budget.
* **Search** (:func:`capacity_gate`): levels in increasing order, each tested at the full ``1 - c``
  (a fixed-sequence test: it stops at the first level that does not pass, which controls the
  family-wise error at ``1 - c`` when "sustains L" implies "sustains every lower level"). The
  sustained level is the last one passed; the gate passes when it is >= the target.

Assumption: each level's run is stationary apart from its start, and its memory is short against a
block (n / 30 requests). Measured false-pass rates and power: docs/workloads.md, docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from ..contract import RequestRecord
from ..verdicts.bounds import empirical_quantile
from ..verdicts.dependence import estimate
from ..verdicts.shares import batch_tau, share_bounds
from . import metrics as m
from .goodput import SLO_NAMES, Goodput, goodput

Array = npt.NDArray[np.float64]
Decision = Literal["pass", "fail", "inconclusive"]
SATURATION_TOLERANCE = 0.10  # achieved below (1 - this) x offered: saturated
QUEUE_GROWTH_LIMIT = 2.0  # mean in flight, last third of sends over the middle third
_METRICS = SLO_NAMES  # the metric table's SLO latencies (config/metrics.py)


@dataclass(frozen=True)
class Term:
    """One SLO term: the ``quantile`` of ``metric`` (ttft, tpot, e2e) must be <= ``limit`` seconds."""

    metric: str
    limit: float
    quantile: float = 0.99

    def __post_init__(self) -> None:
        if self.metric not in _METRICS:
            raise ValueError(f"capacity term {self.metric!r}: known metrics are {', '.join(_METRICS)}")
        if not self.limit > 0 or not 0 < self.quantile < 1:
            raise ValueError(f"capacity term {self.metric}: limit must be > 0 s and quantile in (0, 1)")

    @property
    def name(self) -> str:
        return f"P{self.quantile * 100:g} {self.metric.upper()}"


@dataclass(frozen=True)
class TermResult:
    term: Term
    n: int
    exceed: int  # requests at or over the limit (failed requests included)
    tau: float  # integrated autocorrelation time (>= 1)
    observed: float  # the empirical quantile, s
    upper: float  # one-sided upper bound at the term's confidence, s (inf: none from these data)
    confidence: float
    decision: Decision
    needed: int | None = None  # requests in all that would decide it if the observed rates hold

    @property
    def margin(self) -> float:
        """limit - upper bound, s (negative or -inf: not shown to hold)."""
        return self.term.limit - self.upper

    def text(self) -> str:
        need = f", need >= {self.needed} requests" if self.decision == "inconclusive" and self.needed else ""
        return (f"{self.term.name} {_ms(self.observed)} (upper {_ms(self.upper)} at {self.confidence:.4g}) vs "
                f"{_ms(self.term.limit)}: {self.decision}, {self.exceed}/{self.n} over, n_eff "
                f"{self.n / self.tau:.0f} (tau {self.tau:.1f}){need}")


def _ms(s: float) -> str:
    return "inf" if math.isinf(s) else f"{s * 1e3:.4g} ms"


def autocorrelation_time(x: Array) -> float:
    """Integrated autocorrelation time of a series by 30 batch means (a batch grows with n), >= 1."""
    return batch_tau(x)


def _binom_cdf(k: float, n: float, p: float) -> float:
    """P[Binomial(n, p) <= k] for real n, k (the regularized incomplete beta I_{1-p}(n - k, k + 1))."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(spc.betainc(n - k, k + 1, 1 - p))


def decide_term(term: Term, x: Array, c: float) -> TermResult:
    """One term on ``x`` (per request in send order, s; inf for failed requests, nan dropped): the
    shares of requests over and under the limit bounded over 30 blocks of consecutive requests
    (:mod:`~pytest_perfgate.verdicts.shares`); pass when the over-limit share's upper bound is under
    1 - q, fail when the under-limit share's is under q."""
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return TermResult(term, 0, 0, 1.0, math.nan, math.inf, c, "inconclusive")
    q = term.quantile
    memory = np.minimum(x, 10 * term.limit)  # the series (failed requests: a large finite value)
    over, under = x >= term.limit, x <= term.limit
    dep = estimate(memory).dependent  # once for both sides
    s_over = share_bounds(over, c, memory, dependent=dep)
    tau = s_over.tau
    ne = n / tau
    observed = empirical_quantile(x, q)
    upper = _upper(x, ne, q, c)
    k = int(np.count_nonzero(over))
    if s_over.bounds.upper < 1 - q:
        return TermResult(term, n, k, tau, observed, upper, c, "pass")
    if share_bounds(under, c, memory, dependent=dep).bounds.upper < q:
        return TermResult(term, n, k, tau, observed, upper, c, "fail")
    return TermResult(term, n, k, tau, observed, upper, c, "inconclusive", _needed(k / n, tau, q, 1 - c))


def _upper(x: Array, ne: float, q: float, c: float) -> float:
    """The q-quantile's upper bound: the order statistic at the rank that bounds it with n_eff samples."""
    if ne < 1:
        return math.inf
    j = math.floor(ne * q)
    while j <= ne and _binom_cdf(j, ne, q) < c:  # smallest j with P[Bin(ne, q) <= j] >= c
        j += 1
    if j >= ne:
        return math.inf
    rank = min(int(x.size), math.ceil((j + 1) / ne * x.size))
    return float(np.partition(x, rank - 1)[rank - 1])


def _needed(frac_over: float, tau: float, q: float, alpha: float) -> int | None:
    """Requests in all at which the observed over-limit fraction would pass (None: it never would)."""
    if frac_over >= 1 - q:
        return None
    lo, hi = 1, 2
    while _binom_cdf(frac_over * hi, hi, 1 - q) > alpha:
        lo, hi = hi, hi * 2
        if hi > 10**9:
            return None
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _binom_cdf(frac_over * mid, mid, 1 - q) <= alpha else (mid, hi)
    return math.ceil(hi * tau)


@dataclass(frozen=True)
class Load:
    """How a level kept up: offered (schedule) and achieved (completed / first send to last
    completion) request rates, req/s, and in-flight growth."""

    offered: float | None  # None for a closed loop (concurrency)
    achieved: float | None
    queue_growth: float | None

    @property
    def saturated(self) -> str:
        if self.offered and self.achieved is not None and self.achieved < (1 - SATURATION_TOLERANCE) * self.offered:
            return f"saturated: achieved {self.achieved:.3g} of {self.offered:.3g} req/s offered"
        if self.offered and self.queue_growth is not None and self.queue_growth > QUEUE_GROWTH_LIMIT:
            return f"saturated: requests in flight grew {self.queue_growth:.1f}x over the run"
        return ""


def load_of(records: Sequence[RequestRecord], open_loop: bool) -> Load:
    """Offered rate (the schedule's), achieved rate (completed requests / first send to last
    completion), in-flight growth."""
    meas = [r for r in m.measured(records) if r.sent_ns]
    sched = [r.scheduled_ns for r in meas if r.scheduled_ns is not None] if open_loop else []
    done = [float(r.end_ns or r.chunk_ns[-1]) if r.ok and r.chunk_ns else math.inf for r in meas]
    return load_from_times(np.asarray(sched, dtype=np.float64), np.asarray([r.sent_ns for r in meas], dtype=np.float64),
                           np.asarray(done, dtype=np.float64), open_loop)


def load_from_times(scheduled: Array, sent: Array, done: Array, open_loop: bool) -> Load:
    """:func:`load_of` from times (any unit of ns; ``done`` inf for a failed request)."""
    ends = done[np.isfinite(done)]
    start = float(sent.min()) if sent.size else math.nan
    # completed requests over first send to last completion (the request throughput of the run)
    achieved = ends.size * 1e9 / (float(ends.max()) - start) if ends.size and ends.max() > start else None
    if not open_loop:
        return Load(None, achieved, None)
    sched = np.sort(scheduled)
    offered = (sched.size - 1) * 1e9 / (sched[-1] - sched[0]) if sched.size > 1 and sched[-1] > sched[0] else None
    sent = np.sort(sent)
    inflight = np.arange(1, sent.size + 1) - np.searchsorted(np.sort(done), sent, side="right")
    third = sent.size // 3
    growth = None
    if third >= 2:
        growth = float(inflight[-third:].mean()) / max(1.0, float(inflight[third:2 * third].mean()))
    return Load(offered, achieved, growth)


def series(records: Sequence[RequestRecord], metric: str) -> Array:
    """Per measured request in send order (s): failed requests inf, undefined values (TPOT of one token) nan."""
    out = []
    for r in sorted(m.measured(records), key=lambda r: (r.scheduled_ns or r.sent_ns, r.index)):
        if not (r.ok and r.chunk_ns):
            out.append(math.inf)
            continue
        v = m.ttft_ns(r) if metric == "ttft" else m.tpot_ns(r) if metric == "tpot" else m.e2e_ns(r)
        out.append(math.nan if v is None else v / 1e9)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class Level:
    """The evidence at one level and its decision."""

    level: float
    terms: tuple[TermResult, ...]
    load: Load
    goodput: Goodput | None = None

    @property
    def decision(self) -> Decision:
        if self.load.saturated or any(t.decision == "fail" for t in self.terms):
            return "fail"
        return "pass" if all(t.decision == "pass" for t in self.terms) else "inconclusive"

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "decision": self.decision, "saturated": self.load.saturated,
                "offered_req_s": self.load.offered, "achieved_req_s": self.load.achieved,
                "queue_growth": self.load.queue_growth,
                "terms": [{"term": t.term.name, "limit_s": t.term.limit, "observed_s": t.observed, "upper_s": t.upper,
                           "margin_s": t.margin, "n": t.n, "over": t.exceed, "tau": t.tau, "confidence": t.confidence,
                           "decision": t.decision, "needed": t.needed} for t in self.terms],
                "goodput": self.goodput.to_dict() if self.goodput is not None else None}


def decide_level(level: float, data: dict[str, Array], load: Load, terms: Sequence[Term], c: float,
                 good: Goodput | None = None) -> Level:
    """A level from per-request series (``data[metric]``, see :func:`series`): each term at
    ``1 - (1 - c) / k`` (Bonferroni over the k terms)."""
    if not terms:
        raise ValueError("a capacity level needs at least one SLO term")
    c_term = 1 - (1 - c) / len(terms)
    return Level(level, tuple(decide_term(t, data[t.metric], c_term) for t in terms), load, good)


def level_of(level: float, records: Sequence[RequestRecord], terms: Sequence[Term], c: float,
             open_loop: bool) -> Level:
    """:func:`decide_level` on a run's records (``RunResult.records``), with its goodput."""
    data = {t.metric: series(records, t.metric) for t in terms}
    slos = {t.metric: t.limit for t in terms}
    return decide_level(level, data, load_of(records, open_loop), terms, c, goodput(records, slos, c))


@dataclass
class CapacityVerdict:
    """The search's outcome: sustained level, the target's verdict, margins, knee, every level tried."""

    target: float | None
    unit: str  # "req/s" or "concurrent requests"
    confidence: float
    levels: list[Level] = field(default_factory=list)

    @property
    def sustained(self) -> float | None:
        """The last level of the passing prefix (fixed sequence), None if the first did not pass."""
        best = None
        for lv in self.levels:
            if lv.decision != "pass":
                break
            best = lv.level
        return best

    @property
    def outcome(self) -> Decision:
        if self.target is None:
            return "pass" if self.sustained is not None else self.levels[0].decision if self.levels else "inconclusive"
        for lv in self.levels:
            if lv.level > self.target:
                break
            if lv.decision != "pass":
                return lv.decision
        return "pass" if self.sustained is not None and self.sustained >= self.target else "inconclusive"

    @property
    def knee(self) -> float | None:
        """The last level before the first saturated one (open loop) or before throughput stopped
        rising by >= 10% (closed loop); None when no tried level shows it."""
        prev: Level | None = None
        for lv in self.levels:
            flat = (prev is not None and lv.load.offered is None and prev.load.achieved and lv.load.achieved is not None
                    and lv.load.achieved < 1.1 * prev.load.achieved)
            if lv.load.saturated or flat:
                return prev.level if prev is not None else None
            prev = lv
        return None

    @property
    def knee_text(self) -> str:
        """``knee 2``, ``knee below the first level (1)`` (saturated from the first level on) or
        ``knee not reached``."""
        if self.knee is not None:
            return f"knee {self.knee:g}"
        if self.levels and self.levels[0].load.saturated:
            return f"knee below the first level ({self.levels[0].level:g}: saturated)"
        return "knee not reached"

    def text(self) -> str:
        head = (f"capacity {self.outcome.upper()}: sustains {self.sustained if self.sustained is not None else 'no level'}"
                f" {self.unit}" + (f" (target >= {self.target:g})" if self.target is not None else "")
                + f" at {self.confidence:.0%} confidence; {self.knee_text}")
        lines = [head]
        for lv in self.levels:
            rate = (f"offered {lv.load.offered:.3g}, " if lv.load.offered else "") + (
                f"achieved {lv.load.achieved:.3g} req/s" if lv.load.achieved is not None else "no completions")
            lines.append(f"  {lv.level:g} {self.unit}: {lv.decision} ({rate}){'; ' + lv.load.saturated if lv.load.saturated else ''}")
            lines.extend(f"    {t.text()}" for t in lv.terms)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "unit": self.unit, "confidence": self.confidence, "outcome": self.outcome,
                "sustained": self.sustained, "knee": self.knee, "method": METHOD,
                "levels": [lv.to_dict() for lv in self.levels]}


METHOD = ("fixed-sequence search over increasing levels, each at full 1 - c; per level, Bonferroni over the SLO "
          "terms; each term the over-limit share bounded over 30 blocks of consecutive requests (Clopper-Pearson "
          "when no dependence shows); saturation (achieved < 90% offered, in-flight growth > 2x) fails a level")


def capacity_gate(levels: Sequence[Level], *, target: float | None = None, unit: str = "req/s",
                  c: float = 0.95) -> CapacityVerdict:
    """The verdict over ``levels`` (sorted by level here; the grid must be fixed before the data)."""
    ordered = sorted(levels, key=lambda lv: lv.level)
    if target is not None and not any(math.isclose(lv.level, target) for lv in ordered):
        raise ValueError(f"capacity target {target:g} {unit} is not one of the levels tried "
                         f"({', '.join(f'{lv.level:g}' for lv in ordered)}): add it to the grid")
    return CapacityVerdict(target, unit, c, list(ordered))
