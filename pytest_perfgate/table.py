"""The terminal gate table (plain text, fixed-width columns, at most ``width`` columns wide).

When the full table is wider, columns are dropped (phase, then fallback, then CI) and long cells
are shortened; the full table is always in summary.md and report.html.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .text import bounds_cell, metric_text, shown, threshold_text

COLUMNS = ("phase", "gate", "statistic", "observed", "CI", "threshold", "outcome", "fallback")
WIDTH = 120
# columns dropped, in this order, until the table fits
DROP_ORDER = ("phase", "fallback", "CI")
MIN_CELL = 12


def _row(v: Mapping[str, Any]) -> tuple[str, ...]:
    outcome = v["outcome"].upper() + (f" [{v['band']}]" if v.get("band") else "")
    fb = ",".join(v.get("fallbacks", [])) if v["outcome"] in ("fail", "inconclusive") else ""
    return (v["phase"], v["gate"], metric_text(v), shown(v, "observed"), bounds_cell(v), threshold_text(v), outcome, fb)


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
    errors = [v for v in vs if v.get("outcome") == "error"]
    for v in errors:
        lines.append(_shorten(f"error {v['gate']}: {v.get('note', '')}", width))
    return [ln[:width] for ln in lines]
