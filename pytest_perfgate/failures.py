"""The exceptions and warnings a gate raises (light: imported at plugin start)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .text import metric_label, op

if TYPE_CHECKING:
    from .verdict import Verdict


class GateFailure(AssertionError):
    """Raised by a failing check; ``.verdict`` carries the numbers."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.message())


class GateInconclusive(GateFailure):
    """Raised for an inconclusive verdict when ``--perfgate-inconclusive=fail``."""


class PerfgateWarning(UserWarning):
    """An inconclusive verdict under ``--perfgate-inconclusive=warn``."""


def headline(v: Verdict) -> str:
    """One line for the short test summary: the gate, the measured value vs the threshold.

    ``gate long_context_ttft: ttft p99 212 ms > max 150 ms``"""
    if v.outcome == "error":
        return f"gate {v.gate}: error: {v.note.split(';')[0]}"
    line = f"gate {v.gate}: {metric_label(v.metric, v.statistic, v.compare)} {v.fmt(v.observed)}"
    if v.direction is not None and v.threshold is not None:
        line += f" {op(v.direction, v.outcome, v.target_met)} {v.direction} {v.fmt(v.threshold)}"
    if v.details.get("baseline_regressed") == 1.0 and "baseline_change" in v.details:
        line += (f", {v.details['baseline_change'] * 100:+.0f}% vs baseline"
                 f" (regression tolerance {v.details.get('baseline_tolerance', 0.0) * 100:.0f}%)")
    if v.outcome == "inconclusive":
        line += ", inconclusive" + (f" (need {max(0, v.needed - v.n)} more samples)" if v.needed else "")
    if v.triggered:
        line += f"; fallback: {', '.join(v.triggered)}"
    return line
