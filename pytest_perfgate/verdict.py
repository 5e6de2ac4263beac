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
from .units import DIMENSION_DEFAULT_UNIT, base_unit, change_text, format_value, note_unit, unit


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
            return f"one-sided {pct} bounds: too few samples for any bound, n={self.n}"
        # two one-sided bounds (each at c), not a two-sided c interval: the label says so
        return f"one-sided {pct} bounds {self.fmt(self.lower)} - {self.fmt(self.upper)}, n={self.n}"

    def summary(self) -> str:
        """One line: ``gate X: ttft p99 = 212 ms (95% CI ..., n=500) > max 150 ms (baseline 320 ms)``."""
        if self.outcome == "error":
            return f"gate {self.gate}: ERROR: {self.metric} not evaluated: {self.note}"
        what = f"{self.compare} of {self.metric}" if self.compare else self.metric
        line = f"gate {self.gate}: {what} {self.statistic} = {self.fmt(self.observed)} ({self.ci_text()})"
        if self.direction is not None and self.threshold is not None:
            op = {("max", "pass"): "<", ("max", "fail"): ">", ("min", "pass"): ">", ("min", "fail"): "<"}
            sym = op.get((self.direction, self.outcome), "vs")
            if self.details.get("target_met") == 1.0:  # failed on a baseline regression, not on the target
                sym = op[(self.direction, "pass")]
            line += f" {sym} {self.direction} {self.fmt(self.threshold)}"
        if self.baseline is not None:
            change = change_text(self.observed, self.baseline) if self.outcome != "error" else None
            line += f" (baseline {self.fmt(self.baseline)}" + (f", {change})" if change else ")")
        if self.band:
            line += f" [band: {self.band}]"
        if self.outcome == "inconclusive":
            what = "trials" if self.method in ("clopper-pearson", "cluster-robust Korn-Graubard") else "samples"
            line += " -> inconclusive: " + (
                f"need >= {self.needed} {what} in all ({max(0, self.needed - self.n)} more) if the observed rate holds"
                if self.needed
                else "the bounds straddle the threshold; these data do not predict how many more samples would decide it"
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
        elif not self.fallbacks and self.outcome == "fail":
            text += f"\n-> fallback: none: [gates.{self.gate}] names no fallback plan (add fallback = [...])"
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
        d["base_unit"] = base_unit(self.unit)  # the unit of the numbers above; "unit" is the display unit
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


def proportion_bounds(d: Proportion, c: float) -> tuple[stats.Bounds, str]:
    """Bounds of a proportion and the note saying what they assume."""
    if d.clustered:
        cs, ct = d.clusters()
        g = int(np.count_nonzero(ct))
        b = stats.cluster_proportion_bounds(cs, ct, c)
        return b, f"{d.successes}/{d.trials} in {g} {d.cluster_unit} clusters (cluster-robust)"
    b = stats.clopper_pearson(d.successes, d.trials, c)
    return b, f"{d.successes}/{d.trials}; assumes independent trials"


def _evaluate_single(gate: Gate, d: Data, c: float) -> dict[str, Any]:
    _check_dimension(gate, d)
    st = gate.statistic
    dim = "fraction" if isinstance(d, Proportion) else d.unit.dimension
    if gate.metric in ("acceptance_rate", "prefix_cache_hit_rate", "error_rate", "fragmentation"):
        dim = "fraction"
    shown = _display_unit(gate, d, dim)
    base = dict(confidence=c, unit=shown, needed=None, note="", details={})
    thr = gate.threshold.base if gate.threshold is not None else None
    if isinstance(d, Proportion):
        if st.kind == "quantile":
            raise SampleError(f"gate {gate.name}: {st.text} of a proportion makes no sense; use statistic = \"rate\"")
        if d.trials == 0:
            raise SampleError(f"gate {gate.name}: {d.label or gate.metric}: 0 trials, nothing was measured")
        b, note = proportion_bounds(d, c)
        outcome = _decide_bounds(gate, b)
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
            outcome = _decide_bounds(gate, b)
            note = "" if n >= 2 else "one request: a ratio's bound needs >= 2"
            return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                        method=b.method, note=note, needed=2 if n < 2 and outcome == "inconclusive" else None)
        if n == 1:
            obs = float(x[0])
            if gate.single or gate.direction is None:
                b = stats.Bounds(obs, obs, obs, "single")
                return dict(base, outcome=_decide_bounds(gate, b), observed=obs, lower=obs, upper=obs, n=1,
                            method="single", note="single measurement: no confidence interval (the gate sets single = true)"
                            if gate.single else "single measurement: no confidence interval")
            return dict(base, outcome="inconclusive", observed=obs, lower=-math.inf, upper=math.inf, n=1,
                        method="none", needed=None,
                        note="one measured number has no confidence bound: repeat the run (the runs' values are "
                             "then gated by their mean) or set single = true on the gate to accept one measurement")
        # several run-level values: repeated runs, gated by their mean
    if st.kind in ("mean", "value"):
        b = stats.mean_bounds(x, c, gate.direction)
        outcome = _decide_bounds(gate, b)
        needed = None
        if outcome == "inconclusive" and thr is not None:
            needed = stats.mean_needed(x, c, thr)
        note = "mean of repeated runs" if st.kind == "value" else ""
        if b.warning:
            note = f"{note}; {b.warning}" if note else b.warning
        return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                    method=b.method, needed=needed, note=note)
    assert st.q is not None
    b = stats.quantile_bounds(x, st.q, c)
    if gate.direction is None or thr is None:
        outcome, needed = "recorded", None
    else:
        outcome, needed = stats.quantile_decision(x, st.q, c, gate.direction, thr)
    return dict(base, outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=n,
                method=b.method, needed=needed)


