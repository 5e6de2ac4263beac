"""The wording of a verdict, in one place: metrics, thresholds, bounds, baselines, outcomes and
fallback plans, as the terminal table, ``Verdict.summary``, the short test summary, JUnit, Markdown
and HTML say them.

Two layers: functions of plain values (what :class:`~pytest_perfgate.verdicts.verdict.Verdict` calls on its
fields) and, below them, the same texts of a stored verdict (``decisions.json``, what the writers and
the terminal table read), read once into a typed :class:`~.record.VerdictRecord` and used by
attribute. Text taken from a document passes :func:`clean_text`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..config.units import change_text
from .record import VerdictRecord

# the comparison shown between the observed value and the threshold, by (direction, outcome)
OPS = {("max", "pass"): "<", ("max", "fail"): ">", ("min", "pass"): ">", ("min", "fail"): "<"}

NOT_DESCRIBED = "(not described in thresholds.toml)"
NAMES_SHOWN = 10  # a line that names gates names this many, then says how many more (10,006 gates: 69k characters)


def some_names(names: list[str], shown: int = NAMES_SHOWN) -> str:
    """``a, b, c``; beyond ``shown`` names, the first ``shown`` and ``... and 9,996 more``."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])}, ... and {len(names) - shown:,} more"

# proportions count trials; everything else counts samples
TRIAL_METHODS = ("clopper-pearson", "cluster-robust Korn-Graubard")
# the accepted-prefix bound (verdicts/acceptance.py): its n counts draft tokens, its ``needed`` requests
REQUEST_METHODS = ("Fieller skew-corrected t over requests",)


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
    if method.startswith("Welch t over runs"):
        return "runs a side"
    if method == PER_RUN_METHOD:
        return "samples a run"
    return "trials" if method in TRIAL_METHODS else "samples"


def needed_units(method: str, n: int, details: Mapping[str, float] | None = None) -> tuple[str, int]:
    """(what ``needed`` counts, how many of them the verdict has): requests for the accepted-prefix
    bound (its independent units: ``details["requests"]``, the request clusters measured), else
    :func:`counted` and ``n``."""
    if method in REQUEST_METHODS and details and "requests" in details:
        return "requests", int(details["requests"])
    return counted(method), n


PER_RUN_METHOD = "per-run bounds at alpha/2, combined"


def top_up(details: Mapping[str, float] | None, confidence: float | None) -> str:
    """How likely the projected size decides, and the confidence a top-up is decided at so that both
    looks together keep the verdict's error rate (simulated: docs/statistics.md, "Topping up")."""
    out = ""
    chance = (details or {}).get("needed_chance")  # quantile gates: the simulated ones
    if chance is None or not 0 <= chance <= 1:
        return out
    share = "nearly every run" if chance >= 0.995 else f"about {chance:.0%} of runs"  # not "100%": a projection
    out += f"; that many decide {share}"
    if confidence is not None and 0 < confidence < 1:
        out += (f"; decide a topped-up run at {top_up_confidence(confidence):.1%} confidence "
                f"(--perfgate-confidence) to keep {1 - confidence:.0%} over both looks")
    return out


def top_up_confidence(c: float) -> float:
    """The confidence of a top-up's decision: alpha / 5 (simulated: both looks <= alpha)."""
    return 1 - (1 - c) / 5


def inconclusive_label(needed: int | None, n: int, method: str, details: Mapping[str, float] | None = None,
                       bounded: bool = False, confidence: float | None = None) -> str:
    """Why a verdict is inconclusive and what would decide it (``bounded``: the verdict has a bound,
    so a per-run count is a projection, not the size at which a bound first exists)."""
    if needed and method == PER_RUN_METHOD and bounded:
        return (f"need >= {needed:,} samples a run ({max(0, needed - n):,} more in the smaller) if each run's "
                "observed distribution holds")
    if needed and method == PER_RUN_METHOD and details and "independent" in details:  # dependent runs (issue 39)
        return (f"need >= {needed:,} requests a run ({max(0, needed - n):,} more in the smaller) before any bound "
                f"exists: at their dependence the {n:,} requests count as about {details['independent']:.3g} of the "
                f"{int(details.get('independent_needed', 0))} independent samples a bound needs")
    if needed and method == PER_RUN_METHOD:  # a comparison with no bound: the count is known, not projected
        return f"need >= {needed} samples a run ({max(0, needed - n)} more in the smaller) before any bound exists"
    if needed and method.startswith("Welch t over runs"):
        if n < 2:
            return f"need >= {needed} runs a side (interleaved) before any bound exists"
        return f"need >= {needed} runs a side (interleaved; {max(0, needed - n)} more) if the observed run-to-run spread holds"
    if needed:
        what, have = needed_units(method, n, details)
        holds = ("if the observed rate and its spread over requests hold" if what == "requests"
                 else "if the observed rate holds")
        return f"need >= {needed} {what} in all ({max(0, needed - have)} more) {holds}" + top_up(details, confidence)
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
# C1 controls, which are legal XML but parse errors in HTML, and every invisible format character
# (Unicode category Cf: the bidi overrides and isolates such as U+202E, which reorder what a reader
# sees, zero-width characters, the BOM) and the line/paragraph separators U+2028/U+2029. Shown as
# "#xNN" like pytest's junitxml (the terminal's choke point, runtime/redaction.printable, shows the
# same characters as "\u202e").
_FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
           "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
           "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_ILLEGAL = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff{_FORMAT}]")


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"#x{code:02X}" if code <= 0xFF else f"#x{code:04X}"


