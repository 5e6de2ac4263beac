"""Evaluate a gate on measured data: ``evaluate(gate, data) -> Verdict``.

Plain Python, no pytest. ``data`` is :class:`Samples`, a :class:`Proportion`, a run result (a
:class:`~pytest_perfgate.verdicts.samples.MetricSource`; a :class:`~pytest_perfgate.verdicts.samples.RequestRun`'s
failed requests count against the gate's error budget), or for comparison gates a pair
``(treatment, reference)`` (:mod:`comparison`). The wording of a verdict is :mod:`text`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..config import Fallback, Gate, Thresholds
from ..config.metrics import REQUESTS, lookup
from ..config.units import base_unit, format_value, unit
from . import bounds as stats
from . import wording as text
from .comparison import evaluate_compare
from .rules import (
    censored,
    check_dimension,
    data_dimension,
    decide,
    display_unit,
    proportion_bounds,
    resolve_confidence,
    uncensored_note,
    unmeasured_unit,
)
from .samples import Data, Proportion, RequestCounts, RequestRun, SampleError, Samples, as_data, pooled_requests


@dataclass(frozen=True)
class Verdict:
    gate: str
    phase: str
    outcome: str  # "pass" | "fail" | "inconclusive" | "recorded" | "error" (not evaluated: failed requests, a failed test)
    metric: str
    statistic: str
    observed: float  # base units (seconds, fraction, tok/s, ...)
    lower: float
    upper: float
    n: int
    confidence: float
    method: str
    unit: str  # display unit
    direction: str | None = None
    threshold: float | None = None
    baseline: float | None = None
    needed: int | None = None
    fallbacks: tuple[str, ...] = ()
    fallback_info: tuple[Fallback, ...] = ()
    band: str | None = None
    compare: str | None = None
    note: str = ""
    details: Mapping[str, float] = field(default_factory=dict)
    # physical floor (floors/): time floor or rate ceiling of this metric on the engine's hardware,
    # the threshold as a multiple of it (< 1: infeasible), and the measured MFU/MBU (floor / observed)
    floor: float | None = None
    floor_kind: str = ""  # "floor" (times) | "ceiling" (rates)
    floor_multiple: float | None = None
    efficiency: float | None = None
    efficiency_kind: str = ""  # "MFU" (compute-bound, prefill) | "MBU" (memory-bound, decode)
    floor_basis: str = ""

    @classmethod
    def error(cls, gate: Gate, cause: str, *, confidence: float, requests: RequestCounts | None = None,
              fallback_info: tuple[Fallback, ...] = (), observed: float = math.nan, unit: str = "") -> Verdict:
        """The one constructor of an "error" verdict: ``gate`` was not evaluated, ``cause`` says why.

        Its numbers stay in the gate's own unit and threshold (a dashboard never sees a TTFT row in
        %): ``observed`` is the statistic over the requests that succeeded (NaN when none did), not
        gated; ``requests`` (failed requests beyond the error budget) gives ``n`` (requests measured)
        and the counts by cause in ``details``. An error triggers no fallback plan."""
        return cls(gate=gate.name, phase=gate.phase, outcome="error", metric=gate.metric,
                   statistic=gate.statistic.text, confidence=confidence, direction=gate.direction,
                   threshold=gate.threshold.base if gate.threshold else None,
                   baseline=gate.baseline.base if gate.baseline else None, fallbacks=gate.fallbacks,
                   fallback_info=fallback_info, compare=gate.compare, note=cause, observed=observed,
                   lower=math.nan, upper=math.nan, n=requests.measured if requests is not None else 0,
                   method="none", unit=unit or unmeasured_unit(gate),
                   details={k: float(v) for k, v in requests.causes.items()} if requests is not None else {})

    def floor_text(self) -> str:
        """``floor 152 ms; threshold 0.98x floor; MFU 52%`` or "" when no floor is known."""
        if self.floor is None:
            return ""
        parts = [f"{self.floor_kind or 'floor'} {self.fmt(self.floor)}"]
        if self.floor_multiple is not None:
            parts.append(f"threshold {self.floor_multiple:.3g}x {self.floor_kind or 'floor'}")
        if self.efficiency is not None:
            parts.append(f"{self.efficiency_kind} {self.efficiency * 100:.3g}%")
        return "; ".join(parts)

    @property
    def passed(self) -> bool:
        return self.outcome in ("pass", "recorded")

    @property
    def triggered(self) -> tuple[str, ...]:
        """Fallbacks triggered by this verdict (only a failed gate triggers its fallbacks)."""
        return self.fallbacks if self.outcome == "fail" else ()

    @property
    def target_met(self) -> bool:
        """Failed on a baseline regression (store/baseline.py), not on its target."""
        return self.details.get("target_met") == 1.0

    def fmt(self, base: float | None) -> str:
        if base is None:
            return "n/a"
        return format_value(base, unit(self.unit))

    @property
    def improvement(self) -> float | None:
        """Relative change vs the baseline, positive when better (lower for max gates)."""
        if self.baseline is None or self.baseline == 0 or not math.isfinite(self.observed):
            return None
        rel = (self.baseline - self.observed) / abs(self.baseline)
        return rel if self.direction != "min" else -rel

    def ci_text(self) -> str:
        if self.outcome == "error":
            failed = int(sum(self.details.values()))
            return f"not evaluated: {failed}/{self.n} requests failed" if self.n else "not evaluated"
        unbounded = math.isinf(self.lower) and math.isinf(self.upper)
        return text.ci_label(self.method, self.confidence, self.fmt(self.lower), self.fmt(self.upper), self.n, unbounded)

    def summary(self) -> str:
        """One line: ``gate X: ttft p99 = 212 ms (95% CI ..., n=500) > max 150 ms (baseline 320 ms)``."""
        if self.outcome == "error":
            line = f"gate {self.gate}: ERROR: {self.metric} not evaluated: {self.note}"
            if math.isfinite(self.observed):  # failed requests beyond the budget; the others measured
                line += (f"; {text.metric_label(self.metric, self.statistic)} of the requests that succeeded: "
                         f"{self.fmt(self.observed)} (not gated)")
            return line
        what = text.metric_label(self.metric, self.statistic, self.compare)
        line = f"gate {self.gate}: {what} = {self.fmt(self.observed)} ({self.ci_text()})"
        if self.direction is not None and self.threshold is not None:
            line += f" {text.op(self.direction, self.outcome, self.target_met)} {self.direction} {self.fmt(self.threshold)}"
        if self.baseline is not None:
            change = text.change_label(self.observed, self.baseline, self.outcome)
            line += f" (baseline {self.fmt(self.baseline)}" + (f", {change})" if change else ")")
        if self.band:
            line += f" [band: {self.band}]"
        if self.outcome == "inconclusive":
            line += " -> inconclusive: " + text.inconclusive_label(self.needed, self.n, self.method)
        if self.floor is not None:
            line += f" [{self.floor_text()}]"
        if self.note:
            line += f" [{self.note}]"
        return line

    def message(self) -> str:
        """The failure text, naming the fallback plans."""
        out = self.summary()
        if self.fallback_info and self.outcome in ("fail", "inconclusive"):
            plans = "; ".join(text.plan_line(f) for f in self.fallback_info)
            out += f"\n-> fallback: {plans}"
        elif not self.fallbacks and self.outcome == "fail":
            out += f"\n-> fallback: {text.no_fallback(self.gate)}"
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("fallback_info")
        d["details"] = dict(self.details)
        d["improvement"] = self.improvement
        d["ci"] = self.ci_text()
        d["summary"] = self.summary()
        for k in ("observed", "lower", "upper"):
            v = d[k]
            d[k] = None if v is None or not math.isfinite(v) else v
        d["display"] = {k: self.fmt(getattr(self, k)) for k in ("observed", "lower", "upper", "threshold", "baseline")}
        d["display"]["floor"] = self.floor_text()
        d["base_unit"] = base_unit(self.unit)  # the unit of the numbers above; "unit" is the display unit
        return d

    def user_properties(self) -> list[tuple[str, str | float | int]]:
        """(name, value) pairs of strings and numbers, for JUnit properties and xdist."""
        p = f"perfgate.{self.gate}."
        props: list[tuple[str, str | float | int]] = [
            (p + "outcome", self.outcome),
            (p + "metric", text.metric_label(self.metric, self.statistic)),
            (p + "observed", self.fmt(self.observed)),
            (p + "ci", self.ci_text()),
            (p + "n", self.n),
            (p + "threshold", text.threshold_label(self.direction, self.fmt(self.threshold))),
        ]
        if self.baseline is not None:
            props.append((p + "baseline", self.fmt(self.baseline)))
        if self.band:
            props.append((p + "band", self.band))
        if self.needed:
            props.append((p + "needed", self.needed))
        if self.fallbacks:
            props.append((p + "fallbacks", ",".join(self.fallbacks)))
        if self.triggered:
            props.append((p + "triggered", ",".join(self.triggered)))
        if self.floor is not None:
            props.append((p + self.floor_kind, self.fmt(self.floor)))
            if self.floor_multiple is not None:
                props.append((p + "threshold_vs_floor", round(self.floor_multiple, 4)))
            if self.efficiency is not None:
                props.append((p + self.efficiency_kind.lower(), round(self.efficiency, 4)))
        return props


def evaluate(
    gate: Gate,
    data: Any,
    *,
    confidence: float | None = None,
    thresholds: Thresholds | None = None,
) -> Verdict:
    """Evaluate ``gate`` on ``data``; never raises for a failing gate (see :class:`GateFailure`).

    Raises :class:`SampleError` when the data can't be evaluated (empty, NaN, wrong dimension).
    """
    c = resolve_confidence(gate, thresholds, confidence)
    err = error_verdict(gate, data, thresholds, c)
    if err is not None:
        return err
    if gate.compare:
        v = evaluate_compare(gate, data, c)
    else:
        d = as_data(data, gate.metric, label=gate.name)
        v = _evaluate_single(gate, d, c)
        counts = request_counts(data)
        if counts is not None and counts.failed and counts_requests(gate):  # the error-rate gate names the causes
            v["note"] = "; ".join(x for x in (v["note"], counts.listed(3)) if x)
        v["note"] = "; ".join(x for x in (v["note"], *getattr(d, "notes", ()), uncensored_note(gate, d)) if x)
    return _finish(gate, v, _fallback_info(gate, thresholds))


def best_of(candidates: Mapping[str, Any], gate: Gate, *, thresholds: Thresholds | None = None,
            confidence: float | None = None) -> tuple[str, Verdict]:
    """The best of ``candidates`` (name -> data, e.g. one acceptance per candidate draft) by point
    estimate in the gate's direction, and its verdict at ``1 - (1 - c) / K`` for K candidates: picking
    the best of K and gating it at c passes a truth on the threshold up to K times as often
    (Bonferroni over the candidates keeps the false pass <= 1 - c)."""
    if not candidates:
        raise ValueError(f"gate {gate.name}: no candidates to choose from")
    c = resolve_confidence(gate, thresholds, confidence)
    k = len(candidates)

    def point(d: Any) -> float:
        x = as_data(d, gate.metric, label=gate.name)
        return x.successes / max(x.trials, 1) if isinstance(x, Proportion) else float(np.mean(x.values))

    pick = (max if gate.direction != "max" else min)(candidates, key=lambda n: point(candidates[n]))
    v = evaluate(gate, candidates[pick], confidence=1 - (1 - c) / k, thresholds=thresholds)
    note = f"best of {k} candidates ({pick}), each at {1 - (1 - c) / k:.4g} confidence (Bonferroni over the {k})"
    return pick, replace(v, note="; ".join(x for x in (v.note, note) if x))


def counts_requests(gate: Gate) -> bool:
    """A gate on the failed fraction itself (``error_rate``): decided like any proportion gate
    (Clopper-Pearson bounds against its max), never an "error" for the failures it measures."""
    m = lookup(gate.metric)
    return m is not None and m.source == REQUESTS and not gate.compare


def _fallback_info(gate: Gate, thresholds: Thresholds | None) -> tuple[Fallback, ...]:
    return tuple(thresholds.fallbacks[f] for f in gate.fallbacks) if thresholds else ()


def request_counts(data: Any) -> RequestCounts | None:
    """The request counts of a run (or of runs already pooled), None for data that is no run."""
    if isinstance(data, RequestCounts):
        return data
    if isinstance(data, RequestRun):
        return data.request_counts()
    if isinstance(data, (Samples, Proportion)):
        return data.requests
    if isinstance(data, (list, tuple)) and data and all(request_counts(p) is not None for p in data):
        return pooled_requests(data)  # a list of runs (one side of an A B A B design, several draws)
    return None


def error_verdict(gate: Gate, data: Any, thresholds: Thresholds | None, c: float) -> Verdict | None:
    """The "error" verdict of ``data`` (a run, pooled :class:`RequestCounts`, or a pair for
    comparisons) when its failed requests exceed the gate's error budget (``max_error_rate``,
    default 0), else None.

    Never a pass on no data: a run where every request failed (or none was sent) is an error,
    whatever the metric; its note lists the causes with counts, the server's reason and the URL.
    A gate on ``error_rate`` itself is decided on the failures (:func:`counts_requests`): an error
    only when no request was sent."""
    allowed = gate.max_error_rate if gate.max_error_rate is not None else (
        thresholds.settings.max_error_rate if thresholds else 0.0)
    parts = data if gate.compare and isinstance(data, (tuple, list)) else (data,)
    for i, part in enumerate(parts):
        counts = request_counts(part)
        if counts is None:
            continue
        failed, total = counts.failed, counts.measured
        if total and (failed / total <= allowed or counts_requests(gate)):
            continue
        which = f"{gate.runs[i]} run: " if gate.compare and i < len(gate.runs) else ""
        note = f"{which}{failed}/{total} requests failed ({counts.listed(3) or 'no request was sent'}); error budget {allowed:.0%}"
        observed, shown = _on_successful(gate, part, c) if not gate.compare else (math.nan, "")
        return Verdict.error(gate, note, confidence=c, requests=counts, observed=observed, unit=shown,
                             fallback_info=_fallback_info(gate, thresholds))
    return None


def _on_successful(gate: Gate, data: Any, c: float) -> tuple[float, str]:
    """The gate's statistic over a run's successful requests and its display unit, (NaN, "") when
    it can't be computed (none succeeded, too few for the statistic)."""
    if isinstance(data, RequestCounts):
        return math.nan, ""
    try:
        d = as_data(data, gate.metric, label=gate.name)
        v = _evaluate_single(gate, replace(d, requests=None) if isinstance(d, Samples) else d, c)  # successes only
    except (SampleError, ValueError, TypeError):
        return math.nan, ""
    observed = float(v["observed"])
    return (observed, str(v["unit"])) if math.isfinite(observed) else (math.nan, "")


