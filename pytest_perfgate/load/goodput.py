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
* goodput ``g / T`` = attainment x the run's request rate ``n / T``; its bounds are the attainment's
  bounds times ``n / T``, the rate taken as measured (one run: no run-to-run variance of the rate).

Assumption: the run is stationary apart from its start and its memory is short against a block
(n / 30 requests); measured rates in docs/statistics.md ("Goodput").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config.metrics import slo_names
from ..contract import RequestRecord
from ..verdicts.bounds import Bounds
from ..verdicts.shares import share_bounds
from . import metrics as m

SLO_NAMES = slo_names()  # ttft, tpot, e2e: the metric table's SLO latencies (config/metrics.py)
_VLLM_NAMES = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e", "e2e": "e2e"}


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
    """Good requests of a run, the attainment's Clopper-Pearson bounds and goodput's (req/s)."""

    good: int
    requests: int
    seconds: float
    confidence: float
    attainment: Bounds  # good / requests
    slos: Mapping[str, float]
    dependence: str = ""  # the blocks and the independent requests they are worth

    @property
    def rate(self) -> float:
        """Goodput, req/s."""
        return self.good / self.seconds if self.seconds > 0 else float("nan")

    @property
    def request_rate(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else float("nan")

    @property
    def rate_bounds(self) -> tuple[float, float]:
        """One-sided (lower, upper) bounds of goodput at the confidence, req/s."""
        return self.attainment.lower * self.request_rate, self.attainment.upper * self.request_rate

    method = ("good / measured requests in send order over 30 blocks of consecutive requests (Fieller "
              "skew-corrected t, never narrower than Clopper-Pearson on n / tau), times the run's request "
              "rate (taken as measured)")

    def text(self) -> str:
        lo, hi = self.rate_bounds
        limits = ", ".join(f"{k} <= {v * 1e3:g} ms" for k, v in self.slos.items())
        return (f"goodput {self.rate:.3g} req/s (one-sided {self.confidence:.0%} bounds {lo:.3g} - {hi:.3g}): "
                f"{self.good} of {self.requests} requests met {limits} "
                f"({self.attainment.observed:.1%}, bounds {self.attainment.lower:.1%} - {self.attainment.upper:.1%}"
                + (f"; {self.dependence}" if self.dependence else "") + ")")

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.rate_bounds
        return {"good": self.good, "requests": self.requests, "seconds": self.seconds,
                "confidence": self.confidence, "slos_s": dict(self.slos), "goodput_req_s": self.rate,
                "goodput_bounds_req_s": [lo, hi], "attainment": self.attainment.observed,
                "attainment_bounds": [self.attainment.lower, self.attainment.upper], "method": self.method,
                "dependence": self.dependence}


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
    share = share_bounds(good, c, memory=np.minimum(ratio, 10.0))
    return Goodput(int(good.sum()), len(measured), seconds, c, share.bounds, limits,
                   share.describe() if measured else "")


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
