"""Comparison gates: a ratio, difference or reduction of one metric between two runs (a treatment
and a reference), one run per side or several interleaved runs per side (A B A B).

``evaluate_compare(gate, (treatment, reference), c)`` returns the fields of a verdict; the
verdict itself is made by :func:`pytest_perfgate.verdicts.verdict.evaluate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import Gate
from ..config.units import format_value, note_unit, unit
from . import bounds as stats
from .rules import check_dimension, decide, display_unit, proportion_bounds
from .samples import Data, MetricSource, Proportion, SampleError, Samples, as_data
from .wording import PER_RUN_METHOD


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
        isinstance(r, (Samples, Proportion, MetricSource)) for r in x)


def evaluate_compare(gate: Gate, data: Any, c: float) -> dict[str, Any]:
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
        check_dimension(gate, d)
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
        cv = _run_cv(gate)
        b = stats.ratio_of_sums_compare(kind, a.values, a.denominators, r.values, r.denominators, c, cv)
        note = (f"{design}; design: requests as the unit ({a.n} vs {r.n}), assumes no run-to-run variance beyond "
                f"a CV of {cv:.0%} a run (params.run_cv, in the bound; interleave runs A B A B to measure it)")
    else:
        c2 = 1 - (1 - c) / 2
        b = stats.combine(kind, _side_bounds(st.kind, st.q, a, c2), _side_bounds(st.kind, st.q, r, c2), obs,
                          PER_RUN_METHOD)
        note = f"{design}; design: each run's one-sided bounds at {c2 * 100:.4g}% combined (requests as the unit)"
        if b.warning:
            note += f"; {b.warning}"
    outcome = decide(gate, b)
    n = min(_n(a), _n(r))
    if outcome == "inconclusive" and not math.isfinite(b.lower) and not math.isfinite(b.upper):
        needed = _bound_size(st.kind, st.q, c) if b.method == PER_RUN_METHOD else None
        note += "; too few samples per run for a bound"
    details = {"treatment": pa, "reference": pr}
    return dict(outcome=outcome, observed=obs, lower=b.lower, upper=b.upper, n=n, confidence=c,
                method=b.method, unit=_compare_unit(gate, a), needed=needed, note=note, details=details)


RUN_CV = 0.05  # the run-to-run CV a one-run-a-side ratio assumes unless the gate says (params.run_cv)


def _run_cv(gate: Gate) -> float:
    raw = gate.params.get("run_cv", RUN_CV)
    if isinstance(raw, str) and raw.strip().endswith("%"):
        raw = float(raw.strip()[:-1]) / 100
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw < 0:
        raise SampleError(f"gate {gate.name}: params.run_cv must be a fraction >= 0 (e.g. 0.05 or \"5%\"), got {raw!r}")
    return float(raw)


def _bound_size(kind: str, q: float | None, c: float) -> int | None:
    """Samples a run needs before both of its one-sided bounds at 1 - alpha/2 exist (a P99 at 95%:
    368, the upper bound's log(alpha/2) / log(0.99)); None when not a quantile (no fixed count)."""
    from ..config.looks import decidable_size

    return decidable_size(kind, q, None, c, "compare")


def _compare_unit(gate: Gate, a: Data) -> str:
    dim = "number"
    if gate.compare == "difference" and isinstance(a, Samples):
        dim = a.unit.dimension
    elif gate.compare in ("ratio", "reduction") and gate.threshold is not None:
        dim = gate.threshold.dimension
    return display_unit(gate, a if gate.compare == "difference" else None, dim)


def _evaluate_compare_runs(gate: Gate, ra: Sequence[Any], rr: Sequence[Any], c: float, names: tuple[str, str]) -> dict[str, Any]:
    """Several interleaved runs per side (A B A B): each run's statistic is one observation."""
    kind = gate.compare or "ratio"
    st = gate.statistic
    sides = []
    for side, runs in ((names[0], ra), (names[1], rr)):
        ds = [as_data(x, gate.metric, label=f"{gate.name}[{side} run {i}]") for i, x in enumerate(runs)]
        for d in ds:
            check_dimension(gate, d)
        sides.append(ds)
    va = np.asarray([_point(st.kind, st.q, d) for d in sides[0]], dtype=np.float64)
    vb = np.asarray([_point(st.kind, st.q, d) for d in sides[1]], dtype=np.float64)
    b = stats.runs_compare(kind, va, vb, c)
    outcome = decide(gate, b)
    u_a = note_unit(sides[0][0].unit) if isinstance(sides[0][0], Samples) else unit("%")
    note = (f"design: {va.size} {names[0]} and {vb.size} {names[1]} runs, interleaved, the run as the unit "
            f"({names[0]} mean {format_value(float(va.mean()), u_a)}, {names[1]} mean {format_value(float(vb.mean()), u_a)})")
    if va.size < 2 or vb.size < 2:
        note += "; a bound needs >= 2 runs per side"
    needed = 2 if (va.size < 2 or vb.size < 2) and outcome == "inconclusive" else None
    return dict(outcome=outcome, observed=b.observed, lower=b.lower, upper=b.upper, n=int(min(va.size, vb.size)),
                confidence=c, method=b.method, unit=_compare_unit(gate, sides[0][0]), needed=needed, note=note,
                details={"treatment": float(va.mean()), "reference": float(vb.mean()), "runs": float(va.size + vb.size)})


def _n(d: Data) -> int:
    return d.trials if isinstance(d, Proportion) else d.n

