"""Verdicts of the memory gates that the generic evaluator can't compute: the max-safe-batch ratio
of the best allocator setting over the default (exact Mann-Whitney bound, :mod:`.compare`).

The fragmentation gate needs nothing special: a :class:`MemoryReport` implements
``perfgate_data("fragmentation")`` under the definition the gate's ``params.definition`` names.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..config import Gate, Thresholds
from ..verdicts.rules import resolve_confidence
from ..verdicts.verdict import Verdict
from .compare import ratio_bound, runs_needed
from .stats import DEFAULT_DEFINITION, MemoryReport, check_definition
from .sweep import SweepResult

METHOD = "hodges-lehmann ratio, exact mann-whitney bound"


def gate_definition(gate: Gate) -> str:
    """The fragmentation definition a gate names in ``params = { definition = "..." }``."""
    d = gate.params.get("definition", DEFAULT_DEFINITION)
    return check_definition(str(d), f"[gates.{gate.name}] params.definition")


def for_gate(report: MemoryReport, gate: Gate) -> MemoryReport:
    """The report seen through the gate's fragmentation definition."""
    return replace(report, definition=gate_definition(gate))


def batch_ratio_verdict(gate: Gate, sweep: SweepResult, *, thresholds: Thresholds | None = None,
                        confidence: float | None = None, reference: str = "default",
                        setting: str | None = None) -> Verdict:
    """Ratio of max safe batches, ``setting`` (default: the sweep's best) over ``reference``.

    When the best is picked from the sweep, its bound is Bonferroni-split over every candidate."""
    c = resolve_confidence(gate, thresholds, confidence)
    if setting is None:
        best = sweep.best(c, reference)
        name, bound, cands = best.setting, best.bound, best.candidates
    else:
        name, cands = setting, 1
        bound = ratio_bound([max(b, 0.5) for b in sweep.batches(setting)], sweep.batches(reference), c)
    thr = gate.threshold.base if gate.threshold is not None else None
    if gate.direction is None or thr is None:
        outcome = "recorded"
    elif gate.direction == "min":
        outcome = "pass" if bound.lower > thr else "fail" if bound.upper < thr else "inconclusive"
    else:
        outcome = "pass" if bound.upper < thr else "fail" if bound.lower > thr else "inconclusive"
    xs, ys = sweep.batches(name), sweep.batches(reference)
    note = (f"{name} ({next(s.describe() for s in sweep.settings if s.name == name)}) max safe batch "
            f"{', '.join(map(str, xs))} vs {reference} {', '.join(map(str, ys))}")
    if cands > 1:
        note += f"; best of {cands} settings, bound Bonferroni-split"
    if not bound.bounded:
        note += f"; too few repeats for any bound: run >= {runs_needed(xs, ys, (1 - c) / cands)} per setting"
    fb = tuple(thresholds.fallbacks[f] for f in gate.fallbacks) if thresholds else ()
    return Verdict(
        gate=gate.name, phase=gate.phase, outcome=outcome, metric=gate.metric, statistic=gate.statistic.text,
        observed=bound.estimate, lower=bound.lower if bound.bounded else -math.inf,
        upper=bound.upper, n=min(len(xs), len(ys)), confidence=c, method=METHOD, unit=gate.unit or "",
        direction=gate.direction, threshold=thr, baseline=gate.baseline.base if gate.baseline else None,
        fallbacks=gate.fallbacks, fallback_info=fb, compare=gate.compare or "ratio", note=note,
        details={"treatment": float(sorted(xs)[len(xs) // 2]), "reference": float(sorted(ys)[len(ys) // 2])},
    )
