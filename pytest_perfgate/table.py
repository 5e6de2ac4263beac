"""The terminal gate table (plain text, fixed-width columns)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

COLUMNS = ("phase", "gate", "statistic", "observed", "CI", "threshold", "outcome", "fallback")


def _row(v: Mapping[str, Any]) -> tuple[str, ...]:
    d = v.get("display", {})
    what = f"{v['compare']} {v['metric']}" if v.get("compare") else v["metric"]
    thr = f"{v['direction']} {d.get('threshold')}" if v.get("direction") else "recorded"
    if v.get("method") == "single":
        ci = "single"
    elif v.get("lower") is None and v.get("upper") is None:
        ci = f"too few samples (n={v['n']})"
    else:
        ci = f"{d.get('lower')} - {d.get('upper')} (n={v['n']})"
    outcome = v["outcome"].upper() + (f" [{v['band']}]" if v.get("band") else "")
    fb = ",".join(v.get("fallbacks", [])) if v["outcome"] in ("fail", "inconclusive") else ""
    return (v["phase"], v["gate"], f"{what} {v['statistic']}", str(d.get("observed")), ci, thr, outcome, fb)


def gate_table(verdicts: Iterable[Mapping[str, Any]]) -> list[str]:
    rows = [COLUMNS, *(_row(v) for v in verdicts)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    out = []
    for j, r in enumerate(rows):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return out
