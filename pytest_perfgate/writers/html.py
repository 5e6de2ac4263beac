"""``report.html``: one self-contained page (inline CSS and SVG, no script, no external resources).

Header with the run info and the phase overview (outcome, failing gates first, triggered fallbacks
with cost and link); per phase the gate table (failing gates first, change vs the baseline run), the
triggered plans and fallback tests; per gate the distribution (histogram and CDF with threshold,
observed statistic and bounds, the baseline run's or the reference run's distribution overlaid);
per run TTFT and ITL over the run's time and the TTFT/TPOT decomposition; per engine its info and
counter deltas; per gate the trend over the stored history. Plots come from the stored data files
and history (:mod:`pytest_perfgate.store`) when ``store_dir`` is given (matplotlib, inline SVG);
without them each gate shows a small interval sketch. Every piece of text taken from the document goes through :func:`_e` (``html.escape`` after
:func:`~pytest_perfgate.writers.clean_text`); CSS classes and SVG coordinates are never taken from the
data (classes come from fixed tables, coordinates are computed floats).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import (
    BOUNDS_NOTE,
    METHOD_NOTES,
    RenderedWriter,
    atomic_write_text,
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
*{box-sizing:border-box}
body{font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;color:#1f2328;
margin:0;padding:20px;background:#f6f8fa}
main{max-width:1400px;margin:0 auto}
h1{font-size:24px;margin:0 0 12px}h2{font-size:19px;margin:0 0 8px}h3{font-size:15px;margin:18px 0 6px}
h4{font-size:14px;margin:0 0 4px}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px 20px;margin:16px 0}
.scroll{overflow-x:auto;max-width:100%}
.scroll>table{min-width:680px}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #d8dee4;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600;white-space:nowrap}
td.num{white-space:nowrap;font-variant-numeric:tabular-nums}
table.info{width:auto}table.info th{background:none;padding-right:16px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eff1f3;padding:1px 4px;
border-radius:4px;overflow-wrap:anywhere}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-weight:600;font-size:12px;
vertical-align:middle;letter-spacing:.03em;white-space:nowrap}
.ok .badge,.badge.ok{background:#1a7f37}.badge.bad{background:#cf222e}.badge.fb{background:#bc4c00}
.badge.warn{background:#9a6700}.badge.none{background:#57606a}
td.ok{color:#1a7f37;font-weight:600}td.bad{color:#cf222e;font-weight:600}td.warn{color:#9a6700;font-weight:600}
td.none{color:#57606a}
tr.notrun td{color:#57606a;font-style:italic}
.meta{color:#57606a;font-size:13px;margin:4px 0 10px}
.summary{color:#57606a;font-size:12px;margin-top:2px;overflow-wrap:anywhere}
ul.plain{padding-left:20px;margin:4px 0}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,620px),1fr));gap:14px}
.card{border:1px solid #d8dee4;border-radius:6px;padding:10px 12px;min-width:0}
.card.bad{border-left:4px solid #cf222e}.card.ok{border-left:4px solid #1a7f37}
.card.warn{border-left:4px solid #9a6700}.card.none{border-left:4px solid #57606a}
svg.plot{display:block;width:100%;height:auto;max-width:100%}
svg.iv{display:block;max-width:100%}
footer{color:#57606a;font-size:12px;text-align:center;margin-top:24px}
@media (max-width:700px){body{padding:8px}section{padding:10px 10px}h1{font-size:20px}
th,td{padding:4px 5px;font-size:13px}}
"""

_ORDER = {"fail": 0, "error": 1, "inconclusive": 2, "pass": 3, "recorded": 4}


def _e(value: object) -> str:
    """Data as HTML text or attribute value: XML-illegal characters made visible, then escaped."""
    return html.escape(clean_text(value), quote=True)


def _slug(name: str, index: int) -> str:
    return f"phase-{index}-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)[:60]


def _gate_id(phase_index: int, case: str) -> str:
    return f"gate-{phase_index}-" + re.sub(r"[^A-Za-z0-9_-]", "-", case)[:60]


