"""Evaluate a gate on measured data: ``evaluate(gate, data) -> Verdict``.

Plain Python, no pytest. ``data`` is :class:`Samples`, a :class:`Proportion`, a run result (anything
with ``perfgate_data(metric)``), or for comparison gates a pair ``(treatment, reference)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import stats
from .config import Fallback, Gate, Thresholds
from .samples import Data, Proportion, SampleError, Samples, as_data
from .units import DIMENSION_DEFAULT_UNIT, format_value, unit


@dataclass(frozen=True)
class Verdict:
    gate: str
    phase: str
    outcome: str  # "pass" | "fail" | "inconclusive" | "recorded" | "error" (failed requests)
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
        if self.method == "single":
            return "single measurement"
        pct = f"{self.confidence * 100:.4g}%"
        if math.isinf(self.lower) and math.isinf(self.upper):
            return f"{pct} CI: too few samples for any bound, n={self.n}"
        return f"{pct} CI {self.fmt(self.lower)} - {self.fmt(self.upper)}, n={self.n}"

    def summary(self) -> str:
        """One line: ``gate X: ttft p99 = 212 ms (95% CI ..., n=500) > max 150 ms (baseline 320 ms)``."""
        if self.outcome == "error":
            return f"gate {self.gate}: ERROR: {self.metric} not evaluated: {self.note}"
        what = f"{self.compare} of {self.metric}" if self.compare else self.metric
        line = f"gate {self.gate}: {what} {self.statistic} = {self.fmt(self.observed)} ({self.ci_text()})"
        if self.direction is not None and self.threshold is not None:
            op = {("max", "pass"): "<", ("max", "fail"): ">", ("min", "pass"): ">", ("min", "fail"): "<"}
            sym = op.get((self.direction, self.outcome), "vs")
            line += f" {sym} {self.direction} {self.fmt(self.threshold)}"
        if self.baseline is not None:
            imp = self.improvement
            line += f" (baseline {self.fmt(self.baseline)}"
            if imp is None:
                line += ")"
            elif imp >= 0:
                line += f", {imp * 100:.0f}% better)"
            else:
                line += f", {-imp * 100:.0f}% worse)"
        if self.band:
            line += f" [band: {self.band}]"
        if self.outcome == "inconclusive":
            line += " -> inconclusive: " + (
                f"need >= {self.needed} samples in all ({max(0, self.needed - self.n)} more) if the observed rate holds"
                if self.needed
                else "the observed value sits on the threshold; more samples will not decide it"
            )
        if self.floor is not None:
            line += f" [{self.floor_text()}]"
        if self.note:
            line += f" [{self.note}]"
        return line

    def message(self) -> str:
        """The failure text, naming the fallback plans."""
        text = self.summary()
        if self.fallback_info and self.outcome in ("fail", "inconclusive"):
            plans = "; ".join(
                f'{f.name} "{f.title}"' + (f" ({f.doc})" if f.doc else "") + (f" [cost: {f.cost}]" if f.cost else "")
                for f in self.fallback_info
            )
            text += f"\n-> fallback: {plans}"
        return text

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
        return d

    def user_properties(self) -> list[tuple[str, str | float | int]]:
        """(name, value) pairs of strings and numbers, for JUnit properties and xdist."""
        p = f"perfgate.{self.gate}."
        props: list[tuple[str, str | float | int]] = [
            (p + "outcome", self.outcome),
            (p + "metric", f"{self.metric} {self.statistic}"),
            (p + "observed", self.fmt(self.observed)),
            (p + "ci", self.ci_text()),
            (p + "n", self.n),
            (p + "threshold", f"{self.direction} {self.fmt(self.threshold)}" if self.direction else "recorded"),
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


def _display_unit(gate: Gate, data: Data | None, dimension: str) -> str:
    if gate.unit is not None:
        return gate.unit
    for q in (gate.threshold, gate.baseline):
        if q is not None and q.dimension == dimension:
            return q.unit.name
    if dimension in DIMENSION_DEFAULT_UNIT:
        return DIMENSION_DEFAULT_UNIT[dimension]
    return data.unit.name if isinstance(data, Samples) else ""


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
    c = confidence or gate.confidence or (thresholds.settings.confidence if thresholds else 0.95)
    fb_info = tuple(thresholds.fallbacks[f] for f in gate.fallbacks) if thresholds else ()
    err = error_verdict(gate, data, thresholds, c)
    if err is not None:
        return err
    if gate.compare:
        v = _evaluate_compare(gate, data, c)
    else:
        d = as_data(data, gate.metric, label=gate.name)
        v = _evaluate_single(gate, d, c)
    return _finish(gate, v, fb_info)


def _run_errors(data: Any) -> tuple[int, int, Counter[str]] | None:
    """(failed, total, causes) of a run result (anything with ``measured`` and ``errors()``)."""
    errors = getattr(data, "errors", None)
    measured = getattr(data, "measured", None)
    if not callable(errors) or measured is None:
        return None
    causes = errors()
    return sum(causes.values()), len(measured), causes


def error_verdict(gate: Gate, data: Any, thresholds: Thresholds | None, c: float) -> Verdict | None:
    """The "error" verdict of ``data`` (a run result, or a pair for comparisons) when its failed
    requests exceed the gate's error budget (``max_error_rate``, default 0), else None."""
    allowed = gate.max_error_rate if gate.max_error_rate is not None else (
        thresholds.settings.max_error_rate if thresholds else 0.0)
    err = _error_verdict(gate, data, allowed, c)
    if err is None:
        return None
    fb_info = tuple(thresholds.fallbacks[f] for f in gate.fallbacks) if thresholds else ()
    return _finish(gate, err, fb_info)


