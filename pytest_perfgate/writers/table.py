"""The terminal gate table (plain text, fixed-width columns, at most ``width`` columns wide).

When the full table is wider, columns are dropped (phase, then fallback, then CI) and long cells
are shortened; the full table is always in summary.md and report.html.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..runtime.redaction import printable
from ..verdicts.record import VerdictRecord
from ..verdicts.wording import bounds_cell, metric_text, shown, threshold_text

COLUMNS = ("phase", "gate", "statistic", "observed", "CI", "threshold", "outcome", "fallback")
WIDTH = 120
# columns dropped, in this order, until the table fits
DROP_ORDER = ("phase", "fallback", "CI")
MIN_CELL = 12


def _row(d: Mapping[str, Any]) -> tuple[str, ...]:
    v = VerdictRecord.read(d)
    outcome = v.outcome.upper() + (f" [{v.band}]" if v.band else "")
    fb = ",".join(v.fallbacks) if v.outcome in ("fail", "inconclusive") else ""
    gate = v.gate + (f" [{v.label}]" if v.label else "")  # one of several verdicts of a gate
    cells = (v.phase, gate, metric_text(v), shown(v, "observed"), bounds_cell(v), threshold_text(v), outcome, fb)
    return tuple(printable(c) for c in cells)  # names from files and servers: shown escaped on the terminal


def _render(rows: list[tuple[str, ...]], keep: list[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in keep]
    out = []
    for j, r in enumerate(rows):
        out.append("  ".join(r[i].ljust(w) for i, w in zip(keep, widths, strict=True)).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 3)] + "..."


def gate_table(verdicts: Iterable[Mapping[str, Any]], width: int = WIDTH) -> list[str]:
    """The table's lines, none longer than ``width``; error verdicts' causes as notes below it."""
    vs = list(verdicts)
    rows = [COLUMNS, *(_row(v) for v in vs)]
    keep = list(range(len(COLUMNS)))
    lines = _render(rows, keep)
    for col in DROP_ORDER:
        if max(len(ln) for ln in lines) <= width:
            break
        keep.remove(COLUMNS.index(col))
        lines = _render(rows, keep)
    for _ in range(len(COLUMNS)):
        over = max(len(ln) for ln in lines) - width
        if over <= 0:
            break
        # shorten the widest column by the overflow (full text in summary.md / report.html)
        widest = max(keep, key=lambda i: max(len(r[i]) for r in rows))
        limit = max(MIN_CELL, max(len(r[widest]) for r in rows) - over)
        rows = [tuple(_shorten(c, limit) if i == widest else c for i, c in enumerate(r)) for r in rows]
        lines = _render(rows, keep)
    if len(keep) < len(COLUMNS):
        lines.append("(" + ", ".join(c for i, c in enumerate(COLUMNS) if i not in keep)
                     + " left out to fit; full table in summary.md)")
    return [ln[:width] for ln in lines] + error_notes(vs, width)


def error_notes(verdicts: Iterable[Mapping[str, Any]], width: int = WIDTH) -> list[str]:
    """``error ttft_p95, itl_p99: 12/24 requests failed (12 x HTTP 422 from URL: reason)...``: the
    causes of the errored gates, once per distinct note, and why a gate that met its target failed
    (``regressed g: ... REGRESSED beyond ...``); wrapped, never cut (the reason is the point)."""
    import textwrap

    by_note: dict[tuple[str, str], list[str]] = {}
    for v in map(VerdictRecord.read, verdicts):
        regressed = v.details.get("target_met") == 1.0 and v.outcome == "fail"
        if v.outcome in ("error", "invalid") or regressed:  # a fail on its target alone reads in its row
            kind = v.outcome if v.outcome in ("error", "invalid") else "regressed"
            note = printable(v.note.split("; raw verdict")[0])  # invalid: the figure and the fix
            by_note.setdefault((kind, note), []).append(v.gate)
    out: list[str] = []
    for (kind, note), gates in by_note.items():
        out += textwrap.wrap(f"{kind} {', '.join(dict.fromkeys(gates))}: {note}", width, subsequent_indent="    ",
                             break_on_hyphens=False)
    return out