def _f(x: float) -> str:
    return f"{x:.1f}"


def _failing_first(vs: list[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    named = list(zip(case_names(vs), vs, strict=True))
    return sorted(named, key=lambda nv: _ORDER.get(clean_text(nv[1].get("outcome")), 1))


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


# ---------------------------------------------------------------- stored data


class _Store:
    """Reads the data files and the history of a results directory for the plots (never raises:
    what cannot be read is left out, with a note)."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self._cache: dict[str, Any] = {}
        self.problems: list[str] = []

    def load(self, rel: object) -> Any:
        if not isinstance(rel, str) or not rel:
            return None
        if rel not in self._cache:
            from ..store.records import StoreError, load

            try:
                path = (self.out_dir / rel).resolve()
                if self.out_dir.resolve() not in path.parents:
                    raise StoreError(f"{rel}: outside the results directory")
                self._cache[rel] = load(path)
            except (StoreError, OSError, ValueError, TypeError, KeyError) as e:
                self.problems.append(str(e))
                self._cache[rel] = None
        return self._cache[rel]

    def history(self, gate: str | None = None, run_id: str | None = None) -> list[dict[str, Any]]:
        from ..store import history

        db = history.path_of(self.out_dir)
        if not db.exists():
            return []
        try:
            return history.verdicts(db, gate=gate, run_id=run_id)
        except (history.HistoryError, OSError, ValueError) as e:
            self.problems.append(str(e))
            return []


def _scale(v: Mapping[str, Any]) -> tuple[str, float]:
    """(display unit, base units per display unit) of a verdict."""
    from ..units import UnitError, unit

    name = clean_text(v.get("unit"))
    try:
        return name, unit(name).factor
    except UnitError:
        return name, 1.0


def _values(data: Any, metric: str) -> Any:
    """Per-request values (base units) of evaluated data, or None (proportions, single values)."""
    from ..samples import SampleError, Samples, as_data

    try:
        d = as_data(data, metric)
    except (SampleError, ValueError, TypeError):
        return None
    if isinstance(d, Samples) and d.n > 1 and d.denominators is None:
        return d.values
    return None


def _num_or_none(x: object, factor: float) -> float | None:
    n = number(x)
    return None if n is None else n / factor


def _distribution(v: Mapping[str, Any], store: _Store) -> tuple[str, str]:
    """(figure, caption) of one verdict's data; ("", reason) when there is nothing to draw."""
    from . import plots

    stored = store.load(v.get("samples"))
    if stored is None:
        return "", "no stored data for this verdict"
    metric = clean_text(v.get("metric"))
    unit_name, factor = _scale(v)
    thr = _num_or_none(v.get("threshold"), factor)
    lo, hi, obs = (_num_or_none(v.get(k), factor) for k in ("lower", "upper", "observed"))
    parts = stored.parts
    compare = bool(v.get("compare"))
    series: list[Any] = []
    caption = ""
    if compare and len(parts) == 2:
        # the statistic is a ratio/difference of the two runs: draw both runs on the metric's own axis
        runs = strings(v.get("runs")) or ["", ""]
        unit_name, factor = _metric_unit(metric)
        thr = lo = hi = obs = None
        for i, (part, color) in enumerate(zip(parts, (plots.BLUE, plots.GREY), strict=True)):
            vals = _values(part, metric)
            if vals is not None:
                series.append(plots.Series(vals / factor, "treatment" if i == 0 else "reference", color))
        names = (f" (<code>{_e(runs[0])}</code>)", f" (<code>{_e(runs[-1])}</code>)") if v.get("runs") else ("", "")
        caption = (f"treatment{names[0]} in blue vs reference{names[1]} in grey; "
                   f"the gate's statistic is their {_e(v.get('compare'))}, shown in the table")
    else:
        vals = _values(stored.data, metric)
        if vals is not None:
            series.append(plots.Series(vals / factor, "this run", plots.BLUE))
        base = v.get("vs_baseline")
        if isinstance(base, Mapping) and base.get("baseline_run"):
            rows = store.history(gate=clean_text(v.get("gate")), run_id=clean_text(base.get("baseline_run")))
            bstored = store.load(rows[-1]["samples"]) if rows else None
            bvals = _values(bstored.data, metric) if bstored is not None else None
            if bvals is not None:
                series.append(plots.Series(bvals / factor, "baseline", plots.GREY))
                caption = f"baseline run <code>{_e(base.get('baseline_run'))}</code> overlaid in grey"
    if not series:
        if obs is None:
            return "", "no per-request distribution"
        return (plots.interval([("this run", obs, lo, hi)], unit_name, threshold=thr),
                "rate or single value: observed with its bounds")
    label = f"{clean_text(v.get('statistic'))}"
    return plots.distribution(series, unit_name, threshold=thr, lower=lo, upper=hi, observed=obs,
                              stat_label=label), caption


def _metric_unit(metric: str) -> tuple[str, float]:
    from ..metrics import lookup
    from ..units import DIMENSION_DEFAULT_UNIT, unit

    m = lookup(metric)
    name = DIMENSION_DEFAULT_UNIT.get(m.dimension if m else "number", "")
    return name, unit(name).factor


def _run_key(r: Any) -> tuple[Any, ...]:
    return (r.start_ns, r.end_ns, len(r.records), str(r.engine_info.get("name", "")))


def _run_figure(r: Any) -> str:
    from ..load import metrics as m
    from . import plots

    ok = m.successful(r.records)
    if not ok:
        return ""
    t0 = min(x.sent_ns for x in ok)
    ttft = ([(x.sent_ns - t0) / 1e9 for x in ok], [(x.chunk_ns[0] - x.sent_ns) / 1e6 for x in ok])
    itl_t: list[float] = []
    itl_v: list[float] = []
    for x in ok:
        for a, b in zip(x.chunk_ns, x.chunk_ns[1:], strict=False):
            itl_t.append((b - t0) / 1e9)
            itl_v.append((b - a) / 1e6)
    dec = ([(x.chunk_ns[0] - x.sent_ns) / 1e6 for x in ok], [(x.chunk_ns[-1] - x.chunk_ns[0]) / 1e6 for x in ok])
    return plots.over_time(ttft, (itl_t, itl_v), dec)


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
            files.append(f"<code>{_e(Path(key[0]).name if key[0] else '')}</code>"
                         + (f" sha256 <code>{_e(key[1][:12])}</code>" if key[1] else ""))
    stamps = sorted(_distinct(selected, "timestamp"))
    rows = [
        ("run" if len(runs) < 2 else "runs", ", ".join(f"<code>{_e(r)}</code>" for r in runs)),
        ("git commit" if len(commits) < 2 else "git commits", ", ".join(f"<code>{_e(c)}</code>" for c in commits)),
        ("thresholds", "<br>".join(files)),
        ("timestamp", _e(stamps[-1]) if len(stamps) == 1 else (f"{_e(stamps[0])} to {_e(stamps[-1])}" if stamps else "")),
        ("record updated", _e(doc.get("updated"))),
    ]
    return "<header><h1>Performance gates</h1>" + _info_table(rows) + "</header>"


def _overview(doc: Mapping[str, Any], selected: list[tuple[str, Mapping[str, Any]]]) -> str:
    """Phases with their outcome, failing gates first, triggered fallbacks with cost and link."""
    if not selected:
        return "<section><p>No phase results recorded.</p></section>"
    rows = []
    for i, (name, entry) in enumerate(selected):
        vs = verdicts_of(entry)
        counts = {k: sum(1 for v in vs if v.get("outcome") == k) for k in ("fail", "error", "inconclusive", "pass", "recorded")}
        gates = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "none checked"
        fbs = []
        for fb in strings(entry.get("triggered_fallbacks")):
            info = fallback_info(doc, fb)
            fbs.append(f"<strong>{_e(fb)}</strong>" + (f": {_e(info['title'])}" if info["title"] else "")
                       + (f' <span class="summary">(cost: {_e(info["cost"])})</span>' if info["cost"] else "")
                       + (f"<br>{_doc_link(info['doc'])}" if info["doc"] else ""))
        cls = _PHASE_CLASS.get(clean_text(entry.get("outcome")), "none")
        rows.append(
            f'<tr><td><a href="#{_slug(name, i)}">{_e(name)}</a><div class="summary">{_e(entry.get("title"))}</div></td>'
            f'<td><span class="badge {cls}">{_e(phase_label(entry.get("outcome")))}</span></td>'
            f"<td>{_e(gates)}</td><td>{'<br>'.join(fbs) or '-'}</td></tr>"
        )
    failing = []
    for i, (name, entry) in enumerate(selected):
        for case, v in _failing_first(verdicts_of(entry)):
            if v.get("outcome") in ("fail", "error") or (v.get("outcome") == "inconclusive"):
                cls = _VERDICT_CLASS.get(clean_text(v.get("outcome")), "bad")
                failing.append(f'<li><a href="#{_gate_id(i, case)}">{_e(name)} / {_e(case)}</a> '
                               f'<span class="{cls}">{_e(v.get("outcome"))}</span>'
                               f'<div class="summary">{_e(v.get("summary"))}</div></li>')
    return (
        '<section><h2>Overview</h2><div class="scroll"><table><thead><tr><th>phase</th><th>outcome</th>'
        f"<th>gates</th><th>triggered fallbacks</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        + (f'<h3>Gates that did not pass</h3><ul class="plain">{"".join(failing)}</ul>' if failing else "")
        + "</section>"
    )


def _change_text(v: Mapping[str, Any]) -> str:
    base = v.get("vs_baseline")
    if not isinstance(base, Mapping):
        return "-"
    ch = number(base.get("change"))
    if ch is None:
        return "-"
    sib = bool(base.get("smaller_is_better", True))
    worse = ch > 0 if sib else ch < 0
    text = f"{ch * 100:+.1f}% ({'worse' if worse else 'better'})"
    if base.get("regressed"):
        text += " regressed"
    return text


def _gate_table(doc: Mapping[str, Any], entry: Mapping[str, Any], index: int) -> str:
    vs = verdicts_of(entry)
    head = "".join(
        f"<th>{h}</th>"
        for h in ("gate", "metric", "observed", "bounds", "threshold", "baseline", "vs baseline run", "outcome",
                  "fallback")
    )
    rows = []
    for name, v in _failing_first(vs):
        cls = _VERDICT_CLASS.get(clean_text(v.get("outcome")), "bad")
        failed = v.get("outcome") == "fail"
        fbs = ", ".join(
            f"<code>{_e(f)}</code>" + (" <strong>triggered</strong>" if failed else "") for f in strings(v.get("fallbacks"))
        )
        test = f'<div class="summary">{_e(v.get("test"))}</div>' if v.get("test") else ""
        rows.append(
            "<tr>"
            f'<td><a href="#{_gate_id(index, name)}"><strong>{_e(name)}</strong></a>{test}</td>'
            f"<td>{_e(metric_text(v))}</td>"
            f'<td class="num">{_e(shown(v, "observed"))}</td>'
            f'<td class="num">{_e(shown(v, "lower"))} &ndash; {_e(shown(v, "upper"))}'
            f'<div class="summary">n={_e(v.get("n"))}, {_e(v.get("method"))}</div></td>'
            f'<td class="num">{_e(threshold_text(v))}</td>'
            f"<td>{_e(baseline_text(v)) or '-'}</td>"
            f'<td class="num">{_e(_change_text(v))}</td>'
            f'<td class="{cls}">{_e(outcome_text(v))}</td>'
            f"<td>{fbs or '-'}</td>"
            "</tr>"
        )
    for gate in strings(entry.get("not_evaluated")):
        rows.append(
            f'<tr class="notrun"><td><strong>{_e(gate)}</strong></td>'
            '<td colspan="8">not evaluated in this run</td></tr>'
        )
    if not rows:
        return "<p>No gate of this phase was checked in this run.</p>"
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _cards(entry: Mapping[str, Any], index: int, store: _Store | None) -> str:
    """One card per verdict: its summary and its distribution (or the interval sketch)."""
    out = []
    for name, v in _failing_first(verdicts_of(entry)):
        cls = _VERDICT_CLASS.get(clean_text(v.get("outcome")), "bad")
        fig, caption = ("", "")
        if store is not None:
            try:
                fig, caption = _distribution(v, store)
            except Exception as e:  # a plot must never cost the report
                fig, caption = "", f"plot failed: {_e(type(e).__name__)}: {_e(e)}"
        if not fig:
            fig = interval_svg(v) + (f'<div class="summary">{caption}</div>' if caption and store is not None else "")
            caption = ""
        out.append(
            f'<div class="card {cls}" id="{_gate_id(index, name)}"><h4>{_e(name)} '
            f'<span class="{cls}">{_e(v.get("outcome"))}</span></h4>'
            f'<div class="summary">{_e(v.get("summary"))}</div>{fig}'
            + (f'<div class="summary">{caption}</div>' if caption else "") + "</div>"
        )
    return f'<h3>Distributions</h3><div class="cards">{"".join(out)}</div>' if out else ""


def _phase(doc: Mapping[str, Any], index: int, name: str, entry: Mapping[str, Any], inconclusive: str,
           store: _Store | None = None) -> str:
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
        _gate_table(doc, entry, index),
    ]
    vs = verdicts_of(entry)
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
            '<h3>Fallback tests</h3><div class="scroll"><table><thead><tr><th>test</th><th>fallback</th><th>outcome</th>'
            f"<th>reason</th></tr></thead><tbody>{rows}</tbody></table></div>"
        )
    parts.append(_cards(entry, index, store))
    parts.append("</section>")
    return "".join(parts)


