"""Comparison gates: a ratio, difference or reduction of one metric between two runs (a treatment
and a reference), one run per side or several interleaved runs per side (A B A B).

``evaluate_compare(gate, (treatment, reference), c)`` returns the :class:`~.methods.Estimate` of a
verdict; the verdict itself is made by :func:`pytest_perfgate.verdicts.verdict.evaluate`. Each side's
point and bounds are its statistic's :class:`~.methods.Method`'s; the combine is the compare kind's
:class:`~.methods.Comparison`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import Gate
from ..config.units import format_value, note_unit, unit
from . import blocked
from . import bounds as stats
from .interleaved import runs_needed
from .methods import Estimate, Method, comparison_for, method_for
from .projection import quantile_runs_needed
from .rules import check_dimension, decide
from .samples import Data, MetricSource, Proportion, SampleError, Samples, as_data
from .wording import PER_RUN_METHOD


def _side(gate: Gate, d: Data) -> Method:
    """The Method of one side of the comparison (the gate's statistic, chosen for the data)."""
    return method_for(gate.statistic.kind, gate=gate.name).select_side(d)


def _point(gate: Gate, d: Data) -> float:
    return _side(gate, d).point(gate.statistic, d)  # type: ignore[arg-type]


def _side_bounds(gate: Gate, d: Data, c: float) -> stats.Bounds:
    """One run's own bounds at confidence ``c`` (both sides)."""
    return _side(gate, d).side_bounds(gate.statistic, d, c)  # type: ignore[arg-type]


def _per_independent(d: Samples, q: float) -> float:
    """Requests of one run that carry one independent request's information at its q-quantile."""
    x = d.ordered()
    return blocked.for_quantile(x, q, d.dependence(), d.label != "itl").per_independent


def _is_runs(x: Any) -> bool:
    """A list of several runs (or run-level sample sets) of one side: the A B A B design."""
    return isinstance(x, (list, tuple)) and len(x) >= 1 and all(
        isinstance(r, (Samples, Proportion, MetricSource)) for r in x)


def evaluate_compare(gate: Gate, data: Any, c: float) -> Estimate:
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)) or len(data) != 2:
        runs = " and ".join(gate.runs) if gate.runs else "treatment and reference"
        raise SampleError(f"gate {gate.name} compares two runs ({runs}): pass a pair (treatment, reference)")
    cmp = comparison_for(gate.compare or "ratio", gate=gate.name)
    method = method_for(gate.statistic.kind, gate=gate.name)
    names = (gate.runs[0] if gate.runs else "treatment", gate.runs[1] if gate.runs else "reference")
    if _is_runs(data[0]) and _is_runs(data[1]):
        return _evaluate_compare_runs(gate, data[0], data[1], c, names)
    a = as_data(data[0], gate.metric, label=f"{gate.name}[{names[0]}]")
    r = as_data(data[1], gate.metric, label=f"{gate.name}[{names[1]}]")
    for d in (a, r):
        check_dimension(gate, d)
    for d in (a, r):
        method.check_compare_side(gate, d)
    est = gate.params.get("estimator")
    if est is not None:  # a two-sample estimator (a feature's Method) evaluates the pair itself
        own = method_for(str(est), gate=gate.name).compare(gate, cmp, a, r, c, cmp.unit(gate, a))
        if own is not None:
            return own
    pa, pr = _point(gate, a), _point(gate, r)
    obs = cmp.combine(pa, pr)
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
    elif (method.pooled_ratio and cmp.on_sums and isinstance(a, Samples) and isinstance(r, Samples)
          and a.denominators is not None and r.denominators is not None):
        cv = _run_cv(gate)
        b = stats.ratio_of_sums_compare(cmp.kind, a.values, a.denominators, r.values, r.denominators, c, cv)
        note = (f"{design}; design: requests as the unit ({a.n} vs {r.n}), assumes no run-to-run variance beyond "
                f"a CV of {cv:.0%} a run (params.run_cv, in the bound; interleave runs A B A B to measure it)")
    else:
        c2 = 1 - (1 - c) / 2
        b = cmp.combine_bounds(_side_bounds(gate, a, c2), _side_bounds(gate, r, c2), obs, PER_RUN_METHOD)
        note = f"{design}; design: each run's one-sided bounds at {c2 * 100:.4g}% combined (requests as the unit)"
        if b.warning:
            note += f"; {b.warning}"
    outcome = decide(gate, b)
    n = min(_n(a), _n(r))
    details = {"treatment": pa, "reference": pr}
    if outcome == "inconclusive" and not math.isfinite(b.lower) and not math.isfinite(b.upper):
        needed = method.decidable_size(gate.statistic.q, None, c, "compare") if b.method == PER_RUN_METHOD else None
        note += "; too few samples per run for a bound"
        if needed is not None and gate.statistic.q is not None and isinstance(a, Samples) and isinstance(r, Samples):
            per = max(_per_independent(a, gate.statistic.q), _per_independent(r, gate.statistic.q))
            if per > 1 and needed * per > n:  # dependent requests: their dependence leaves too few independent ones
                note = note.replace("too few samples per run", "too few independent requests per run")
                note += (f": this run's dependence makes its {n:,} requests worth about {n / per:.3g} independent "
                         f"(about {per:.3g} carry one independent request's information); the {needed} independent "
                         f"samples a run's bound needs take >= {math.ceil(needed * per):,} requests a run at it, "
                         f"{max(0, math.ceil(needed * per) - n):,} more in the smaller (a floor: a longer run "
                         "tends to show more dependence)")
                details.update(independent=round(n / per, 1), independent_needed=float(needed))
                needed = math.ceil(needed * per)
    elif (outcome == "inconclusive" and b.method == PER_RUN_METHOD and gate.statistic.q is not None
          and isinstance(a, Samples) and isinstance(r, Samples)):
        needed = _quantile_needed(gate, cmp, a, r, c2, obs)
        pace = _pair_seconds([data[0]], [data[1]]) / max(1, n)  # seconds of one request a side
        if needed is not None and pace:
            note += (f"; projected cost to decide: {needed:,} samples a run, about {pace * max(0, needed - n):,.0f} s "
                     f"more at the measured {pace:,.2f} s a request pair")
    return Estimate(outcome, obs, b.lower, b.upper, n, c, b.method, cmp.unit(gate, a), needed, note, details)


