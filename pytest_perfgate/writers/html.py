"""``report.html``: one self-contained page (inline CSS and SVG, no script, no external resources).

Header with the run info, then per phase an outcome badge, the gate table with a small interval plot
per verdict (bound bar, observed dot, threshold line), the triggered fallback plans and the fallback
tests. Every piece of text taken from the document goes through :func:`_e` (``html.escape`` after
:func:`~pytest_perfgate.writers.clean_text`); CSS classes and SVG coordinates are never taken from the
data (classes come from fixed tables, coordinates are computed floats).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from typing import Any

from . import (
    BOUNDS_NOTE,
    METHOD_NOTES,
    RenderedWriter,
    baseline_text,
    case_names,
    clean_text,
    fallback_info,
    is_url,
    metric_text,
    number,
    outcome_text,
    phase_label,
    select_phases,
    shown,
    strings,
    threshold_text,
    verdicts_of,
)

_PHASE_CLASS = {"passed": "ok", "failed": "bad", "fallback": "fb", "inconclusive": "warn", "not run": "none"}
_VERDICT_CLASS = {"pass": "ok", "fail": "bad", "inconclusive": "warn", "recorded": "none"}
_FT_CLASS = {"passed": "ok", "failed": "bad", "skipped": "none"}
_COLOR = {"ok": "#1a7f37", "bad": "#cf222e", "fb": "#bc4c00", "warn": "#9a6700", "none": "#57606a"}

_CSS = """
body{font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;color:#1f2328;
margin:0;padding:24px;background:#f6f8fa}
main{max-width:1200px;margin:0 auto}
h1{font-size:24px;margin:0 0 12px}h2{font-size:19px;margin:0 0 8px}h3{font-size:15px;margin:18px 0 6px}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px 20px;margin:16px 0}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #d8dee4;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
table.info{width:auto}table.info th{background:none;padding-right:16px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eff1f3;padding:1px 4px;
border-radius:4px;word-break:break-all}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-weight:600;font-size:12px;
vertical-align:middle;letter-spacing:.03em}
.ok .badge,.badge.ok{background:#1a7f37}.badge.bad{background:#cf222e}.badge.fb{background:#bc4c00}
.badge.warn{background:#9a6700}.badge.none{background:#57606a}
td.ok{color:#1a7f37;font-weight:600}td.bad{color:#cf222e;font-weight:600}td.warn{color:#9a6700;font-weight:600}
td.none{color:#57606a}
tr.notrun td{color:#57606a;font-style:italic}
.meta{color:#57606a;font-size:13px;margin:4px 0 10px}
.summary{color:#57606a;font-size:12px;margin-top:2px}
ul.plain{padding-left:20px;margin:4px 0}
svg.iv{display:block}
footer{color:#57606a;font-size:12px;text-align:center;margin-top:24px}
"""


def _e(value: object) -> str:
    """Data as HTML text or attribute value: XML-illegal characters made visible, then escaped."""
    return html.escape(clean_text(value), quote=True)


def _slug(name: str, index: int) -> str:
    return f"phase-{index}-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)[:60]


def _f(x: float) -> str:
    return f"{x:.1f}"


# ---------------------------------------------------------------- interval plot

_W, _H, _PAD = 220.0, 26.0, 10.0


def interval_svg(v: Mapping[str, Any]) -> str:
    """An inline SVG: bound bar (arrows at unbounded ends), observed dot, threshold line, baseline tick."""
    lo, hi, obs = number(v.get("lower")), number(v.get("upper")), number(v.get("observed"))
    thr, base = number(v.get("threshold")), number(v.get("baseline"))
    if v.get("method") == "single" and obs is not None:
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

    cls = _VERDICT_CLASS.get(clean_text(v.get("outcome")), "none")
    color = _COLOR[cls]
    mid = _H / 2
    label = clean_text(v.get("summary")) or metric_text(v)
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


# ---------------------------------------------------------------- page


def _doc_link(doc: str) -> str:
    if is_url(doc):
        return f'<a href="{_e(doc)}" rel="noopener noreferrer">{_e(doc)}</a>'
    return f"<code>{_e(doc)}</code>"


def _info_table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows if v)
    return f'<table class="info">{body}</table>' if body else ""


def _distinct(selected: list[tuple[str, Mapping[str, Any]]], key: str) -> list[str]:
    out: list[str] = []
    for _, entry in selected:
        val = clean_text(entry.get(key))
        if val and val not in out:
            out.append(val)
    return out


def _header(doc: Mapping[str, Any], selected: list[tuple[str, Mapping[str, Any]]]) -> str:
    runs = _distinct(selected, "run_id")
    commits = _distinct(selected, "git_commit")
    files = []
    seen: set[tuple[str, str]] = set()
    for _, entry in selected:
        key = (clean_text(entry.get("thresholds_file")), clean_text(entry.get("thresholds_sha256")))
        if any(key) and key not in seen:
            seen.add(key)
            files.append(f"<code>{_e(key[0])}</code>" + (f" sha256 <code>{_e(key[1][:12])}</code>" if key[1] else ""))
    stamps = sorted(_distinct(selected, "timestamp"))
    rows = [
        ("run" if len(runs) < 2 else "runs", ", ".join(f"<code>{_e(r)}</code>" for r in runs)),
        ("git commit" if len(commits) < 2 else "git commits", ", ".join(f"<code>{_e(c)}</code>" for c in commits)),
        ("thresholds", "<br>".join(files)),
        ("timestamp", _e(stamps[-1]) if len(stamps) == 1 else (f"{_e(stamps[0])} to {_e(stamps[-1])}" if stamps else "")),
        ("record updated", _e(doc.get("updated"))),
    ]
    overview = "".join(
        f'<li><a href="#{_slug(name, i)}">{_e(name)}</a> '
        f'<span class="badge {_PHASE_CLASS.get(clean_text(entry.get("outcome")), "none")}">'
        f'{_e(phase_label(entry.get("outcome")))}</span></li>'
        for i, (name, entry) in enumerate(selected)
    )
    return (
        "<header><h1>Performance gates</h1>"
        + _info_table(rows)
        + (f'<ul class="plain">{overview}</ul>' if overview else "<p>No phase results recorded.</p>")
        + "</header>"
    )


def _gate_table(doc: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    vs = verdicts_of(entry)
    head = "".join(
        f"<th>{h}</th>"
        for h in ("gate", "metric", "observed", "CI", "threshold", "baseline", "outcome", "fallback", "interval")
    )
    rows = []
    for name, v in zip(case_names(vs), vs, strict=True):
        cls = _VERDICT_CLASS.get(clean_text(v.get("outcome")), "bad")
        failed = v.get("outcome") == "fail"
        fbs = ", ".join(
            f"<code>{_e(f)}</code>" + (" <strong>triggered</strong>" if failed else "") for f in strings(v.get("fallbacks"))
        )
        test = f'<div class="summary">{_e(v.get("test"))}</div>' if v.get("test") else ""
        note = f'<div class="summary">{_e(v.get("note"))}</div>' if v.get("note") else ""
        rows.append(
            "<tr>"
            f"<td><strong>{_e(name)}</strong>{test}</td>"
            f"<td>{_e(metric_text(v))}</td>"
            f"<td>{_e(shown(v, 'observed'))}</td>"
            f"<td>{_e(v.get('ci'))}{note}</td>"
            f"<td>{_e(threshold_text(v))}</td>"
            f"<td>{_e(baseline_text(v)) or '-'}</td>"
            f'<td class="{cls}">{_e(outcome_text(v))}</td>'
            f"<td>{fbs or '-'}</td>"
            f"<td>{interval_svg(v)}</td>"
            "</tr>"
        )
    for gate in strings(entry.get("not_evaluated")):
        rows.append(
            f'<tr class="notrun"><td><strong>{_e(gate)}</strong></td>'
            '<td colspan="8">not evaluated in this run</td></tr>'
        )
    if not rows:
        return "<p>No gate of this phase was checked in this run.</p>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _phase(doc: Mapping[str, Any], index: int, name: str, entry: Mapping[str, Any], inconclusive: str) -> str:
    outcome = clean_text(entry.get("outcome"))
    cls = _PHASE_CLASS.get(outcome, "none")
    title = clean_text(entry.get("title"))
    meta = []
    if entry.get("run_id"):
        meta.append(f"run <code>{_e(entry.get('run_id'))}</code>")
    if entry.get("git_commit"):
        meta.append(f"commit <code>{_e(str(entry.get('git_commit'))[:12])}</code>")
    if entry.get("timestamp"):
        meta.append(_e(entry.get("timestamp")))
    conf = number(entry.get("confidence"))
    if conf is not None:
        meta.append(f"confidence {conf * 100:g}%")
    deps = strings(entry.get("depends_on"))
    if deps:
        meta.append("depends on " + ", ".join(f"<code>{_e(d)}</code>" for d in deps))
    parts = [
        f'<section id="{_slug(name, index)}">',
        f'<h2><span class="badge {cls}">{_e(phase_label(outcome))}</span> Phase {_e(name)}'
        + (f": {_e(title)}" if title else "")
        + "</h2>",
        f'<div class="meta">{" &middot; ".join(meta)}</div>' if meta else "",
        _gate_table(doc, entry),
    ]
    vs = verdicts_of(entry)
    summaries = [v for v in vs if v.get("outcome") not in ("pass", "recorded")]
    if summaries:
        parts.append(
            '<ul class="plain">' + "".join(f"<li><code>{_e(v.get('summary'))}</code></li>" for v in summaries) + "</ul>"
        )
    if inconclusive != "fail" and any(v.get("outcome") == "inconclusive" for v in vs):
        parts.append("<p>Inconclusive gates are reported as warnings in this run, not as failures.</p>")
    triggered = strings(entry.get("triggered_fallbacks"))
    if triggered:
        items = []
        for fb in triggered:
            info = fallback_info(doc, fb)
            item = f"<li><strong>{_e(fb)}</strong>"
            if info["title"]:
                item += f": {_e(info['title'])}"
            if info["cost"]:
                item += f" <span class=\"summary\">(cost: {_e(info['cost'])})</span>"
            if info["doc"]:
                item += f"<br>see {_doc_link(info['doc'])}"
            if not any(info.values()):
                item += " (not described in thresholds.toml)"
            items.append(item + "</li>")
        parts.append(f'<h3>Triggered fallbacks</h3><ul class="plain">{"".join(items)}</ul>')
    fts = [ft for ft in entry.get("fallback_tests") or [] if isinstance(ft, Mapping)]
    if fts:
        rows = "".join(
            "<tr>"
            f"<td><code>{_e(ft.get('test'))}</code></td>"
            f"<td>{_e(ft.get('fallback'))}</td>"
            f'<td class="{_FT_CLASS.get(clean_text(ft.get("outcome")), "none")}">{_e(ft.get("outcome"))}</td>'
            f"<td>{_e(ft.get('reason'))}</td>"
            "</tr>"
            for ft in fts
        )
        parts.append(
            "<h3>Fallback tests</h3><table><thead><tr><th>test</th><th>fallback</th><th>outcome</th>"
            f"<th>reason</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    parts.append("</section>")
    return "".join(parts)


def _notes(selected: list[tuple[str, Mapping[str, Any]]], inconclusive: str) -> str:
    methods: list[str] = []
    for _, entry in selected:
        for v in verdicts_of(entry):
            m = clean_text(v.get("method"))
            if m and m not in methods:
                methods.append(m)
    items = [f"<li>{_e(BOUNDS_NOTE)}</li>"]
    items += [f"<li><code>{_e(m)}</code>: {_e(METHOD_NOTES.get(m, ''))}</li>" for m in methods]
    items.append(
        "<li>Interval plot: bar = confidence bounds (an arrow where a bound is unbounded), dot = observed value, "
        "solid line = threshold, dashed line = baseline.</li>"
    )
    items.append(
        "<li>Inconclusive gates fail the run.</li>"
        if inconclusive == "fail"
        else f"<li>Inconclusive gates only warn (inconclusive = {_e(inconclusive)}).</li>"
    )
    return f'<section><h3>Notes on the statistics</h3><ul class="plain">{"".join(items)}</ul></section>'


def render(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail") -> str:
    """``report.html`` as text."""
    selected = select_phases(doc, phases)
    body = [_header(doc, selected)]
    body += [_phase(doc, i, name, entry, inconclusive) for i, (name, entry) in enumerate(selected)]
    if selected:
        body.append(_notes(selected, inconclusive))
    body.append(f"<footer>pytest-perfgate &middot; {_e(doc.get('schema'))}</footer>")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>perfgate report</title>"
        f"<style>{_CSS}</style></head>\n<body><main>\n" + "\n".join(body) + "\n</main></body></html>\n"
    )


class HtmlWriter(RenderedWriter):
    """Writes ``report.html``."""

    name = "html"
    filename = "report.html"
    render = staticmethod(render)
