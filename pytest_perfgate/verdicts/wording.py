"""The wording of a verdict, in one place: metrics, thresholds, bounds, baselines, outcomes and
fallback plans, as the terminal table, ``Verdict.summary``, the short test summary, JUnit, Markdown
and HTML say them.

Two layers: functions of plain values (what :class:`~pytest_perfgate.verdicts.verdict.Verdict` calls on its
fields) and, below them, the same texts read from a stored verdict dict (``decisions.json``, what
the writers and the terminal table read). Text taken from a document passes :func:`clean_text`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..config.units import change_text

# the comparison shown between the observed value and the threshold, by (direction, outcome)
OPS = {("max", "pass"): "<", ("max", "fail"): ">", ("min", "pass"): ">", ("min", "fail"): "<"}

NOT_DESCRIBED = "(not described in thresholds.toml)"

# proportions count trials; everything else counts samples
TRIAL_METHODS = ("clopper-pearson", "cluster-robust Korn-Graubard")


# ---------------------------------------------------------------- from plain values


def metric_label(metric: str, statistic: str = "", compare: str | None = None) -> str:
    """``"ttft p99"``, ``"ratio of output_throughput mean"`` (``statistic`` "": the metric alone)."""
    what = f"{compare} of {metric}" if compare else metric
    return f"{what} {statistic}".strip()


def op(direction: str, outcome: str, target_met: bool = False) -> str:
    """``<`` / ``>`` between observed and threshold (``vs`` when undecided); ``target_met``: the gate
    failed on a baseline regression, not on its target, so the target's side is shown as passed."""
    return OPS.get((direction, "pass" if target_met else outcome), "vs")


def threshold_label(direction: str | None, shown: str) -> str:
    """``"max 150 ms"``, or ``"recorded"`` for a gate without a threshold."""
    return f"{direction} {shown}" if direction else "recorded"


def change_label(observed: float | None, baseline: float | None, outcome: str) -> str | None:
    """``"34% lower"``: the change vs the baseline (None for an error verdict or without numbers)."""
    if observed is None or baseline is None or outcome == "error":
        return None
    return change_text(observed, baseline)


def baseline_label(shown: str, observed: float | None, baseline: float | None, outcome: str) -> str:
    """``"320 ms (34% lower)"``: the baseline and the change vs it."""
    change = change_label(observed, baseline, outcome)
    return shown + (f" ({change})" if change else "")


def ci_label(method: str, confidence: float, lower: str, upper: str, n: int, unbounded: bool) -> str:
    """The bounds: ``one-sided 95% bounds 190 ms - 230 ms, n=500``."""
    if method == "single":
        return "single measurement"
    pct = f"{confidence * 100:.4g}%"
    if unbounded:
        return f"one-sided {pct} bounds: too few samples for any bound, n={n}"
    # two one-sided bounds (each at c), not a two-sided c interval: the label says so
    return f"one-sided {pct} bounds {lower} - {upper}, n={n}"


def counted(method: str) -> str:
    """What ``n`` counts for a method: ``"trials"`` or ``"samples"``."""
    return "trials" if method in TRIAL_METHODS else "samples"


PER_RUN_METHOD = "per-run bounds at alpha/2, combined"


def inconclusive_label(needed: int | None, n: int, method: str) -> str:
    """Why a verdict is inconclusive and what would decide it."""
    if needed and method == PER_RUN_METHOD:  # a comparison with no bound: the count is known, not projected
        return f"need >= {needed} samples a run ({max(0, needed - n)} more in the smaller) before any bound exists"
    if needed and method.startswith("Welch t over runs"):
        return f"need >= {needed} runs a side (interleaved) before any bound exists"
    if needed:
        return (f"need >= {needed} {counted(method)} in all ({max(0, needed - n)} more) "
                "if the observed rate holds")
    return "the bounds straddle the threshold; these data do not predict how many more samples would decide it"


def fallback_line(name: str, info: Mapping[str, str], *, strong: Callable[[str], str] = str,
                  plain: Callable[[str], str] = str, link: Callable[[str], str] = str) -> str:
    """One fallback plan: ``name "title" (doc) [cost: ...]`` from ``info`` (``title``, ``doc``,
    ``cost``); ``strong``/``plain``/``link`` mark up the name, the texts and the doc reference
    (escaping for Markdown or HTML)."""
    title, doc, cost = info.get("title", ""), info.get("doc", ""), info.get("cost", "")
    line = strong(name)
    if title:
        line += f' "{plain(title)}"'
    if doc:
        line += f" ({link(doc)})"
    if cost:
        line += f" [cost: {plain(cost)}]"
    if not (title or doc or cost):
        line += f" {NOT_DESCRIBED}"
    return line


