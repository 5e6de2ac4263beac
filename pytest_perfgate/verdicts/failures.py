"""The exceptions and warnings a gate raises (light: imported at plugin start)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .wording import metric_label, needed_units, op, some_names

if TYPE_CHECKING:
    from .verdict import Verdict


class GateFailure(AssertionError):
    """Raised by a failing check; ``.verdict`` carries the numbers, ``.verdicts`` every failing
    verdict of a ``check_all`` (its message has each one's sentence, not just the first's)."""

    def __init__(self, verdict: Verdict, *others: Verdict) -> None:
        self.verdict = verdict
        self.verdicts = (verdict, *others)
        super().__init__("\n".join(_sentences(self.verdicts, lambda v: v.message())))

    @property
    def brief(self) -> str:
        """The text for the person reading a merge check (the default terminal): per failing gate
        the outcome, observed vs threshold, n and how sure (review.py), its physical floor when that
        decides it, and its fallback plans; ``str(self)`` has the full summaries (``-v``)."""
        from .review import review_lines

        def lines(v: Verdict) -> str:
            return "\n".join(x for x in (*review_lines(v), v.fallback_text()) if x)

        return "\n".join(_sentences(self.verdicts, lines))


def _sentences(verdicts: tuple[Verdict, ...], say: Callable[[Verdict], str]) -> list[str]:
    """Each verdict's text (``say``); errored gates with the same cause (one run's failed requests) once."""
    errors: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.outcome == "error":
            errors.setdefault(v.note, []).append(v)
    out = []
    for v in verdicts:
        group = errors.get(v.note, []) if v.outcome == "error" else [v]
        if len(group) == 1:
            out.append(say(v))
        elif group and group[0] is v:
            out.append(f"gates {some_names([g.gate for g in group])}: ERROR: not evaluated: {v.note}")
    return out


class GateInconclusive(GateFailure):
    """Raised for an inconclusive verdict when ``--perfgate-inconclusive=fail``."""


class PerfgateWarning(UserWarning):
    """An inconclusive verdict under ``--perfgate-inconclusive=warn``."""


def headline(v: Verdict) -> str:
    """One line for the short test summary: the gate, the measured value vs the threshold.

    ``gate long_context_ttft: ttft p99 212 ms > max 150 ms``"""
    if v.outcome == "error":
        return f"gate {v.gate}: error: {v.note.split(';')[0]}"
    if v.outcome == "invalid":  # the client did not keep up: the figure and the fix (load/validity.py)
        return f"gate {v.gate}: invalid: {v.note.split('; raw verdict')[0]}"
    line = f"gate {v.gate}: {metric_label(v.metric, v.statistic, v.compare)} {v.fmt(v.observed)}"
    if v.direction is not None and v.threshold is not None:
        line += f" {op(v.direction, v.outcome, v.target_met)} {v.direction} {v.fmt(v.threshold)}"
    if v.details.get("baseline_regressed") == 1.0 and "baseline_change" in v.details:
        line += (f", {v.details['baseline_change'] * 100:+.0f}% vs baseline"
                 f" (regression tolerance {v.details.get('baseline_tolerance', 0.0) * 100:.0f}%)")
    if v.outcome == "inconclusive":
        what, have = needed_units(v.method, v.n, v.details)
        line += ", inconclusive" + (f" (need {max(0, v.needed - have)} more {what})" if v.needed else "")
    if v.triggered:
        line += f"; fallback: {', '.join(v.triggered)}"
    return line