def _error_verdict(gate: Gate, data: Any, allowed: float, c: float) -> dict[str, Any] | None:
    """An "error" verdict when a run's failed requests exceed the gate's error budget.

    Never a pass on no data: a run where every request failed (or none was sent) is an error,
    whatever the metric; its message lists the causes with counts. Errors trigger no fallback plan
    (they are not a performance result)."""
    parts = data if gate.compare and isinstance(data, (tuple, list)) else (data,)
    for i, part in enumerate(parts):
        got = _run_errors(part)
        if got is None:
            continue
        failed, total, causes = got
        if total and failed / total <= allowed:
            continue
        b = stats.clopper_pearson(failed, total, c) if total else stats.Bounds(math.nan, 0.0, 1.0, "clopper-pearson")
        which = f"{gate.runs[i]} run: " if gate.compare and i < len(gate.runs) else ""
        listed = ", ".join(f"{n} x {cause}" for cause, n in causes.most_common()) or "no request was sent"
        note = f"{which}{failed}/{total} requests failed ({listed}); error budget {allowed:.0%}"
        return dict(outcome="error", observed=b.observed, lower=b.lower, upper=b.upper, n=total, confidence=c,
                    method="clopper-pearson", unit="%", needed=None, note=note, details={k: float(v) for k, v in causes.items()})
    return None


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


def _decide_bounds(gate: Gate, b: stats.Bounds) -> str:
    if gate.direction is None or gate.threshold is None:
        return "recorded"
    thr = gate.threshold.base
    if gate.direction == "max":
        return "pass" if b.upper < thr else "fail" if b.lower > thr else "inconclusive"
    return "pass" if b.lower > thr else "fail" if b.upper < thr else "inconclusive"


def _check_dimension(gate: Gate, d: Data) -> None:
    from .metrics import lookup

    m = lookup(gate.metric)
    dim = d.unit.dimension
    want = m.dimension if m else dim
    if dim != want and not (want == "fraction" and dim == "number"):
        raise SampleError(
            f"gate {gate.name}: {gate.metric} is measured in {want} but the samples are "
            f"{d.unit.name or 'plain numbers'!r} ({dim})"
        )


def _evaluate_single(gate: Gate, d: Data, c: float) -> dict[str, Any]:
    _check_dimension(gate, d)
    st = gate.statistic
    dim = "fraction" if isinstance(d, Proportion) else d.unit.dimension
    if gate.metric in ("acceptance_rate", "prefix_cache_hit_rate", "error_rate", "fragmentation"):
        dim = "fraction"
    shown = _display_unit(gate, d, dim)
    base = dict(confidence=c, unit=shown, needed=None, note="", details={})
    if isinstance(d, Proportion):
        if st.kind == "quantile":
            raise SampleError(f"gate {gate.name}: {st.text} of a proportion makes no sense; use statistic = \"rate\"")
        if d.trials == 0:
            raise SampleError(f"gate {gate.name}: {d.label or gate.metric}: 0 trials, nothing was measured")
        b = stats.clopper_pearson(d.successes, d.trials, c)
        outcome = _decide_bounds(gate, b)
        needed = None
        if outcome == "inconclusive" and gate.threshold is not None and gate.direction is not None:
            needed = stats.proportion_needed(d.successes, d.trials, c, gate.direction, gate.threshold.base)
        return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=d.trials,
                    method=b.method, needed=needed, details=dict(d.extra), note=f"{d.successes}/{d.trials}")
    x = d.values
    n = x.size
    if st.kind == "value" or n == 1:
        if d.denominators is not None:
            obs = float(x.sum() / d.denominators.sum())
            if n == 1:
                b = stats.Bounds(obs, obs, obs, "single")
            else:
                rng = np.random.default_rng(stats.seed_for(gate.name))
                draws = stats.resample_stat(x, "value", None, rng, stats.BOOTSTRAP_RESAMPLES, d.denominators)
                b = stats.bootstrap_bounds(lambda a: a, obs, c, draws, "bootstrap")
        elif n == 1:
            obs = float(x[0])
            b = stats.Bounds(obs, obs, obs, "single")
        else:
            raise SampleError(
                f"gate {gate.name}: statistic {st.text!r} takes one measured value but got {n} samples; "
                "use mean or a percentile (pNN)"
            )
        outcome = _decide_bounds(gate, b)
        note = "single measurement: no confidence interval" if b.method == "single" else ""
        return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                    method=b.method, note=note)
    if st.kind == "mean":
        b = stats.mean_bounds(x, c)
        outcome = _decide_bounds(gate, b)
        needed = None
        if outcome == "inconclusive" and gate.threshold is not None:
            needed = stats.mean_needed(x, c, gate.threshold.base)
        return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                    method=b.method, needed=needed)
    assert st.q is not None
    b = stats.quantile_bounds(x, st.q, c)
    if gate.direction is None or gate.threshold is None:
        outcome, needed = "recorded", None
    else:
        outcome, needed = stats.quantile_decision(x, st.q, c, gate.direction, gate.threshold.base)
    return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                method=b.method, needed=needed)


