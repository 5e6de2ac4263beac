"""``summary.md``: the decision document as GitHub-flavoured Markdown (for ``$GITHUB_STEP_SUMMARY``).

Per phase: a heading with the outcome (PASSED / FAILED / FALLBACK / INCONCLUSIVE / NOT RUN), the gate
table, the triggered fallback plans and the fallback tests; at the end, notes on the statistics.

Text from the document is escaped: Markdown punctuation and ``<``/``&`` are backslash-escaped (so no
HTML or links can be injected), ``|`` cannot split a table cell and newlines cannot end one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..verdicts.wording import (
    baseline_text,
    clean_text,
    fallback_info,
    fallback_line,
    metric_text,
    outcome_text,
    shown,
    threshold_text,
)
from . import (
    BOUNDS_NOTE,
    METHOD_NOTES,
    RenderedWriter,
    case_names,
    inconclusive_note,
    is_url,
    phase_label,
    phase_meta,
    select_phases,
    strings,
    verdict_values,
    verdicts_of,
)

_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~!#])")
_NEWLINES = re.compile(r"\r\n|\r|\n")


def md(value: object, *, cell: bool = False) -> str:
    """Escape ``value`` for inline Markdown; ``cell=True`` keeps line breaks as ``<br>`` in a table cell."""
    text = _SPECIAL.sub(r"\\\1", clean_text(value))
    return _NEWLINES.sub("<br>" if cell else " ", text)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c if c else "-" for c in cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [_row(header), "|" + "|".join("---" for _ in header) + "|", *(_row(r) for r in rows)]


def _doc_link(doc: str) -> str:
    return f"<{doc}>" if is_url(doc) else md(doc)


def _meta(entry: Mapping[str, Any]) -> list[str]:
    """The phase's run, commit, time, thresholds file, confidence and dependencies."""
    meta = phase_meta(entry, code=md, plain=md, thresholds_file=True)
    return [" · ".join(meta), ""] if meta else []


def _gates(entry: Mapping[str, Any], inconclusive: str) -> list[str]:
    """The gate table (failing gates first) and the summaries of the gates that did not pass."""
    out: list[str] = []
    vs = verdicts_of(entry)
    if vs:
        rows = []
        order = {"fail": 0, "error": 1, "invalid": 1, "inconclusive": 2, "pass": 3, "recorded": 4}
        named = sorted(zip(case_names(vs), vs, strict=True), key=lambda nv: order.get(nv[1].outcome, 1))
        for name, v in named:  # failing gates first
            fbs = [clean_text(f) for f in v.fallbacks]
            failed = v.outcome == "fail"
            fb = ", ".join(md(f) + (" (triggered)" if failed else "") for f in fbs)
            rows.append([
                md(name, cell=True),
                md(metric_text(v), cell=True),
                md(shown(v, "observed"), cell=True),
                md(v.ci, cell=True),
                md(threshold_text(v), cell=True),
                md(baseline_text(v), cell=True),
                md(outcome_text(v), cell=True),
                fb,
            ])
        out += _table(["gate", "metric", "observed", "CI", "threshold", "baseline", "outcome", "fallback"], rows)
        out.append("")
        notes = [(name, v) for name, v in named if v.outcome not in ("pass", "recorded")]
        if notes:
            out += [f"- {md(v.summary or name)}" for name, v in notes]
            out.append("")
        if inconclusive != "fail" and any(v.outcome == "inconclusive" for v in vs):
            out += ["Inconclusive gates are reported as warnings in this run, not as failures.", ""]
    else:
        out += ["No gate of this phase was checked in this run.", ""]
    missing = strings(entry.get("not_evaluated"))
    if missing:
        out += ["Not evaluated in this run: " + ", ".join(md(g) for g in missing), ""]
    return out


def _bold(text: str) -> str:
    return f"**{md(text)}**"


def _phase(doc: Mapping[str, Any], phase: str, entry: Mapping[str, Any], inconclusive: str) -> list[str]:
    title = clean_text(entry.get("title"))
    head = f"## Phase {md(phase)}" + (f": {md(title)}" if title else "") + f" - {md(phase_label(entry.get('outcome')))}"
    out = [head, "", *_meta(entry), *_gates(entry, inconclusive)]
    triggered = strings(entry.get("triggered_fallbacks"))
    if triggered:
        out += ["### Triggered fallbacks", ""]
        out += ["- " + fallback_line(name, fallback_info(doc, name), strong=_bold, plain=md, link=_doc_link)
                for name in triggered]
        out.append("")

    fts = [ft for ft in entry.get("fallback_tests") or [] if isinstance(ft, Mapping)]
    if fts:
        out += ["### Fallback tests", ""]
        out += _table(
            ["test", "fallback", "outcome", "reason"],
            [[md(ft.get(k), cell=True) for k in ("test", "fallback", "outcome", "reason")] for ft in fts],
        )
        out.append("")
    return out


def render(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail") -> str:
    """``summary.md`` as text."""
    selected = select_phases(doc, phases)
    out = ["# Performance gates", ""]
    if doc.get("updated"):
        out += [f"Decision record updated {md(doc.get('updated'))}.", ""]
    if not selected:
        out += ["No phase results recorded.", ""]
        return "\n".join(out)
    rows = []
    for phase, entry in selected:
        vs = verdicts_of(entry)
        counts = {k: sum(1 for v in vs if v.outcome == k) for k in ("pass", "fail", "error", "invalid", "inconclusive", "recorded")}
        gates = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "none checked"
        rows.append([md(phase, cell=True), md(entry.get("title"), cell=True), md(phase_label(entry.get("outcome")), cell=True), gates])
    out += _table(["phase", "title", "outcome", "gates"], rows)
    out.append("")
    for phase, entry in selected:
        out += _phase(doc, phase, entry, inconclusive)
    out += ["### Notes on the statistics", "", f"- {BOUNDS_NOTE}"]
    for m in verdict_values(selected, "method"):
        out.append(f"- {md(m)}: {METHOD_NOTES[m]}" if m in METHOD_NOTES else f"- {md(m)}")
    out += [f"- {md(inconclusive_note(inconclusive))}", ""]
    return "\n".join(out)


class MarkdownWriter(RenderedWriter):
    """Writes ``summary.md``."""

    name = "markdown"
    filename = "summary.md"
    render = staticmethod(render)