MEAN_MIN_N = stats.MEAN_MIN_N


def _point(st_kind: str, q: float | None, d: Data) -> float:
    if isinstance(d, Proportion):
        return d.successes / d.trials if d.trials else math.nan
    if d.denominators is not None:
        return float(d.values.sum() / d.denominators.sum())
    if st_kind == "quantile" and q is not None:
        return stats.empirical_quantile(d.values, q)
    return float(np.mean(d.values))


def _combine(kind: str, a: float, b: float) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "ratio":
            return float(np.float64(a) / np.float64(b))
        if kind == "difference":
            return a - b
        return float(1 - np.float64(a) / np.float64(b))  # reduction


def _side_bounds(st_kind: str, q: float | None, d: Data, c: float) -> stats.Bounds:
    """One run's own bounds at confidence ``c`` (both sides)."""
    if isinstance(d, Proportion):
        return proportion_bounds(d, c)[0]
    if d.denominators is not None:
        return stats.ratio_bounds(d.values, d.denominators, c)
    if st_kind == "quantile" and q is not None:
        return stats.quantile_bounds(d.values, q, c)
    if d.n < 2:
        v = float(d.values[0])
        return stats.Bounds(v, -math.inf, math.inf, "none")
    return stats.mean_bounds(d.values, c, None)


def _is_runs(x: Any) -> bool:
    """A list of several runs (or run-level sample sets) of one side: the A B A B design."""
    return isinstance(x, (list, tuple)) and len(x) >= 1 and all(
        isinstance(r, (Samples, Proportion)) or hasattr(r, "perfgate_data") for r in x)


def _run_value(st_kind: str, q: float | None, d: Data) -> float:
    return _point(st_kind, q, d)