def _point(st_kind: str, q: float | None, d: Data) -> float:
    if isinstance(d, Proportion):
        return d.successes / d.trials if d.trials else math.nan
    if d.denominators is not None:
        return float(d.values.sum() / d.denominators.sum())
    if st_kind == "quantile" and q is not None:
        return float(np.quantile(d.values, q, method="inverted_cdf"))
    return float(np.mean(d.values))


def _replicates(st_kind: str, q: float | None, d: Data, rng: np.random.Generator, b: int) -> np.ndarray:
    if isinstance(d, Proportion):
        return rng.binomial(d.trials, d.successes / d.trials, size=b) / d.trials
    if d.n == 1 and d.denominators is None:
        return np.full(b, float(d.values[0]))
    return stats.resample_stat(d.values, st_kind, q, rng, b, d.denominators)


def _combine(kind: str, a: Any, b: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "ratio":
            return a / b
        if kind == "difference":
            return a - b
        return 1 - a / b  # reduction


def _evaluate_compare(gate: Gate, data: Any, c: float) -> dict[str, Any]:
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)) or len(data) != 2:
        runs = " and ".join(gate.runs) if gate.runs else "treatment and reference"
        raise SampleError(f"gate {gate.name} compares two runs ({runs}): pass a pair (treatment, reference)")
    a = as_data(data[0], gate.metric, label=f"{gate.name}[{gate.runs[0] if gate.runs else 0}]")
    r = as_data(data[1], gate.metric, label=f"{gate.name}[{gate.runs[1] if gate.runs else 1}]")
    for d in (a, r):
        _check_dimension(gate, d)
    st = gate.statistic
    if st.kind == "value":
        for d in (a, r):
            if isinstance(d, Samples) and d.n > 1 and d.denominators is None:
                raise SampleError(f"gate {gate.name}: statistic 'value' needs one value per run, got {d.n} samples")
    pa, pr = _point(st.kind, st.q, a), _point(st.kind, st.q, r)
    obs = float(_combine(gate.compare or "ratio", pa, pr))
    single = all(
        isinstance(d, Samples) and d.n == 1 and d.denominators is None for d in (a, r)
    )
    if single:
        b = stats.Bounds(obs, obs, obs, "single")
    else:
        rng = np.random.default_rng(stats.seed_for(gate.name))
        ra = _replicates(st.kind, st.q, a, rng, stats.BOOTSTRAP_RESAMPLES)
        rr = _replicates(st.kind, st.q, r, rng, stats.BOOTSTRAP_RESAMPLES)
        b = stats.bootstrap_bounds(lambda x: x, obs, c, np.asarray(_combine(gate.compare or "ratio", ra, rr), dtype=float))
    outcome = _decide_bounds(gate, b)
    dim = "time" if gate.compare == "difference" and isinstance(a, Samples) else "number"
    if gate.compare == "difference" and isinstance(a, Samples):
        dim = a.unit.dimension
    elif gate.compare in ("ratio", "reduction") and gate.threshold is not None:
        dim = gate.threshold.dimension
    shown = _display_unit(gate, a if gate.compare == "difference" else None, dim)
    u_a = a.unit if isinstance(a, Samples) else unit("%")
    details = {"treatment": pa, "reference": pr}
    n = min(_n(a), _n(r))
    note = "single measurement per run: no confidence interval" if single else (
        f"{gate.runs[0] if gate.runs else 'treatment'} {format_value(pa, u_a)} vs "
        f"{gate.runs[1] if gate.runs else 'reference'} {format_value(pr, u_a)}"
    )
    return dict(outcome=outcome, observed=obs, lower=b.lower, upper=b.upper, n=n, confidence=c,
                method=b.method if not single else "single", unit=shown, needed=None, note=note, details=details)


def _n(d: Data) -> int:
    return d.trials if isinstance(d, Proportion) else d.n