def _runs_section(selected: list[tuple[str, Mapping[str, Any]]], store: _Store) -> str:
    """Per stored load run: TTFT/ITL over time and the decomposition; engines and counters."""
    seen: dict[tuple[Any, ...], tuple[Any, list[str]]] = {}
    for _, entry in selected:
        for v in verdicts_of(entry):
            stored = store.load(v.get("samples"))
            for r in stored.runs if stored is not None else []:
                key = _run_key(r)
                seen.setdefault(key, (r, []))[1].append(clean_text(v.get("gate")))
    if not seen:
        return ""
    cards = []
    engines: dict[str, Mapping[str, Any]] = {}
    counters: dict[str, dict[str, float]] = {}
    for i, (r, gates) in enumerate(list(seen.values())[:12]):
        try:
            fig = _run_figure(r)
        except Exception as e:  # never fatal
            fig = f'<div class="summary">plot failed: {_e(type(e).__name__)}: {_e(e)}</div>'
        name = clean_text(r.engine_info.get("name", "")) or f"engine {i}"
        engines.setdefault(name, r.engine_info)
        delta = {k: float(r.counters_after[k]) - float(r.counters_before.get(k, 0.0)) for k in r.counters_after
                 if isinstance(r.counters_after.get(k), (int, float))}
        acc = counters.setdefault(name, {})
        for k, d in delta.items():
            acc[k] = acc.get(k, 0.0) + d
        n_ok = sum(1 for x in r.records if not x.warmup and x.error is None)
        n_err = sum(1 for x in r.records if not x.warmup and x.error is not None)
        cards.append(
            f'<div class="card none"><h4>run {i + 1}: engine <code>{_e(name)}</code></h4>'
            f'<div class="summary">gates {_e(", ".join(dict.fromkeys(gates)))} &middot; {n_ok} requests ok, '
            f"{n_err} failed &middot; {(r.end_ns - r.start_ns) / 1e9:.2f} s</div>{fig}</div>"
        )
    eng_rows = []
    for name, info in engines.items():
        rows = [(str(k), _e(json.dumps(val, default=str) if isinstance(val, (dict, list)) else val))
                for k, val in info.items()]
        cnt = counters.get(name, {})
        keys = [k for k in cnt if any(w in k for w in ("accept", "draft", "spec", "prefix", "cache", "kv", "preempt"))]
        crow = "".join(f"<tr><th>{_e(k)}</th><td class=\"num\">{cnt[k]:.6g}</td></tr>" for k in sorted(keys)[:40])
        eng_rows.append(
            f'<div class="card none"><h4>engine <code>{_e(name)}</code></h4>{_info_table(rows)}'
            + (f'<h4>counters (change during the stored runs)</h4><table class="info">{crow}</table>' if crow else "")
            + "</div>"
        )
    more = len(seen) - 12
    return (
        '<section><h2>Runs</h2><p class="summary">TTFT per request and ITL per chunk over the run\'s clock; '
        "each request's E2E split into TTFT and (N-1) x TPOT (T_total = TTFT + (N-1)/TPS).</p>"
        f'<div class="cards">{"".join(cards)}</div>'
        + (f'<p class="summary">{more} more runs not drawn.</p>' if more > 0 else "")
        + f'</section><section><h2>Engines</h2><div class="cards">{"".join(eng_rows)}</div></section>'
    )