def _paired(gate: Gate, x: Any, c: float, base: dict[str, Any]) -> dict[str, Any]:
    """A gate with ``params = { paired = "discordant" }``: per-pair differences in {-1, 0, 1} (e.g. an
    image right with the reference only: +1), bounded exactly on the discordant pairs."""
    if not np.all(np.isin(x, (-1.0, 0.0, 1.0))):
        raise SampleError(f"gate {gate.name}: params.paired = \"discordant\" takes one value per pair in "
                          "{-1, 0, 1} (first right only: 1, second right only: -1)")
    b, d = int(np.count_nonzero(x == 1.0)), int(np.count_nonzero(x == -1.0))
    bnd = stats.paired_difference_bounds(b, d, int(x.size), c)
    note = f"paired: {b} pairs right with the reference only, {d} with the other only, of {x.size}"
    return dict(base, outcome=decide(gate, bnd), observed=bnd.observed, lower=bnd.lower, upper=bnd.upper,
                n=int(x.size), method=bnd.method, note=note)


def _finish(gate: Gate, v: dict[str, Any], fb_info: tuple[Fallback, ...]) -> Verdict:
    band = None
    if gate.bands and math.isfinite(v["observed"]):
        for label, edge in gate.bands:
            if v["observed"] >= edge.base:
                band = label
                break
    return Verdict(
        gate=gate.name,
        phase=gate.phase,
        metric=gate.metric,
        statistic=gate.statistic.text,
        direction=gate.direction,
        threshold=gate.threshold.base if gate.threshold else None,
        baseline=gate.baseline.base if gate.baseline else None,
        fallbacks=gate.fallbacks,
        fallback_info=fb_info,
        compare=gate.compare,
        band=band,
        **v,
    )