def _evaluate_compare(gate: Gate, data: Any, c: float) -> dict[str, Any]:
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)) or len(data) != 2:
        runs = " and ".join(gate.runs) if gate.runs else "treatment and reference"
        raise SampleError(f"gate {gate.name} compares two runs ({runs}): pass a pair (treatment, reference)")
    kind = gate.compare or "ratio"
    st = gate.statistic
    names = (gate.runs[0] if gate.runs else "treatment", gate.runs[1] if gate.runs else "reference")
    if _is_runs(data[0]) and _is_runs(data[1]):
        return _evaluate_compare_runs(gate, data[0], data[1], c, names)
    a = as_data(data[0], gate.metric, label=f"{gate.name}[{names[0]}]")
    r = as_data(data[1], gate.metric, label=f"{gate.name}[{names[1]}]")
    for d in (a, r):
        _check_dimension(gate, d)
    if st.kind == "value":
        for d in (a, r):
            if isinstance(d, Samples) and d.n > 1 and d.denominators is None:
                raise SampleError(f"gate {gate.name}: statistic 'value' needs one value per run, got {d.n} samples "
                                  "(several runs per side: pass two lists of runs)")
    pa, pr = _point(st.kind, st.q, a), _point(st.kind, st.q, r)
    obs = _combine(kind, pa, pr)
    single = all(isinstance(d, Samples) and d.n == 1 and d.denominators is None for d in (a, r))
    u_a = note_unit(a.unit) if isinstance(a, Samples) else unit("%")
    design = f"one run per side: {names[0]} {format_value(pa, u_a)} vs {names[1]} {format_value(pr, u_a)}"
    needed: int | None = None
    if single and (gate.single or gate.direction is None):
        b = stats.Bounds(obs, obs, obs, "single")
        note = "single measurement per run: no confidence interval" + (" (the gate sets single = true)" if gate.single else "")
    elif single:
        b = stats.Bounds(obs, -math.inf, math.inf, "none")
        note = (f"{design}; one number per run has no confidence bound: interleave several runs per side "
                "(A B A B) or set single = true on the gate")
    elif (st.kind == "value" and kind != "difference" and isinstance(a, Samples) and isinstance(r, Samples)
          and a.denominators is not None and r.denominators is not None):
        b = stats.ratio_of_sums_compare(kind, a.values, a.denominators, r.values, r.denominators, c)
        note = (f"{design}; design: requests as the unit ({a.n} vs {r.n}), assumes no run-to-run variance "
                "(interleave runs A B A B to measure it)")
    else:
        c2 = 1 - (1 - c) / 2
        b = stats.combine(kind, _side_bounds(st.kind, st.q, a, c2), _side_bounds(st.kind, st.q, r, c2), obs,
                          "per-run bounds at alpha/2, combined")
        note = f"{design}; design: each run's one-sided bounds at {c2 * 100:.4g}% combined (requests as the unit)"
        if b.warning:
            note += f"; {b.warning}"
    outcome = _decide_bounds(gate, b)
    n = min(_n(a), _n(r))
    if outcome == "inconclusive" and not math.isfinite(b.lower) and not math.isfinite(b.upper):
        note += "; too few samples per run for a bound"
    details = {"treatment": pa, "reference": pr}
    return dict(outcome=outcome, observed=obs, lower=b.lower, upper=b.upper, n=n, confidence=c,
                method=b.method, unit=_compare_unit(gate, a), needed=needed, note=note, details=details)


def _compare_unit(gate: Gate, a: Data) -> str:
    dim = "number"
    if gate.compare == "difference" and isinstance(a, Samples):
        dim = a.unit.dimension
    elif gate.compare in ("ratio", "reduction") and gate.threshold is not None:
        dim = gate.threshold.dimension
    return _display_unit(gate, a if gate.compare == "difference" else None, dim)


def _evaluate_compare_runs(gate: Gate, ra: Sequence[Any], rr: Sequence[Any], c: float, names: tuple[str, str]) -> dict[str, Any]:
    """Several interleaved runs per side (A B A B): each run's statistic is one observation."""
    kind = gate.compare or "ratio"
    st = gate.statistic
    sides = []
    for side, runs in ((names[0], ra), (names[1], rr)):
        ds = [as_data(x, gate.metric, label=f"{gate.name}[{side} run {i}]") for i, x in enumerate(runs)]
        for d in ds:
            _check_dimension(gate, d)
        sides.append(ds)
    va = np.asarray([_run_value(st.kind, st.q, d) for d in sides[0]], dtype=np.float64)
    vb = np.asarray([_run_value(st.kind, st.q, d) for d in sides[1]], dtype=np.float64)
    b = stats.runs_compare(kind, va, vb, c)
    outcome = _decide_bounds(gate, b)
    u_a = note_unit(sides[0][0].unit) if isinstance(sides[0][0], Samples) else unit("%")
    note = (f"design: {va.size} {names[0]} and {vb.size} {names[1]} runs, interleaved, the run as the unit "
            f"({names[0]} mean {format_value(float(va.mean()), u_a)}, {names[1]} mean {format_value(float(vb.mean()), u_a)})")
    if va.size < 2 or vb.size < 2:
        note += "; a bound needs >= 2 runs per side"
    return dict(outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=int(min(va.size, vb.size)),
                confidence=c, method=b.method, unit=_compare_unit(gate, sides[0][0]), needed=None, note=note,
                details={"treatment": float(va.mean()), "reference": float(vb.mean()), "runs": float(va.size + vb.size)})


def _n(d: Data) -> int:
    return d.trials if isinstance(d, Proportion) else d.n

