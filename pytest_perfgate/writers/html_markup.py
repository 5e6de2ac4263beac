"""Markup shared by the pages of ``report.html``: escaping, the CSS classes of outcomes (from fixed
tables, never from the data), anchors, failing-first ordering and the small interval sketch.

Every piece of text taken from the document goes through :func:`_e` (``html.escape`` after
:func:`~pytest_perfgate.verdicts.wording.clean_text`); SVG coordinates are computed floats.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from typing import Any

from ..verdicts.record import VerdictRecord
from ..verdicts.wording import clean_text, metric_text
from . import case_names, is_url

PHASE_CLASS = {"passed": "ok", "failed": "bad", "fallback": "fb", "inconclusive": "warn", "not run": "none"}
VERDICT_CLASS = {"pass": "ok", "fail": "bad", "invalid": "bad", "inconclusive": "warn", "recorded": "none"}
FT_CLASS = {"passed": "ok", "failed": "bad", "skipped": "none"}
_COLOR = {"ok": "#1a7f37", "bad": "#cf222e", "fb": "#bc4c00", "warn": "#9a6700", "none": "#57606a"}
_ORDER = {"fail": 0, "error": 1, "invalid": 1, "inconclusive": 2, "pass": 3, "recorded": 4}


def _e(value: object) -> str:
    """Data as HTML text or attribute value: XML-illegal characters made visible, then escaped."""
    return html.escape(clean_text(value), quote=True)


def _slug(name: str, index: int) -> str:
    return f"phase-{index}-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)[:60]


def _gate_id(phase_index: int, case: str) -> str:
    return f"gate-{phase_index}-" + re.sub(r"[^A-Za-z0-9_-]", "-", case)[:60]


def _f(x: float) -> str:
    return f"{x:.1f}"


def _failing_first(vs: list[VerdictRecord]) -> list[tuple[str, VerdictRecord]]:
    named = list(zip(case_names(vs), vs, strict=True))
    return sorted(named, key=lambda nv: _ORDER.get(nv[1].outcome, 1))


# ---------------------------------------------------------------- interval plot

_W, _H, _PAD = 220.0, 26.0, 10.0


def interval_svg(d: Mapping[str, Any] | VerdictRecord) -> str:
    """An inline SVG: bound bar (arrows at unbounded ends), observed dot, threshold line, baseline tick."""
    v = VerdictRecord.read(d)
    lo, hi, obs, thr, base = v.lower, v.upper, v.observed, v.threshold, v.baseline
    if v.method == "single" and obs is not None:
        lo = lo if lo is not None else obs
        hi = hi if hi is not None else obs
    values = [x for x in (lo, hi, obs, thr, base) if x is not None]
    if not values:
        return '<span class="summary">no data to plot</span>'
    # work in halves so that spans near the float limit (-1e308 .. 1e308) stay finite
    hmin, hmax = min(values) / 2, max(values) / 2
    half_span = hmax - hmin
    pad = half_span * 0.08 if half_span > 0 else (abs(hmin) * 0.1 or 0.5)
    hmin, hmax = hmin - pad, hmax + pad
    left, right = _PAD, _W - _PAD

    def x(val: float) -> float:
        r = (val / 2 - hmin) / (hmax - hmin)
        if not math.isfinite(r):
            r = 0.5
        return left + min(1.0, max(0.0, r)) * (right - left)

    cls = VERDICT_CLASS.get(v.outcome, "none")
    color = _COLOR[cls]
    mid = _H / 2
    label = clean_text(v.summary) or metric_text(v)
    parts = [
        f'<svg class="iv" xmlns="http://www.w3.org/2000/svg" width="{_f(_W)}" height="{_f(_H)}" '
        f'viewBox="0 0 {_f(_W)} {_f(_H)}" role="img" aria-label="{_e(label)}">',
        f"<title>{_e(label)}</title>",
        f'<line x1="{_f(left)}" y1="{_f(mid)}" x2="{_f(right)}" y2="{_f(mid)}" stroke="#d0d7de" stroke-width="1"/>',
    ]
    bar_lo = x(lo) if lo is not None else left
    bar_hi = x(hi) if hi is not None else right
    if lo is not None or hi is not None or obs is not None:
        parts.append(
            f'<rect x="{_f(bar_lo)}" y="{_f(mid - 4)}" width="{_f(max(1.0, bar_hi - bar_lo))}" height="8" '
            f'rx="2" fill="{color}" fill-opacity="0.3" stroke="{color}" stroke-width="1"/>'
        )
        if lo is None:  # unbounded below: arrow to the left edge
            parts.append(
                f'<path d="M{_f(left - 6)} {_f(mid)} L{_f(left)} {_f(mid - 5)} L{_f(left)} {_f(mid + 5)} Z" fill="{color}"/>'
            )
        if hi is None:
            parts.append(
                f'<path d="M{_f(right + 6)} {_f(mid)} L{_f(right)} {_f(mid - 5)} L{_f(right)} {_f(mid + 5)} Z" fill="{color}"/>'
            )
    if base is not None:
        parts.append(
            f'<line x1="{_f(x(base))}" y1="3" x2="{_f(x(base))}" y2="{_f(_H - 3)}" stroke="#8c959f" '
            'stroke-width="1.5" stroke-dasharray="2 2"/>'
        )
    if thr is not None:
        parts.append(
            f'<line x1="{_f(x(thr))}" y1="1" x2="{_f(x(thr))}" y2="{_f(_H - 1)}" stroke="#1f2328" stroke-width="2"/>'
        )
    if obs is not None:
        parts.append(f'<circle cx="{_f(x(obs))}" cy="{_f(mid)}" r="4" fill="{color}" stroke="#fff" stroke-width="1"/>')
    parts.append("</svg>")
    return "".join(parts)



def _doc_link(doc: str) -> str:
    if is_url(doc):
        return f'<a href="{_e(doc)}" rel="noopener noreferrer">{_e(doc)}</a>'
    return f"<code>{_e(doc)}</code>"


def _info_table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows if v)
    return f'<table class="info">{body}</table>' if body else ""

