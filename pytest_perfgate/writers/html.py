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

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import writers as common
from ..verdicts import wording as tx
from ..verdicts.record import VerdictRecord
from ..verdicts.wording import clean_text
from . import BOUNDS_NOTE, METHOD_NOTES, RenderedWriter, atomic_write_text
from .html_markup import (
    FT_CLASS,
    PHASE_CLASS,
    VERDICT_CLASS,
    _doc_link,
    _e,
    _failing_first,
    _gate_id,
    _info_table,
    _slug,
)
from .html_sections import Store, cards, runs_section, trend_section

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
        vs = common.verdicts_of(entry)
        counts = {k: sum(1 for v in vs if v.outcome == k) for k in ("fail", "error", "invalid", "inconclusive", "pass", "recorded")}
        gates = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "none checked"
        fbs = [_fallback(doc, fb) for fb in common.strings(entry.get("triggered_fallbacks"))]
        cls = PHASE_CLASS.get(clean_text(entry.get("outcome")), "none")
        rows.append(
            f'<tr><td><a href="#{_slug(name, i)}">{_e(name)}</a><div class="summary">{_e(entry.get("title"))}</div></td>'
            f'<td><span class="badge {cls}">{_e(common.phase_label(entry.get("outcome")))}</span></td>'
            f"<td>{_e(gates)}</td><td>{'<br>'.join(fbs) or '-'}</td></tr>"
        )
    failing = []
    for i, (name, entry) in enumerate(selected):
        for case, v in _failing_first(common.verdicts_of(entry)):
            if v.outcome in ("fail", "error", "invalid", "inconclusive"):
                cls = VERDICT_CLASS.get(v.outcome, "bad")
                failing.append(f'<li><a href="#{_gate_id(i, case)}">{_e(name)} / {_e(case)}</a> '
                               f'<span class="{cls}">{_e(v.outcome)}</span>'
                               f'<div class="summary">{_e(v.summary)}</div></li>')
    return (
        '<section><h2>Overview</h2><div class="scroll"><table><thead><tr><th>phase</th><th>outcome</th>'
        f"<th>gates</th><th>triggered fallbacks</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        + (f'<h3>Gates that did not pass</h3><ul class="plain">{"".join(failing)}</ul>' if failing else "")
        + "</section>"
    )


def _code(text: str) -> str:
    return f"<code>{_e(text)}</code>"


def _strong(text: str) -> str:
    return f"<strong>{_e(text)}</strong>"


def _fallback(doc: Mapping[str, Any], name: str) -> str:
    """A fallback plan in the words of :func:`~pytest_perfgate.verdicts.wording.fallback_line`, marked up."""
    return tx.fallback_line(name, tx.fallback_info(doc, name), strong=_strong, plain=_e, link=_doc_link)


def _change_text(v: VerdictRecord) -> str:
    base = v.vs_baseline
    if base is None or base.change is None:
        return "-"
    ch = base.change
    worse = ch > 0 if base.smaller_is_better else ch < 0
    text = f"{ch * 100:+.1f}% ({'worse' if worse else 'better'})"
    tol = base.tolerance
    if base.regressed and tol is not None:  # "regressed" only against the gate's own regression tolerance
        text += f" regressed beyond {tol * 100:.0f}%"
    elif base.inconclusive and tol is not None:
        text += f" (a regression beyond {tol * 100:.0f}% can't be shown or ruled out at this n)"
    return text