def _trend_section(selected: list[tuple[str, Mapping[str, Any]]], store: _Store) -> str:
    from . import plots

    gates: list[str] = []
    for _, entry in selected:
        for v in verdicts_of(entry):
            g = clean_text(v.get("gate"))
            if g and g not in gates:
                gates.append(g)
    cards = []
    for g in gates:
        rows = [r for r in store.history(gate=g) if r["outcome"] != "error" and r["observed"] is not None][-50:]
        if len(rows) < 2:
            continue
        last = rows[-1]["verdict"]
        unit_name, factor = _scale(last)
        pts = [(r["observed"] / factor, _num_or_none(r["lower"], factor), _num_or_none(r["upper"], factor)) for r in rows]
        try:
            fig = plots.trend(pts, unit_name, threshold=_num_or_none(last.get("threshold"), factor),
                              outcomes=[r["outcome"] for r in rows])
        except Exception as e:  # never fatal
            fig = f'<div class="summary">plot failed: {_e(type(e).__name__)}: {_e(e)}</div>'
        cards.append(f'<div class="card none"><h4>{_e(g)}</h4><div class="summary">{len(rows)} stored runs, '
                     f"{_e(rows[0]['time'])} to {_e(rows[-1]['time'])}</div>{fig}</div>")
    if not cards:
        return ""
    return f'<section><h2>Trend</h2><div class="cards">{"".join(cards)}</div></section>'


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