RUN_CV = 0.05  # the run-to-run CV a one-run-a-side ratio assumes unless the gate says (params.run_cv)


def _run_cv(gate: Gate) -> float:
    raw = gate.params.get("run_cv", RUN_CV)
    if isinstance(raw, str) and raw.strip().endswith("%"):
        raw = float(raw.strip()[:-1]) / 100
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw < 0:
        raise SampleError(f"gate {gate.name}: params.run_cv must be a fraction >= 0 (e.g. 0.05 or \"5%\"), got {raw!r}")
    return float(raw)


def _evaluate_compare_runs(gate: Gate, ra: Sequence[Any], rr: Sequence[Any], c: float, names: tuple[str, str]) -> Estimate:
    """Several interleaved runs per side (A B A B): each run's statistic is one observation."""
    cmp = comparison_for(gate.compare or "ratio", gate=gate.name)
    sides = []
    for side, runs in ((names[0], ra), (names[1], rr)):
        ds = [as_data(x, gate.metric, label=f"{gate.name}[{side} run {i}]") for i, x in enumerate(runs)]
        for d in ds:
            check_dimension(gate, d)
        sides.append(ds)
    va = np.asarray([_point(gate, d) for d in sides[0]], dtype=np.float64)
    vb = np.asarray([_point(gate, d) for d in sides[1]], dtype=np.float64)
    b = stats.runs_compare(cmp.kind, va, vb, c)
    outcome = decide(gate, b)
    u_a = note_unit(sides[0][0].unit) if isinstance(sides[0][0], Samples) else unit("%")
    note = (f"design: {va.size} {names[0]} and {vb.size} {names[1]} runs, interleaved, the run as the unit "
            f"({names[0]} mean {format_value(float(va.mean()), u_a)}, {names[1]} mean {format_value(float(vb.mean()), u_a)})")
    needed: int | None = None
    if va.size < 2 or vb.size < 2:
        note += "; a bound needs >= 2 runs per side"
        needed = 2 if outcome == "inconclusive" else None
    elif outcome == "inconclusive" and gate.threshold is not None:
        needed = runs_needed(cmp.kind, va, vb, c, gate.threshold.base)
        pace = _pair_seconds(ra, rr)
        if needed is not None and pace:
            note += (f"; projected cost to decide: {needed} runs a side ({needed - int(min(va.size, vb.size))} more "
                     f"pairs), about {pace * (needed - min(va.size, vb.size)):,.0f} s of runs at the measured "
                     f"{pace:,.0f} s a pair (engine switches extra)")
    return Estimate(outcome, b.observed, b.lower, b.upper, int(min(va.size, vb.size)), c, b.method,
                    cmp.unit(gate, sides[0][0]), needed, note,
                    {"treatment": float(va.mean()), "reference": float(vb.mean()), "runs": float(va.size + vb.size)})


def _quantile_needed(gate: Gate, cmp: Any, a: Samples, r: Samples, c2: float, obs: float) -> int | None:
    """Samples a run at which the per-run order-statistic bounds would decide (the observed
    distributions standing in for the truth; verdicts/projection.py)."""
    assert gate.statistic.q is not None

    def combine(sa: stats.Bounds, sr: stats.Bounds) -> stats.Bounds:
        return cmp.combine_bounds(sa, sr, obs, PER_RUN_METHOD)  # type: ignore[no-any-return]

    return quantile_runs_needed(a.values, r.values, gate.statistic.q, c2, combine,
                                lambda b: decide(gate, b) != "inconclusive")


def _pair_seconds(ra: Sequence[Any], rr: Sequence[Any]) -> float:
    """Mean seconds of one A run plus one B run, from the runs' own request stamps (0 if not runs)."""
    def secs(r: Any) -> float | None:
        recs = getattr(r, "records", None)
        if not recs:
            return None
        ends = [x.end_ns for x in recs if x.end_ns is not None]
        return float(max(ends) - min(x.sent_ns for x in recs)) / 1e9 if ends else None

    got = [[s for s in map(secs, side) if s is not None] for side in (ra, rr)]
    return float(np.mean(got[0]) + np.mean(got[1])) if got[0] and got[1] else 0.0


def _n(d: Data) -> int:
    return d.trials if isinstance(d, Proportion) else d.n