class Plan(Protocol):
    """A fallback plan as thresholds.toml describes it (``config.Fallback``)."""

    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def doc(self) -> str: ...
    @property
    def cost(self) -> str: ...


def plan_line(fb: Plan) -> str:
    """:func:`fallback_line` of a plan from the thresholds, as plain text."""
    return fallback_line(fb.name, {"title": fb.title, "doc": fb.doc, "cost": fb.cost})


def no_fallback(gate: str) -> str:
    return f"none: [gates.{gate}] names no fallback plan (add fallback = [...])"


# ---------------------------------------------------------------- from a stored verdict dict

# Not allowed in XML 1.0 (C0 controls but tab/newline/CR, lone surrogates, U+FFFE/U+FFFF), plus the
# C1 controls, which are legal XML but parse errors in HTML. Shown as "#xNN" like pytest's junitxml.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"#x{code:02X}" if code <= 0xFF else f"#x{code:04X}"


def clean_text(value: object) -> str:
    """``value`` as text that is legal in XML 1.0 and HTML and encodable as UTF-8.

    ``None`` becomes ``""``; illegal characters are replaced by a visible ``#xNN`` marker.
    """
    if value is None:
        return ""
    return _ILLEGAL.sub(_visible, value if isinstance(value, str) else str(value))


def number(value: object) -> float | None:
    """``value`` as a finite float, else ``None`` (booleans and strings are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def shown(v: Mapping[str, Any], key: str) -> str:
    """The formatted value ``display[key]`` of a verdict (``"n/a"`` when there is none)."""
    disp = v.get("display")
    if isinstance(disp, Mapping) and isinstance(disp.get(key), str):
        return clean_text(disp[key])
    x = number(v.get(key))
    if x is None:
        return "n/a"
    u = clean_text(v.get("unit"))
    return f"{x:.4g} {u}".strip()


def metric_text(v: Mapping[str, Any]) -> str:
    """``"ttft p99"`` or ``"ratio of output_throughput mean"``."""
    compare = clean_text(v.get("compare")) or None
    return metric_label(clean_text(v.get("metric")), clean_text(v.get("statistic")), compare)


def threshold_text(v: Mapping[str, Any]) -> str:
    """``"max 150 ms"``, ``"min 70%"`` or ``"recorded"`` (no threshold)."""
    direction = clean_text(v.get("direction"))
    return threshold_label(direction if v.get("threshold") is not None else None, shown(v, "threshold"))


def baseline_text(v: Mapping[str, Any]) -> str:
    """The formatted baseline and the relative improvement, or ``""`` when there is no baseline."""
    if v.get("baseline") is None:
        return ""
    return baseline_label(shown(v, "baseline"), number(v.get("observed")), number(v.get("baseline")),
                          clean_text(v.get("outcome")))


def outcome_text(v: Mapping[str, Any]) -> str:
    """The verdict outcome with the band and the samples needed when inconclusive."""
    text = clean_text(v.get("outcome")) or "unknown"
    if v.get("band"):
        text += f" (band: {clean_text(v.get('band'))})"
    needed = number(v.get("needed"))
    n = number(v.get("n"))
    if text.startswith("inconclusive") and needed:
        more = f", {max(0, int(needed) - int(n))} more" if n is not None else ""
        text += f" (need >= {int(needed)} {counted(clean_text(v.get('method')))}{more})"
    return text


def bounds_cell(v: Mapping[str, Any]) -> str:
    """The bounds in a narrow table cell: ``190 ms - 230 ms (n=500)``, ``single``, ``too few samples``."""
    if v.get("outcome") == "error":  # failed requests beyond the budget: their count (the causes in the notes)
        n, details = number(v.get("n")), v.get("details")
        failed = sum(x for x in details.values() if isinstance(x, (int, float))) if isinstance(details, Mapping) else 0
        return f"{int(failed)}/{int(n)} failed (see notes)" if n and failed else "error (see notes)"
    if v.get("method") == "single":
        return "single"
    if v.get("lower") is None and v.get("upper") is None:
        return f"too few samples (n={v.get('n')})"
    return f"{shown(v, 'lower')} - {shown(v, 'upper')} (n={v.get('n')})"


def fallback_info(doc: Mapping[str, Any], name: str) -> dict[str, str]:
    """``{"title", "cost", "doc"}`` of a fallback plan (empty strings when it isn't described)."""
    table = doc.get("fallbacks")
    info = table.get(name) if isinstance(table, Mapping) else None
    if not isinstance(info, Mapping):
        info = {}
    return {k: clean_text(info.get(k)) for k in ("title", "cost", "doc")}