def render(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail",
           store_dir: Path | None = None) -> str:
    """``report.html`` as text; ``store_dir``: draw the plots from that results directory's stored data."""
    selected = select_phases(doc, phases)
    store = _Store(store_dir) if store_dir is not None else None
    body = [_header(doc, selected), _overview(doc, selected)]
    body += [_phase(doc, i, name, entry, inconclusive, store) for i, (name, entry) in enumerate(selected)]
    if store is not None and selected:
        for section in (_runs_section, _trend_section):
            try:
                body.append(section(selected, store))
            except Exception as e:  # the report is still written
                body.append(f"<section><p>{_e(section.__name__)} failed: {_e(type(e).__name__)}: {_e(e)}</p></section>")
        if store.problems:
            body.append('<section><h3>Stored data not shown</h3><ul class="plain">'
                        + "".join(f"<li>{_e(p)}</li>" for p in dict.fromkeys(store.problems)) + "</ul></section>")
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
    """Writes ``report.html`` (without plots: the plugin writes it after every test; the plotted
    report is :func:`write_report`, at the end of the session and by ``perfgate report``)."""

    name = "html"
    filename = "report.html"
    render = staticmethod(render)


def write_report(
    doc: Mapping[str, Any], out_dir: Path, *, phases: list[str] | None = None, inconclusive: str = "fail",
    plots: bool = True,
) -> Path:
    """Write ``report.html``; ``plots``: with the distribution, run and trend plots made from the stored
    data files and history of ``out_dir`` (matplotlib, imported here)."""
    return atomic_write_text(Path(out_dir) / HtmlWriter.filename,
                             render(doc, phases=phases, inconclusive=inconclusive, store_dir=Path(out_dir) if plots else None))
