"""Goodput with a bound: requests meeting every per-request SLO, per second (DistServe's definition,
as ``vllm bench serve --goodput ttft:A,tpot:B,e2el:C``).

A request is *good* when it succeeded and its TTFT <= ``ttft``, its TPOT <= ``tpot`` and its E2E
<= ``e2e`` (the limits given; an undefined TPOT, one output token, does not violate a TPOT limit, as
in vLLM). Failed requests are measured but never good. Over a run of ``n`` measured requests of
which ``g`` are good, sent and answered over ``T`` seconds (first send to last response):

* attainment ``g / n`` is a share of the requests in send order, bounded over 30 blocks of
  consecutive requests (:mod:`~pytest_perfgate.verdicts.shares`: a queue makes neighbours alike, so
  bad requests come in clusters; Clopper-Pearson on the requests as if independent passed a gate at
  the true attainment 27-70% of the time on M/M/1 response times); the run's memory is read from each
  request's worst SLO ratio (its latency over the limit, the largest over the SLOs);
* goodput ``g / T`` = sum(good) / sum(duration) over the same units (the run's requests in send
  order, each with the time to the next send; the last one's runs to the last response, so the
  durations add up to T): a ratio of two sums whose numerator and denominator both vary, bounded by
  the Fieller test inversion of :func:`~pytest_perfgate.verdicts.acceptance.accepted_prefix_bounds`
  (goodput exceeds r exactly when the mean of good - r x duration is above 0), on the requests
  themselves when no dependence shows (at most 1,000 units of consecutive requests), else on the 30
  blocks: the request rate's own uncertainty (Poisson / renewal arrivals: ``n / T`` varies by
  about 1 / sqrt(n)) and its covariance with the attainment (a closed loop's fast spells are both)
  are in the bound. Never narrower than the delta method on the product (attainment's share bound
  and the request rate's bound, their relative margins added in quadrature). Before, the rate was
  taken as measured and known: a gate at the true goodput passed 33% of independent Poisson runs.
* a dependent run shorter than ``MIN_MEMORIES`` (50) x its memory ``tau`` (Geyer's integrated
  autocorrelation time of the worst-ratio series, :func:`~pytest_perfgate.verdicts.dependence.estimate`)
  has no bound (0 - inf, the verdict inconclusive, saying the requests it needs): its blocks are
  shorter than its memory and undercount it (M/M/1 at utilisation 0.9, 1,000 requests passed
  29-36% at the boundary; Sokal's and emcee's rule for a trustworthy tau is n >= 50 tau).

Assumption: the run is stationary apart from its start and its memory is short against a block
(n / 30 requests); measured rates in docs/statistics.md ("Goodput's request rate and short busy
runs", benchmarks/bench_goodput39.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..config.metrics import slo_names
from ..contract import RequestRecord
from ..verdicts.acceptance import accepted_prefix_bounds
from ..verdicts.bounds import Bounds
from ..verdicts.dependence import estimate
from ..verdicts.shares import BLOCKS, block_labels, share_bounds
from . import metrics as m

SLO_NAMES = slo_names()  # ttft, tpot, e2e: the metric table's SLO latencies (config/metrics.py)
_VLLM_NAMES = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e", "e2e": "e2e"}
MIN_MEMORIES = 50  # a dependent run needs >= this many x its tau requests for a bound
MAX_UNITS = 1000  # units of consecutive requests when no dependence shows (independent: any grouping)
_TOP = 4.0  # the largest goodput searched, in units of the run's request rate


def parse_slos(spec: str | Mapping[str, float]) -> dict[str, float]:
    """SLO limits in seconds from vLLM's ``--goodput`` syntax (``"ttft:200,tpot:50"``, milliseconds)
    or a mapping already in seconds (``{"ttft": 0.2}``); unknown names and limits <= 0 are errors."""
    if isinstance(spec, str):
        out: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in spec.replace(" ", ",").split(","))):
            name, sep, value = part.partition(":")
            key = _VLLM_NAMES.get(name.strip().lower())
            try:
                ms = float(value) if sep else float("nan")
            except ValueError:
                ms = float("nan")
            if key is None or not ms > 0:
                raise ValueError(f"goodput SLO {part!r}: expected NAME:MILLISECONDS with NAME one of ttft, tpot, e2el")
            out[key] = ms / 1e3
        return out
    out = {}
    for name, limit in spec.items():
        key = _VLLM_NAMES.get(name.lower())
        if key is None or not float(limit) > 0:
            raise ValueError(f"goodput SLO {name!r} = {limit!r}: names are ttft, tpot, e2e; limits > 0 seconds")
        out[key] = float(limit)
    return out


@dataclass(frozen=True)
class Goodput:
    """Good requests of a run, the attainment's bounds and goodput's (req/s)."""

    good: int
    requests: int
    seconds: float
    confidence: float
    attainment: Bounds  # good / requests
    slos: Mapping[str, float]
    dependence: str = ""  # the blocks and the independent requests they are worth
    bounds: tuple[float, float] = (0.0, math.inf)  # goodput's one-sided bounds, req/s
    refused: str = ""  # why the run has no bound (its memory too long against it)
    needed: int = 0  # requests a bound needs at this dependence, when refused

    @property
    def rate(self) -> float:
        """Goodput, req/s."""
        return self.good / self.seconds if self.seconds > 0 else float("nan")

    @property
    def request_rate(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else float("nan")

    @property
    def rate_bounds(self) -> tuple[float, float]:
        """One-sided (lower, upper) bounds of goodput at the confidence, req/s (the request rate's
        uncertainty included)."""
        return self.bounds

    method = ("good requests / seconds, a ratio of sums over the requests in send order (each with the time "
              "to the next send), or over 30 blocks of consecutive requests when they are dependent: Fieller "
              "skew-corrected t, never narrower than the delta method on attainment x request rate; no bound "
              f"when the run is shorter than {MIN_MEMORIES} x its memory")

    def text(self) -> str:
        lo, hi = self.rate_bounds
        limits = ", ".join(f"{k} <= {v * 1e3:g} ms" for k, v in self.slos.items())
        return (f"goodput {self.rate:.3g} req/s (one-sided {self.confidence:.0%} bounds {lo:.3g} - {hi:.3g}): "
                f"{self.good} of {self.requests} requests met {limits} "
                f"({self.attainment.observed:.1%}, bounds {self.attainment.lower:.1%} - {self.attainment.upper:.1%}"
                + (f"; {self.dependence}" if self.dependence else "") + ")"
                + (f"; {self.refused}" if self.refused else ""))

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.rate_bounds
        return {"good": self.good, "requests": self.requests, "seconds": self.seconds,
                "confidence": self.confidence, "slos_s": dict(self.slos), "goodput_req_s": self.rate,
                "goodput_bounds_req_s": [lo, hi], "attainment": self.attainment.observed,
                "attainment_bounds": [self.attainment.lower, self.attainment.upper], "method": self.method,
                "dependence": self.dependence, "refused": self.refused}


def goodput(records: Sequence[RequestRecord], slos: Mapping[str, float] | str, c: float = 0.95) -> Goodput:
    """:class:`Goodput` of a run's records (``RunResult.records``) under ``slos`` (seconds, or vLLM's
    ``"ttft:200,tpot:50"`` in ms)."""
    limits = parse_slos(slos)
    if not limits:
        raise ValueError("goodput needs at least one SLO (ttft, tpot, e2e)")
    measured = sorted(m.measured(records), key=lambda r: (r.scheduled_ns or r.sent_ns, r.index))
    ratio = np.asarray([_worst_ratio(r, limits) for r in measured], dtype=np.float64)
    good = np.asarray([bool(r.ok and r.chunk_ns) and m.meets_slos(r, limits) for r in measured], dtype=bool)
    span = m.run_span_ns(records)
    seconds = (span[1] - span[0]) / 1e9 if span is not None else 0.0
    sent = np.asarray([r.sent_ns for r in measured], dtype=np.float64)
    if sent.size and (sent > 0).any():
        sent[sent <= 0] = sent[sent > 0].min()  # never sent: no time of its own (at the first send)
    sent = sent / 1e9
    gb = goodput_bounds(good, np.minimum(ratio, 10.0), sent, seconds, c)
    return Goodput(int(good.sum()), len(measured), seconds, c, gb.attainment, limits,
                   gb.dependence if measured else "", gb.bounds, gb.refused,
                   math.ceil(MIN_MEMORIES * gb.tau) if gb.refused else 0)


@dataclass(frozen=True)
class GoodputBounds:
    """What :func:`goodput_bounds` decides: the attainment's bounds, goodput's (req/s), and why not."""

    attainment: Bounds
    bounds: tuple[float, float]
    dependence: str
    refused: str = ""
    tau: float = 1.0  # the memory series' tau (1 when no dependence shows)


def goodput_bounds(good: npt.ArrayLike, memory: npt.ArrayLike, sent: npt.ArrayLike, seconds: float,
                   c: float) -> GoodputBounds:
    """One-sided bounds at ``c`` of goodput (req/s) and of the attainment, from the requests' good
    flags and memory series (worst latency / limit) in send order, their send times (s) and the run's
    duration ``seconds`` (first send to last response). See the module."""
    g = np.asarray(good, dtype=np.float64)
    mem = np.asarray(memory, dtype=np.float64)
    n = int(g.size)
    dep = estimate(mem, shifts=False)
    share = share_bounds(g, c, memory=mem, dependent=dep.dependent)
    if n == 0 or not seconds > 0:
        return GoodputBounds(share.bounds, (0.0, math.inf), share.describe() if n else "")
    tau = dep.tau if dep.dependent else 1.0
    if dep.dependent and n < MIN_MEMORIES * tau:
        need = math.ceil(MIN_MEMORIES * tau)
        why = (f"no bound: the run remembers about {tau:.0f} requests (tau), too long against its {n:,}; "
               f"a bound needs >= {MIN_MEMORIES} x tau, about {need:,} requests at this dependence")
        a = share.bounds
        return GoodputBounds(Bounds(a.observed, 0.0, 1.0, a.method, why), (0.0, math.inf), share.describe(), why, tau)
    s = np.sort(np.asarray(sent, dtype=np.float64))
    if s.size != n:
        raise ValueError(f"goodput bounds: {s.size} send times for {n} requests")
    dur = np.maximum(np.diff(s, append=s[0] + seconds), 0.0)  # to the next send; the last: to the end
    scale = n / seconds  # durations in units of the mean gap: the ratio is an attainment-like share
    lab = block_labels(n, BLOCKS if dep.dependent else min(n, MAX_UNITS))
    gs = np.asarray(np.bincount(lab, weights=g), dtype=np.float64)
    ds = np.asarray(np.bincount(lab, weights=dur), dtype=np.float64) * scale
    fb = accepted_prefix_bounds(gs, ds, c, top=_TOP)
    rb = accepted_prefix_bounds(np.asarray(np.bincount(lab), dtype=np.float64), ds, c, top=_TOP)  # the rate
    p, a = float(g.mean()), share.bounds
    lo_d = _delta(p, a.lower, 1.0, rb.lower, -1)
    hi_d = _delta(p, a.upper, 1.0, rb.upper, 1)
    lower = min(fb.lower, lo_d) * scale
    upper = max(fb.upper, hi_d) * scale if fb.upper < _TOP and rb.upper < _TOP else math.inf
    return GoodputBounds(a, (lower, upper), share.describe(), "", tau)


def _delta(p: float, p_b: float, r: float, r_b: float, side: int) -> float:
    """The delta method's bound of p x r from each factor's one-sided bound (relative margins in
    quadrature); 0 / inf where a factor's bound is 0 / inf."""
    if side < 0:
        if p_b <= 0 or r_b <= 0 or p <= 0:
            return 0.0
        return p * r * math.exp(-math.hypot(math.log(p / p_b), math.log(r / r_b)))
    if not (math.isfinite(p_b) and math.isfinite(r_b)):
        return math.inf
    if p <= 0:
        return p_b * r_b
    return p * r * math.exp(math.hypot(math.log(p_b / p), math.log(r_b / r)))


def _worst_ratio(r: RequestRecord, limits: Mapping[str, float]) -> float:
    """A request's largest latency / limit over the SLOs (the run's memory; failed requests: inf)."""
    if not (r.ok and r.chunk_ns):
        return float("inf")
    worst = 0.0
    for name, limit in limits.items():
        v = m.ttft_ns(r) if name == "ttft" else m.tpot_ns(r) if name == "tpot" else m.e2e_ns(r)
        if v is not None:
            worst = max(worst, v / 1e9 / limit)
    return worst