def _evaluate_single(gate: Gate, d: Data, c: float) -> dict[str, Any]:
    check_dimension(gate, d)
    st = gate.statistic
    shown = display_unit(gate, d, data_dimension(gate, d))
    base = dict(confidence=c, unit=shown, needed=None, note="", details={})
    thr = gate.threshold.base if gate.threshold is not None else None
    if isinstance(d, Proportion):
        if st.kind == "quantile":
            raise SampleError(f"gate {gate.name}: {st.text} of a proportion makes no sense; use statistic = \"rate\"")
        if d.trials == 0:
            raise SampleError(f"gate {gate.name}: {d.label or gate.metric}: 0 trials, nothing was measured")
        b, note = proportion_bounds(d, c, gate.metric)
        outcome = decide(gate, b)
        needed = None
        if outcome == "inconclusive" and thr is not None and gate.direction is not None:
            deff = stats.design_effect(*d.clusters()) if d.clustered else 1.0
            needed = stats.proportion_needed(d.successes, d.trials, c, gate.direction, thr, deff)
        return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=d.trials,
                    method=b.method, needed=needed, details=dict(d.extra), note=note)
    x = d.values
    n = x.size
    if st.kind == "value":
        if d.denominators is not None:  # a ratio of sums (e.g. tokens over busy seconds), one pair per request
            b = stats.ratio_bounds(x, d.denominators, c, "ratio estimator, cluster-robust t")
            outcome = decide(gate, b)
            note = "" if n >= 2 else "one request: a ratio's bound needs >= 2"
            return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                        method=b.method, note=note, needed=2 if n < 2 and outcome == "inconclusive" else None)
        if n == 1:
            obs = float(x[0])
            if gate.single or gate.direction is None:
                b = stats.Bounds(obs, obs, obs, "single")
                return dict(base, outcome=decide(gate, b), observed=obs, lower=obs, upper=obs, n=1,
                            method="single", note="single measurement: no confidence interval (the gate sets single = true)"
                            if gate.single else "single measurement: no confidence interval")
            return dict(base, outcome="inconclusive", observed=obs, lower=-math.inf, upper=math.inf, n=1,
                        method="none", needed=None,
                        note="one measured number has no confidence bound: repeat the run (the runs' values are "
                             "then gated by their mean) or set single = true on the gate to accept one measurement")
        # several run-level values: repeated runs, gated by their mean
    if st.kind == "mean" and gate.params.get("paired") == "discordant":
        return _paired(gate, x, c, base)
    if st.kind in ("mean", "value"):
        b = stats.mean_bounds(x, c, gate.direction)
        outcome = decide(gate, b)
        needed = None
        if outcome == "inconclusive" and thr is not None:
            needed = stats.mean_needed(x, c, thr)
        note = "mean of repeated runs" if st.kind == "value" else ""
        if b.warning:
            note = f"{note}; {b.warning}" if note else b.warning
        return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                    method=b.method, needed=needed, note=note)
    assert st.q is not None
    over = censored(gate, d)
    note = ""
    if over:  # failed requests within the error budget: over the limit, never dropped
        x = np.concatenate([x, np.full(over, np.inf)])
        n = x.size
        note = f"{over} failed request(s) counted as over the limit (censored: {d.requests.listed(3) if d.requests else ''})"
    b = stats.quantile_bounds(x, st.q, c)
    if gate.direction is None or thr is None:
        outcome, needed = "recorded", None
    else:
        outcome, needed = stats.quantile_decision(x, st.q, c, gate.direction, thr)
    return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                method=b.method, needed=needed, note=note)
