"""The trend site (``perfgate report --history DIR``): a static page per gate with every run over
commits (its value and bounds), the threshold, the change points marked, one plot per branch; an
index page; ``trend.json`` with the same data. Inline SVG, no script, no external file: a CI job
publishes the folder as it is (GitHub Pages, an artifact).

Input: the series as plain data (``store.trend.Series.to_dict()``: gate, branch, unit, direction,
points [{run_id, commit, started, outcome, observed, lower, upper, confidence, threshold}], changes
[{index, before, after, size, lower, upper, level, confidence, ...}]), values in base units.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..runtime.atomic import atomic_write_text

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 960, 320, 70, 20, 20, 60

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1000px;padding:0 1em;color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:2em} table{border-collapse:collapse;margin:.5em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left} code{font-size:12px}
.change{color:#b00020;font-weight:600} svg{max-width:100%;height:auto;background:#fafafa;border:1px solid #ddd}
.muted{color:#666} .scroll{overflow-x:auto}
"""


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "gate"


def _unit(name: str) -> Any:
    from ..config.units import UnitError, unit

    try:
        return unit(name or "")
    except UnitError:
        return unit("")


def _fmt(x: float | None, u: Any) -> str:
    from ..config.units import format_value

    return "-" if x is None else format_value(x, u)


def _scale(x: float | None, u: Any) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return x * 100.0 if u.name == "%" else x / u.factor


def _view(pts: Sequence[Mapping[str, Any]], u: Any, obs: list[float], thr: float | None) -> tuple[float, float, bool]:
    """(low, high, threshold inside) of the plot: the runs' values, their bounds up to one span
    beyond, the threshold when near; a bound a burst of slow requests blew up (20 ms - 1794 ms seen)
    must not flatten every other run."""
    a, b = min(obs), max(obs)
    span = (b - a) or abs(b) * 0.1 or 1.0
    lows = [v for v in (_scale(p.get("lower"), u) for p in pts) if v is not None]
    highs = [v for v in (_scale(p.get("upper"), u) for p in pts) if v is not None]
    lo, hi = max(min([a, *lows]), a - span), min(max([b, *highs]), b + span)
    thr_in = thr is not None and a - 2 * span <= thr <= b + 2 * span
    if thr_in and thr is not None:
        lo, hi = min(lo, thr), max(hi, thr)
    if a >= 0:
        lo = max(lo, 0.0)
    pad = 0.06 * (hi - lo or 1.0)
    return (max(lo - pad, 0.0) if a >= 0 else lo - pad), hi + pad, thr_in