def _gate_table(doc: Mapping[str, Any], entry: Mapping[str, Any], index: int) -> str:
    vs = common.verdicts_of(entry)
    head = "".join(
        f"<th>{h}</th>"
        for h in ("gate", "metric", "observed", "bounds", "threshold", "baseline", "vs baseline run", "outcome",
                  "fallback")
    )
    rows = []
    for name, v in _failing_first(vs):
        cls = VERDICT_CLASS.get(v.outcome, "bad")
        failed = v.outcome == "fail"
        fbs = ", ".join(
            f"<code>{_e(f)}</code>" + (" <strong>triggered</strong>" if failed else "") for f in v.fallbacks
        )
        test = f'<div class="summary">{_e(v.test)}</div>' if v.test else ""
        bounds = (_e(tx.bounds_cell(v)) if v.outcome == "error" else  # not evaluated: no bounds
                  f'{_e(tx.shown(v, "lower"))} &ndash; {_e(tx.shown(v, "upper"))}'
                  f'<div class="summary">n={_e(v.n)}, {_e(v.method)}</div>')
        rows.append(
            "<tr>"
            f'<td><a href="#{_gate_id(index, name)}"><strong>{_e(name)}</strong></a>{test}</td>'
            f"<td>{_e(tx.metric_text(v))}</td>"
            f'<td class="num">{_e(tx.shown(v, "observed"))}</td>'
            f'<td class="num">{bounds}</td>'
            f'<td class="num">{_e(tx.threshold_text(v))}</td>'
            f"<td>{_e(tx.baseline_text(v)) or '-'}</td>"
            f'<td class="num">{_e(_change_text(v))}</td>'
            f'<td class="{cls}">{_e(tx.outcome_text(v))}</td>'
            f"<td>{fbs or '-'}</td>"
            "</tr>"
        )
    for gate in common.strings(entry.get("not_evaluated")):
        rows.append(
            f'<tr class="notrun"><td><strong>{_e(gate)}</strong></td>'
            '<td colspan="8">not evaluated in this run</td></tr>'
        )
    if not rows:
        return "<p>No gate of this phase was checked in this run.</p>"
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _phase(doc: Mapping[str, Any], index: int, name: str, entry: Mapping[str, Any], inconclusive: str,
           store: Store | None = None) -> str:
    outcome = clean_text(entry.get("outcome"))
    cls = PHASE_CLASS.get(outcome, "none")
    title = clean_text(entry.get("title"))
    meta = common.phase_meta(entry, code=_code, plain=_e)
    parts = [
        f'<section id="{_slug(name, index)}">',
        f'<h2><span class="badge {cls}">{_e(common.phase_label(outcome))}</span> Phase {_e(name)}'
        + (f": {_e(title)}" if title else "")
        + "</h2>",
        f'<div class="meta">{" &middot; ".join(meta)}</div>' if meta else "",
        _gate_table(doc, entry, index),
    ]
    vs = common.verdicts_of(entry)
    if inconclusive != "fail" and any(v.outcome == "inconclusive" for v in vs):
        parts.append("<p>Inconclusive gates are reported as warnings in this run, not as failures.</p>")
    triggered = common.strings(entry.get("triggered_fallbacks"))
    if triggered:
        items = [f"<li>{_fallback(doc, fb)}</li>" for fb in triggered]
        parts.append(f'<h3>Triggered fallbacks</h3><ul class="plain">{"".join(items)}</ul>')
    fts = [ft for ft in entry.get("fallback_tests") or [] if isinstance(ft, Mapping)]
    if fts:
        rows = "".join(
            "<tr>"
            f"<td><code>{_e(ft.get('test'))}</code></td>"
            f"<td>{_e(ft.get('fallback'))}</td>"
            f'<td class="{FT_CLASS.get(clean_text(ft.get("outcome")), "none")}">{_e(ft.get("outcome"))}</td>'
            f"<td>{_e(ft.get('reason'))}</td>"
            "</tr>"
            for ft in fts
        )
        parts.append(
            '<h3>Fallback tests</h3><div class="scroll"><table><thead><tr><th>test</th><th>fallback</th><th>outcome</th>'
            f"<th>reason</th></tr></thead><tbody>{rows}</tbody></table></div>"
        )
    parts.append(cards(entry, index, store))
    parts.append("</section>")
    return "".join(parts)

def _notes(selected: list[tuple[str, Mapping[str, Any]]], inconclusive: str) -> str:
    methods = common.verdict_values(selected, "method")
    items = [f"<li>{_e(BOUNDS_NOTE)}</li>"]
    items += [f"<li><code>{_e(m)}</code>: {_e(METHOD_NOTES.get(m, ''))}</li>" for m in methods]
    items.append(
        "<li>Interval plot: bar = confidence bounds (an arrow where a bound is unbounded), dot = observed value, "
        "solid line = threshold, dashed line = baseline.</li>"
    )
    items.append(f"<li>{_e(common.inconclusive_note(inconclusive))}</li>")
    return f'<section><h3>Notes on the statistics</h3><ul class="plain">{"".join(items)}</ul></section>'


def render(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail",
           store_dir: Path | None = None) -> str:
    """``report.html`` as text; ``store_dir``: draw the plots from that results directory's stored data."""
    selected = common.select_phases(doc, phases)
    store = Store(store_dir) if store_dir is not None else None
    body = [_header(doc, selected), _overview(doc, selected)]
    body += [_phase(doc, i, name, entry, inconclusive, store) for i, (name, entry) in enumerate(selected)]
    if store is not None and selected:
        for section in (runs_section, trend_section):
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

    def write_final(self, doc: Mapping[str, Any], out_dir: Path, *, phases: list[str] | None = None,
                    inconclusive: str = "fail") -> Path:
        """The run's last ``report.html``: with its plots (:func:`write_report`); plots that cannot
        be drawn are a warning and the report is written without them (never fatal to the run)."""
        try:
            return write_report(doc, out_dir, phases=phases, inconclusive=inconclusive, plots=True)
        except Exception as e:  # said once the report is written without them (a write that fails is the error)
            path = self.write(doc, out_dir, phases=phases, inconclusive=inconclusive)
            warnings.warn(f"perfgate: could not write the plotted report.html: {e}", stacklevel=2)
            return path


def write_report(
    doc: Mapping[str, Any], out_dir: Path, *, phases: list[str] | None = None, inconclusive: str = "fail",
    plots: bool = True,
) -> Path:
    """Write ``report.html``; ``plots``: with the distribution, run and trend plots made from the stored
    data files and history of ``out_dir`` (matplotlib, imported here)."""
    return atomic_write_text(Path(out_dir) / HtmlWriter.filename,
                             render(doc, phases=phases, inconclusive=inconclusive, store_dir=Path(out_dir) if plots else None),
                             root=Path(out_dir))
