"""Gates decided by load data itself, through the normal evaluation path (``perfgate.check``).

A gate with ``slo`` terms in thresholds.toml is decided by its data's ``perfgate_verdict(gate, c)``
(verdicts/verdict.py calls it), which returns the verdict's fields:

* a **capacity gate** (``statistic = "sustained"``, ``metric = "request_throughput"`` or
  ``"concurrency"``, ``min`` = the target level, ``slo = { ttft_p99 = "2 s", tpot_p99 = "100 ms" }``)
  on a :class:`~pytest_perfgate.load.sweep.Sweep`: every level the sweep ran is decided again with
  the gate's own terms and confidence (:mod:`.capacity`: n / tau effective requests, Bonferroni over
  the terms, saturation, the fixed-sequence search); observed and lower = the sustained level,
  upper = the first level not sustained; the note gives the SLO margins at the target and the knee,
  ``curve`` every level (the report's latency-vs-load and Pareto plots);
* a **bounded goodput gate** (``metric = "goodput"``, ``slo = { ttft = "2 s", tpot = "50 ms" }``)
  on a :class:`~pytest_perfgate.load.result.RunResult`: goodput's one-sided Clopper-Pearson bounds
  (:mod:`.goodput`) against the gate's min or max.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..verdicts.bounds import Bounds
from ..verdicts.rules import decide
from ..verdicts.samples import SampleError
from .capacity import METHOD, CapacityVerdict, Level, Term, level_of
from .goodput import goodput

if TYPE_CHECKING:
    from ..config import Gate
    from ..contract import RequestRecord


class RunResult(Protocol):
    """What these gates read of a load run (``load.result.RunResult``; no import of it: it calls here)."""

    records: list[RequestRecord]

    def summary(self) -> dict[str, dict[str, float]]: ...


def terms_of(gate: Gate) -> list[Term]:
    """The capacity terms of a gate's ``slo`` (quantile terms only)."""
    return [Term(metric, limit, q) for metric, q, limit in gate.slo if q is not None]


def _finite(x: Any) -> Any:
    return x if not isinstance(x, float) or math.isfinite(x) else None


def curve_point(lv: Level, run: RunResult | None) -> dict[str, Any]:
    """One level of a sweep as JSON-safe numbers (seconds, req/s; None where undefined)."""
    out: dict[str, Any] = {"level": lv.level, "decision": lv.decision, "saturated": lv.load.saturated,
                           "offered_req_s": lv.load.offered, "achieved_req_s": lv.load.achieved,
                           "goodput_req_s": lv.goodput.rate if lv.goodput is not None else None}
    if run is not None:
        s = run.summary()
        for k in ("ttft", "tpot", "e2e"):
            for p in ("p50", "p99"):
                out[f"{k}_{p}_s"] = s.get(k, {}).get(p)
        out["output_tok_s"] = s.get("output_throughput", {}).get("value")
    for t in lv.terms:
        key = t.term.name.lower().replace(" ", "_")
        out[f"{key}_upper_s"], out[f"{key}_margin_s"] = t.upper, t.margin
    return {k: _finite(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
            for k, v in out.items()}


def capacity_fields(gate: Gate, results: Mapping[float, RunResult], kind: str, c: float) -> dict[str, Any]:
    """The verdict fields of a capacity gate over a sweep's runs (``results``: level -> run)."""
    want = "rate" if gate.metric == "request_throughput" else "concurrency"
    if kind != want:
        raise SampleError(f"gate {gate.name}: a {gate.metric} capacity gate takes a {want} sweep, got a {kind} sweep")
    terms = terms_of(gate)
    target = gate.threshold.base if gate.threshold is not None else None
    if not results:
        raise SampleError(f"gate {gate.name}: the sweep ran no level")
    # every level run is decided (the curve shows them all); the fixed-sequence search claims
    # nothing past the first level not passed (CapacityVerdict.sustained and .outcome stop there)
    levels = [level_of(level, results[level].records, terms, c, open_loop=kind == "rate") for level in sorted(results)]
    unit = "req/s" if kind == "rate" else "concurrent requests"
    passed_to_end = all(lv.decision == "pass" for lv in levels if target is None or lv.level <= target)
    if target is not None and not any(math.isclose(lv.level, target) for lv in levels) and passed_to_end:
        tried = ", ".join(f"{lv:g}" for lv in sorted(results))
        raise SampleError(f"gate {gate.name}: target {target:g} {unit} is not a level of the sweep ({tried}): "
                          "add it to the sweep's levels")
    v = CapacityVerdict(target, unit, c, levels)
    return _fields(gate, v, results, c)


def _fields(gate: Gate, v: CapacityVerdict, results: Mapping[float, RunResult], c: float) -> dict[str, Any]:
    sustained = v.sustained
    first_not = next((lv for lv in v.levels if lv.decision != "pass"), None)
    at = next((lv for lv in v.levels if v.target is not None and math.isclose(lv.level, v.target)), first_not)
    margins = "; ".join(f"{t.term.name} margin {t.margin * 1e3:.4g} ms" if math.isfinite(t.margin)
                        else f"{t.term.name} not shown to hold" for t in (at.terms if at else ()))
    knee = v.knee
    parts = [f"sustains {sustained:g} {v.unit}" if sustained is not None else "sustains no level tried",
             f"at {at.level:g}: {margins}" if at is not None and margins else "",
             v.knee_text,
             f"first level not sustained {first_not.level:g}: {first_not.decision}"
             + (f" ({first_not.load.saturated})" if first_not.load.saturated else "") if first_not else ""]
    needed = max((t.needed or 0 for t in first_not.terms), default=0) if first_not is not None else 0
    details: dict[str, float] = {"levels": float(len(v.levels))}
    if sustained is not None:
        details["sustained"] = float(sustained)
    if knee is not None:
        details["knee"] = float(knee)
    for t in at.terms if at else ():
        if math.isfinite(t.margin):
            details[f"margin_s.{t.term.name}"] = t.margin
    return dict(
        outcome=v.outcome, observed=float(sustained) if sustained is not None else math.nan,
        lower=float(sustained) if sustained is not None else -math.inf,
        upper=float(first_not.level) if first_not is not None else math.inf,
        n=sum(t.n for lv in v.levels for t in lv.terms[:1]), confidence=c, method=METHOD,
        unit="req/s" if v.unit == "req/s" else "", needed=needed or None,
        note="; ".join(p for p in parts if p), details=details,
        curve=tuple(curve_point(lv, results.get(lv.level)) for lv in v.levels),
    )


def goodput_fields(gate: Gate, run: RunResult, c: float) -> dict[str, Any]:
    """The verdict fields of a bounded goodput gate on one run (Clopper-Pearson, :mod:`.goodput`)."""
    if gate.metric != "goodput":
        raise SampleError(f"gate {gate.name}: slo terms on a run decide a goodput gate, not {gate.metric}")
    slos = {metric: limit for metric, q, limit in gate.slo if q is None}
    g = goodput(run.records, slos, c)
    if g.requests == 0:
        raise SampleError(f"gate {gate.name}: no measured requests")
    lo, hi = g.rate_bounds
    b = Bounds(g.rate, lo, hi, "clopper-pearson")
    return dict(outcome=decide(gate, b), observed=g.rate, lower=lo, upper=hi, n=g.requests, confidence=c,
                method=g.method, unit="req/s", needed=None, note=g.text(),
                details={"good": float(g.good), "attainment": g.attainment.observed,
                         "attainment_lower": g.attainment.lower, "seconds": g.seconds})