def svg(s: Mapping[str, Any]) -> str:
    """One branch's runs of one gate as an SVG plot."""
    u = _unit(str(s.get("unit") or ""))
    pts: Sequence[Mapping[str, Any]] = s.get("points") or []
    n = len(pts)
    obs = [v for v in (_scale(p.get("observed"), u) for p in pts) if v is not None]
    thr = next((_scale(p.get("threshold"), u) for p in reversed(pts) if p.get("threshold") is not None), None)
    if not obs:
        return "<p class='muted'>no run with a value</p>"
    lo, hi, thr_in = _view(pts, u, obs, thr)

    def xs(i: float) -> float:
        return PAD_L + (i + 0.5) * (W - PAD_L - PAD_R) / max(n, 1)

    def ys(v: float) -> float:
        return PAD_T + (hi - v) * (H - PAD_T - PAD_B) / (hi - lo)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
           f'aria-label="{html.escape(str(s.get("gate")))} on {html.escape(str(s.get("branch")))}">']
    for k in range(5):  # y grid and labels
        v = lo + (hi - lo) * k / 4
        y = ys(v)
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
                   f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{v:.4g}</text>')
    out.append(f'<text x="14" y="{PAD_T + (H - PAD_T - PAD_B) / 2:.0f}" font-size="12" '
               f'transform="rotate(-90 14 {PAD_T + (H - PAD_T - PAD_B) / 2:.0f})" text-anchor="middle">'
               f'{html.escape(str(s.get("metric") or s.get("gate")))} ({html.escape(u.name or "value")})</text>')
    if thr is not None and not thr_in:
        where, y = ("above", PAD_T + 12) if thr > hi else ("below", H - PAD_B - 4)
        out.append(f'<text x="{W - PAD_R - 4}" y="{y}" text-anchor="end" font-size="11" fill="#b36b00">'
                   f'threshold {thr:.4g} ({where} the plot)</text>')
    if thr is not None and thr_in:
        y = ys(thr)
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e08a00" '
                   f'stroke-dasharray="6 4" stroke-width="1.5"/><text x="{W - PAD_R - 4}" y="{y - 4:.1f}" '
                   f'text-anchor="end" font-size="11" fill="#b36b00">threshold {thr:.4g}</text>')
    changes: Sequence[Mapping[str, Any]] = s.get("changes") or []
    cuts = [0, *[int(c["index"]) for c in changes], n]
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):  # segment levels
        seg = [_scale(p.get("observed"), u) for p in pts[a:b]]
        seg_v = sorted(v for v in seg if v is not None)
        if seg_v:
            med = seg_v[len(seg_v) // 2]
            out.append(f'<line x1="{xs(a - 0.4):.1f}" x2="{xs(b - 0.6):.1f}" y1="{ys(med):.1f}" y2="{ys(med):.1f}" '
                       f'stroke="#7a9cc6" stroke-width="2" opacity="0.7"/>')
    for c in changes:
        x = (xs(int(c["index"]) - 1) + xs(int(c["index"]))) / 2
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H - PAD_B}" stroke="#b00020" '
                   f'stroke-width="2" stroke-dasharray="4 3"/><text x="{x + 4:.1f}" y="{PAD_T + 12}" font-size="12" '
                   f'fill="#b00020">{float(c["size"]):+.1%} ({float(c["confidence"]):.1%})</text>')
    for i, p in enumerate(pts):
        x = xs(i)
        lo_v, hi_v, ob = _scale(p.get("lower"), u), _scale(p.get("upper"), u), _scale(p.get("observed"), u)
        if lo_v is not None and hi_v is not None:
            top, bottom = ys(min(hi_v, hi)), ys(max(lo_v, lo))
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" stroke="#555"/>')
            if hi_v > hi:  # a bound beyond the view: an arrow head at the edge
                out.append(f'<path d="M{x - 4:.1f},{top + 6:.1f} L{x:.1f},{top:.1f} L{x + 4:.1f},{top + 6:.1f}" '
                           f'fill="none" stroke="#555"/>')
        color = {"fail": "#b00020", "inconclusive": "#c77c00"}.get(str(p.get("outcome")), "#1f5fa8")
        if ob is not None:
            out.append(f'<circle cx="{x:.1f}" cy="{ys(ob):.1f}" r="3.5" fill="{color}"><title>'
                       f'{html.escape(str(p.get("commit") or "")[:12])} run {html.escape(str(p.get("run_id")))}: '
                       f'{ob:.4g} [{lo_v if lo_v is not None else "-"}, {hi_v if hi_v is not None else "-"}] '
                       f'{html.escape(str(p.get("outcome")))}</title></circle>')
    step = max(1, math.ceil(n / 16))
    for i in range(0, n, step):  # commit labels
        label = str(pts[i].get("commit") or pts[i].get("run_id") or "")[:7]
        out.append(f'<text x="{xs(i):.1f}" y="{H - PAD_B + 14}" font-size="10" text-anchor="end" '
                   f'transform="rotate(-40 {xs(i):.1f} {H - PAD_B + 14})" font-family="monospace">{html.escape(label)}</text>')
    out.append(f'<text x="{(PAD_L + W - PAD_R) / 2:.0f}" y="{H - 4}" font-size="12" text-anchor="middle">'
               f'commits, oldest first ({n} runs)</text></svg>')
    return "".join(out)