def clean_text(value: object) -> str:
    """``value`` as text that is legal in XML 1.0 and HTML and encodable as UTF-8.

    ``None`` becomes ``""``; illegal and invisible characters (a control character, a bidi override)
    are replaced by a visible ``#xNN`` marker: every writer's text goes through here.
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


Stored = Mapping[str, Any] | VerdictRecord  # a stored verdict dict, or its record


def shown(v: Stored, key: str) -> str:
    """The formatted value ``display[key]`` of a verdict (``"n/a"`` when there is none)."""
    r = VerdictRecord.read(v)
    disp = r.shown(key)
    if disp is not None:
        return clean_text(disp)
    x = number(getattr(r, key, None))
    if x is None:
        return "n/a"
    return f"{x:.4g} {clean_text(r.unit)}".strip()


def metric_text(v: Stored) -> str:
    """``"ttft p99"`` or ``"ratio of output_throughput mean"``."""
    r = VerdictRecord.read(v)
    return metric_label(clean_text(r.metric), clean_text(r.statistic), clean_text(r.compare) or None)


def threshold_text(v: Stored) -> str:
    """``"max 150 ms"``, ``"min 70%"`` or ``"recorded"`` (no threshold)."""
    r = VerdictRecord.read(v)
    direction = clean_text(r.direction)
    return threshold_label(direction if r.threshold is not None else None, shown(r, "threshold"))


def baseline_text(v: Stored) -> str:
    """The formatted baseline and the relative improvement, or ``""`` when there is no baseline."""
    r = VerdictRecord.read(v)
    if r.baseline is None:
        return ""
    return baseline_label(shown(r, "baseline"), r.observed, r.baseline, clean_text(r.outcome))


def outcome_text(v: Stored) -> str:
    """The verdict outcome with the band and the samples needed when inconclusive."""
    r = VerdictRecord.read(v)
    text = clean_text(r.outcome) or "unknown"
    if r.band:
        text += f" (band: {clean_text(r.band)})"
    if text.startswith("inconclusive") and r.needed:
        what, have = needed_units(clean_text(r.method), r.n or 0, r.details)
        more = f", {max(0, r.needed - have)} more" if r.n is not None else ""
        text += f" (need >= {r.needed} {what}{more})"
    return text


def bounds_cell(v: Stored) -> str:
    """The bounds in a narrow table cell: ``190 ms - 230 ms (n=500)``, ``single``, ``too few samples``."""
    r = VerdictRecord.read(v)
    n = r.n
    if r.outcome == "error":  # failed requests beyond the budget: their count (the causes in the notes)
        failed = sum(r.details.values())
        return f"{int(failed)}/{r.n} failed (see notes)" if r.n and failed else "error (see notes)"
    if r.method == "single":
        return "single"
    if r.lower is None and r.upper is None:
        if "independent" in r.details:  # dependent requests (issue 39): their count is not the point
            return f"too few independent (n={n}, ~{r.details['independent']:.3g} independent)"
        return f"too few samples (n={n})"
    return f"{shown(r, 'lower')} - {shown(r, 'upper')} (n={n})"


def fallback_info(doc: Mapping[str, Any], name: str) -> dict[str, str]:
    """``{"title", "cost", "doc"}`` of a fallback plan (empty strings when it isn't described)."""
    table = doc.get("fallbacks")
    info = table.get(name) if isinstance(table, Mapping) else None
    if not isinstance(info, Mapping):
        info = {}
    return {k: clean_text(info.get(k)) for k in ("title", "cost", "doc")}
