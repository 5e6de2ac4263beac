"""A verdict for the person reading a merge check: a few short lines, the outcome first.

Like pytest's own report (the outcome word, then the one comparison that failed), MLPerf LoadGen's
summary (``Result is : INVALID``, then each deciding condition on its own line) and ``vllm bench
serve``'s table (the statistic and the metric named together, the value with its unit)::

    FAILED long_context_ttft: ttft p99 1459 ms > max 150 ms (n=4, 99.7% sure it is above)
    infeasible on this hardware: the floor is 792 ms (max 150 ms is 0.189x it)

then the fallback line (:meth:`Verdict.message`). The bounds, the sequential plan, warm-ups, the
baseline and the notes stay in :meth:`Verdict.summary` (summary.md, report.html, gates.xml, ``-v``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from . import wording as text

if TYPE_CHECKING:
    from .verdict import Verdict

WORD = {"pass": "PASSED", "fail": "FAILED", "error": "ERROR", "inconclusive": "INCONCLUSIVE", "recorded": "RECORDED"}


def percent(c: float) -> str:
    """``0.9971`` -> ``"99.7%"``, ``0.95`` -> ``"95%"``."""
    return f"{c * 100:.3g}%"


def _side(v: Verdict) -> str:
    """Where the data put the statistic, in words: ``above`` / ``below`` the threshold."""
    beyond = v.outcome == "fail" and not v.target_met
    return "above" if (v.direction == "max") == beyond else "below"


def _count(v: Verdict) -> str:
    what = text.counted(v.method)
    return f"n={v.n:,}" + ("" if what == "samples" else f" {what}")


def _sure(v: Verdict) -> str:
    """``99.7% sure it is above``; an inconclusive verdict says what would decide it."""
    if v.method == "single":
        return "a single measurement, no bounds"
    if v.outcome == "inconclusive":
        bounded = math.isfinite(v.lower) or math.isfinite(v.upper)
        return "not sure either way: " + text.inconclusive_label(v.needed, v.n, v.method, v.details, bounded=bounded)
    if v.outcome not in ("pass", "fail") or v.direction is None or v.threshold is None or not math.isfinite(v.confidence):
        return ""  # a recorded gate has no side; an outcome of another kind claims none
    return f"{percent(v.confidence)} sure it is {_side(v)}"


def first_line(v: Verdict) -> str:
    """``FAILED g: ttft p99 1459 ms > max 150 ms (n=4, 99.7% sure it is above)``: the outcome, the
    metric and statistic, observed vs the threshold with units, n, and how sure in plain words."""
    word = WORD.get(v.outcome, v.outcome.upper())
    what = text.metric_label(v.metric, v.statistic, v.compare)
    if v.outcome == "error":
        return f"{word} {v.gate}: {what} not evaluated: {v.note}"  # the cause is the point: never cut
    against = ""
    if v.direction is not None and v.threshold is not None:
        against = f"{v.fmt(v.observed)} {text.op(v.direction, v.outcome, v.target_met)} {v.direction} {v.fmt(v.threshold)}"
    if v.target_met and "baseline_change" in v.details:  # failed on a regression against a baseline run
        return (f"{word} {v.gate}: {what} {v.details['baseline_change'] * 100:+.0f}% vs the baseline run, beyond its "
                f"{v.details.get('baseline_tolerance', 0.0) * 100:.0f}% tolerance ({_count(v)}; target met: {against})")
    line = f"{word} {v.gate}: {what} {against or v.fmt(v.observed)}"
    said = ", ".join(x for x in (_count(v), _sure(v)) if x)
    line += f" ({said}" + (f"; band: {v.band})" if v.band else ")")
    return line


def floor_line(v: Verdict) -> str:
    """``infeasible on this hardware: the floor is 792 ms (max 150 ms is 0.189x it)`` when the
    physical floor (a ceiling, for a rate) alone decides the failure, else ``""``."""
    if v.outcome != "fail" or v.target_met or v.floor is None or v.floor_multiple is None or v.floor_multiple >= 1:
        return ""
    kind = v.floor_kind or "floor"
    thr = f"{v.direction} {v.fmt(v.threshold)}" if v.direction and v.threshold is not None else "the threshold"
    return f"infeasible on this hardware: the {kind} is {v.fmt(v.floor)} ({thr} is {v.floor_multiple:.3g}x it)"


def error_line(v: Verdict) -> str:
    """What an error verdict still measured: ``ttft p99 of the requests that succeeded: 131 ms (not gated)``."""
    if v.outcome != "error" or not math.isfinite(v.observed):
        return ""
    return f"{text.metric_label(v.metric, v.statistic)} of the requests that succeeded: {v.fmt(v.observed)} (not gated)"


def review_lines(v: Verdict) -> list[str]:
    """The reviewer's lines of ``v`` (without the fallback line)."""
    return [x for x in (first_line(v), floor_line(v), error_line(v)) if x]