def _changes_table(changes: Sequence[Mapping[str, Any]]) -> str:
    if not changes:
        return "<p class='muted'>no change point at the stated false-alarm rate</p>"
    rows = "".join(
        f"<tr class='change'><td><code>{html.escape(str(c['before']))}</code></td>"
        f"<td><code>{html.escape(str(c['after']))}</code></td><td>{float(c['size']):+.1%}</td>"
        f"<td>{float(c['lower']):+.1%} .. {float(c['upper']):+.1%} ({float(c['level']):.0%})</td>"
        f"<td>{float(c['confidence']):.1%}</td></tr>" for c in changes)
    return ("<div class='scroll'><table><tr><th>last commit before</th><th>first commit after</th><th>size</th>"
            f"<th>interval</th><th>confidence</th></tr>{rows}</table></div>")


def _runs_table(s: Mapping[str, Any]) -> str:
    u = _unit(str(s.get("unit") or ""))
    rows = "".join(
        f"<tr><td><code>{html.escape(str(p.get('commit') or '-')[:12])}</code></td><td>{html.escape(str(p['run_id']))}</td>"
        f"<td>{_fmt(p.get('observed'), u)}</td><td>{_fmt(p.get('lower'), u)} .. {_fmt(p.get('upper'), u)}</td>"
        f"<td>{html.escape(str(p.get('outcome')))}</td></tr>" for p in reversed(s.get("points") or []))
    return (f"<details><summary>{len(s.get('points') or [])} runs</summary><div class='scroll'><table><tr><th>commit</th>"
            f"<th>run</th><th>observed</th><th>bounds</th><th>outcome</th></tr>{rows}</table></div></details>")


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' "
            f"content='width=device-width,initial-scale=1'><title>{html.escape(title)}</title><style>{_CSS}</style>"
            f"</head><body>{body}</body></html>\n")


def write_site(series: Sequence[Mapping[str, Any]], out: Path, *, alpha: float, method: str) -> list[Path]:
    """Write index.html, one page per gate and trend.json into ``out``; returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    by_gate: dict[str, list[Mapping[str, Any]]] = {}
    for s in series:
        by_gate.setdefault(str(s["gate"]), []).append(s)
    written: list[Path] = []
    items = []
    for gate, ss in sorted(by_gate.items()):
        body = [f"<p><a href='index.html'>all gates</a></p><h1>{html.escape(gate)}</h1>",
                f"<p class='muted'>change points: {html.escape(method)}; false-alarm rate {alpha:g} per branch "
                "and analysis of a stationary series. Dots: each run's value (red: failed), bars: its bounds, "
                "dashed orange: the threshold, dashed red: a change point (size, confidence), blue: the level "
                "between change points.</p>"]
        for s in ss:
            body.append(f"<h2>branch {html.escape(str(s['branch']))}</h2>{svg(s)}"
                        f"{_changes_table(s.get('changes') or [])}{_runs_table(s)}")
        page = out / f"{_slug(gate)}.html"
        atomic_write_text(page, _page(f"perfgate trend: {gate}", "".join(body)))
        written.append(page)
        n_ch = sum(len(s.get("changes") or []) for s in ss)
        n_runs = sum(len(s.get("points") or []) for s in ss)
        items.append(f"<tr><td><a href='{html.escape(page.name)}'>{html.escape(gate)}</a></td>"
                     f"<td>{html.escape(', '.join(str(s['branch']) for s in ss))}</td><td>{n_runs}</td>"
                     f"<td{' class=change' if n_ch else ''}>{n_ch}</td></tr>")
    index = out / "index.html"
    atomic_write_text(index, _page("perfgate trends", "<h1>perfgate: gates over commits</h1>"
                                   + ("<table><tr><th>gate</th><th>branches</th><th>runs</th><th>change points</th></tr>"
                                      + "".join(items) + "</table>" if items else "<p>no stored run with a value</p>")))
    data = out / "trend.json"
    atomic_write_text(data, json.dumps({"alpha": alpha, "method": method, "series": list(series)}, indent=1,
                                       default=str) + "\n")
    return [index, *written, data]
