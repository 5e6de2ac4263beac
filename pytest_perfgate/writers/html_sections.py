"""The sections of ``report.html`` drawn from the stored data of a results directory
(:mod:`pytest_perfgate.store`, matplotlib as inline SVG): per gate its distribution (histogram and
CDF with threshold, observed statistic and bounds; the baseline run's or the reference run's
distribution overlaid), per run TTFT and ITL over the run's clock and the TTFT/TPOT decomposition,
per engine its info and counter deltas, per gate the trend over the stored history. Without stored
data each gate shows the small interval sketch. A plot that fails never costs the report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..verdicts.record import VerdictRecord
from ..verdicts.wording import clean_text, number
from . import verdict_values, verdicts_of
from .html_markup import VERDICT_CLASS, _e, _failing_first, _gate_id, _info_table, interval_svg


class Store:
    """Reads the data files and the history of a results directory for the plots (never raises:
    what cannot be read is left out, with a note)."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self._cache: dict[str, Any] = {}
        self._runs: dict[Path, Any] = {}  # run files read: the verdicts of one run share it
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
                self._cache[rel] = load(path, self._runs)
            except (StoreError, OSError, ValueError, TypeError, KeyError) as e:
                self.problems.append(str(e))
                self._cache[rel] = None
        return self._cache[rel]

    def history(self, gate: str | None = None, run_id: str | None = None) -> list[dict[str, Any]]:
        from ..store import backend, history

        db = backend.history_of(self.out_dir)  # the session's (a shared history: PostgreSQL, a file elsewhere)
        if not history.exists(db):
            return []
        try:
            return history.verdicts(db, gate=gate, run_id=run_id)
        except backend.errors() as e:
            self.problems.append(str(e))
            return []


def _scale(v: VerdictRecord) -> tuple[str, float]:
    """(display unit, base units per display unit) of a verdict."""
    from ..config.units import UnitError, unit

    name = clean_text(v.unit)
    try:
        return name, unit(name).factor
    except UnitError:
        return name, 1.0


def _values(data: Any, metric: str) -> Any:
    """Per-request values (base units) of evaluated data, or None (proportions, single values)."""
    from ..verdicts.samples import SampleError, Samples, as_data

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


def _distribution(v: VerdictRecord, store: Store) -> tuple[str, str]:
    """(figure, caption) of one verdict's data; ("", reason) when there is nothing to draw."""
    from . import plots

    stored = store.load(v.samples)
    if stored is None:
        return "", "no stored data for this verdict"
    metric = clean_text(v.metric)
    unit_name, factor = _scale(v)
    thr = _num_or_none(v.threshold, factor)
    lo, hi, obs = (_num_or_none(x, factor) for x in (v.lower, v.upper, v.observed))
    parts = stored.parts
    compare = bool(v.compare)
    series: list[Any] = []
    caption = ""
    if compare and len(parts) == 2:
        # the statistic is a ratio/difference of the two runs: draw both runs on the metric's own axis
        runs = [clean_text(r) for r in v.runs] or ["", ""]
        unit_name, factor = _metric_unit(metric)
        thr = lo = hi = obs = None
        for i, (part, color) in enumerate(zip(parts, (plots.BLUE, plots.GREY), strict=True)):
            vals = _values(part, metric)
            if vals is not None:
                series.append(plots.Series(vals / factor, "treatment" if i == 0 else "reference", color))
        names = (f" (<code>{_e(runs[0])}</code>)", f" (<code>{_e(runs[-1])}</code>)") if v.runs else ("", "")
        caption = (f"treatment{names[0]} in blue vs reference{names[1]} in grey; "
                   f"the gate's statistic is their {_e(v.compare)}, shown in the table")
    else:
        vals = _values(stored.data, metric)
        if vals is not None:
            series.append(plots.Series(vals / factor if factor != 1 else vals, "this run", plots.BLUE))  # (x / 1 is x)
        base = v.vs_baseline
        if base is not None and base.baseline_run:
            rows = store.history(gate=clean_text(v.gate), run_id=clean_text(base.baseline_run))
            bstored = store.load(rows[-1]["samples"]) if rows else None
            bvals = _values(bstored.data, metric) if bstored is not None else None
            if bvals is not None:
                series.append(plots.Series(bvals / factor, "baseline", plots.GREY))
                caption = f"baseline run <code>{_e(base.baseline_run)}</code> overlaid in grey"
    if not series:
        if obs is None:
            return "", "no per-request distribution"
        return (plots.interval([("this run", obs, lo, hi)], unit_name, threshold=thr),
                "rate or single value: observed with its bounds")
    label = f"{clean_text(v.statistic)}"
    return plots.distribution(series, unit_name, threshold=thr, lower=lo, upper=hi, observed=obs,
                              stat_label=label), caption


def _metric_unit(metric: str) -> tuple[str, float]:
    from ..config.metrics import lookup
    from ..config.units import DIMENSION_DEFAULT_UNIT, unit

    m = lookup(metric)
    name = DIMENSION_DEFAULT_UNIT.get(m.dimension if m else "number", "")
    return name, unit(name).factor


def _run_key(r: Any) -> tuple[Any, ...]:
    cols = r.columnar() if hasattr(r, "columnar") else None
    return (r.start_ns, r.end_ns, len(cols) if cols is not None else len(r.records), str(r.engine_info.get("name", "")))


def _run_figure(r: Any) -> str:
    import numpy as np

    from ..load import metrics as m
    from . import plots

    cols = r.columnar() if hasattr(r, "columnar") else None
    if cols is not None:  # a columnar run (load/columns.py): its arrays, no record made
        rows = np.flatnonzero(cols.successful)
        if not rows.size:
            return ""
        sent = cols.sent_ns[rows]
        first, last = cols.first_chunk_ns(rows), cols.last_chunk_ns(rows)
        t0 = int(sent.min())
        itl = _itl_points(cols, rows, t0)
        return plots.over_time(((sent - t0) / 1e9, (first - sent) / 1e6), itl[:2],
                               ((first - sent) / 1e6, (last - first) / 1e6), itl_n=itl[2])
    ok = m.successful(r.records)
    if not ok:
        return ""
    # in numpy: a 100k-request run has 3 M chunk times (python floats of them: ~200 MB and seconds)
    sent = np.fromiter((x.sent_ns for x in ok), np.int64, len(ok))
    flat, starts, lens = m.chunk_times(ok)
    first, last = flat[starts], flat[starts + lens - 1]
    t0 = int(sent.min())
    inside = np.ones(max(flat.size - 1, 0), dtype=bool)  # consecutive chunks of one request
    inside[starts[1:] - 1] = False
    itl_t = (flat[1:][inside] - t0) / 1e9
    itl_v = np.diff(flat)[inside] / 1e6
    ttft = ((sent - t0) / 1e9, (first - sent) / 1e6)
    dec = ((first - sent) / 1e6, (last - first) / 1e6)
    return plots.over_time(ttft, (itl_t, itl_v), dec)  # type: ignore[arg-type]


def _itl_points(cols: Any, rows: Any, t0: int) -> tuple[Any, Any, int]:
    """(arrival time in run (s), ITL (ms), how many gaps in all) of the gaps the ITL plot draws (an
    even selection, plots.MAX_POINTS, of the gaps of ``rows`` in order, each request's in chunk
    order): the same numbers as from every gap, without a full-size array of them (31M at 1M requests)."""
    import numpy as np

    from . import plots

    per = np.maximum(cols.n_chunks[rows] - 1, 0)
    ends = np.cumsum(per)  # gaps up to and including each row's
    n = int(ends[-1]) if ends.size else 0
    if n == 0:
        return np.zeros(0), np.zeros(0), 0
    g = np.arange(n) if n <= plots.MAX_POINTS else np.unique(np.linspace(0, n - 1, plots.MAX_POINTS).astype(int))
    r = np.searchsorted(ends, g, side="right")  # the row of gap g
    at = cols.offsets[rows[r]] + (g - (ends[r] - per[r])) + 1  # the chunk it ends at
    end, prev = cols.chunk_ns[at], cols.chunk_ns[at - 1]
    return (end - t0) / 1e9, (end - prev) / 1e6, n


def cards(entry: Mapping[str, Any], index: int, store: Store | None) -> str:
    """One card per verdict: its summary and its distribution (or the interval sketch)."""
    out = []
    for name, v in _failing_first(verdicts_of(entry)):
        cls = VERDICT_CLASS.get(v.outcome, "bad")
        fig, caption = ("", "")
        if store is not None:
            try:
                fig, caption = _distribution(v, store)
            except Exception as e:  # a plot must never cost the report
                fig, caption = "", f"plot failed: {_e(type(e).__name__)}: {_e(e)}"
        if not fig:
            fig = interval_svg(v) + (f'<div class="summary">{caption}</div>' if caption and store is not None else "")
            caption = ""
        fig += _sweep(v)
        out.append(
            f'<div class="card {cls}" id="{_gate_id(index, name)}"><h4>{_e(name)} '
            f'<span class="{cls}">{_e(v.outcome)}</span></h4>'
            f'<div class="summary">{_e(v.summary)}</div>{fig}'
            + (f'<div class="summary">{caption}</div>' if caption else "") + "</div>"
        )
    return f'<h3>Distributions</h3><div class="cards">{"".join(out)}</div>' if out else ""


def _sweep(v: VerdictRecord) -> str:
    """A capacity verdict's latency-vs-load and Pareto plots (its ``curve``), "" for other verdicts."""
    if not v.curve:
        return ""
    from .sweep_plots import limits_of, sweep_figure

    try:
        fig = sweep_figure(list(v.curve), unit=clean_text(v.unit) or "concurrent requests", limits=limits_of(v))
    except Exception as e:  # a plot must never cost the report
        return f'<div class="summary">sweep plot failed: {_e(type(e).__name__)}: {_e(e)}</div>'
    return (fig + '<div class="summary">load sweep: latency vs load per level (dashed P50, solid P99; dotted: '
            'SLO limits) and achieved throughput vs P99 TTFT (the Pareto front joined)</div>') if fig else ""


def runs_section(selected: list[tuple[str, Mapping[str, Any]]], store: Store) -> str:
    """Per stored load run: TTFT/ITL over time and the decomposition; engines and counters."""
    seen: dict[tuple[Any, ...], tuple[Any, list[str]]] = {}
    for _, entry in selected:
        for v in verdicts_of(entry):
            stored = store.load(v.samples)
            for r in stored.runs if stored is not None else []:
                key = _run_key(r)
                seen.setdefault(key, (r, []))[1].append(clean_text(v.gate))
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
        cols = r.columnar() if hasattr(r, "columnar") else None
        if cols is not None:
            n_ok, n_err = int((cols.measured & cols.ok).sum()), int((cols.measured & ~cols.ok).sum())
        else:
            n_ok = sum(1 for x in r.records if not x.warmup and x.error is None)
            n_err = sum(1 for x in r.records if not x.warmup and x.error is not None)
        cards.append(
            f'<div class="card none"><h4>run {i + 1}: engine <code>{_e(name)}</code></h4>'
            f'<div class="summary">gates {_e(", ".join(dict.fromkeys(gates)))} &middot; {n_ok} requests ok, '
            f"{n_err} failed &middot; {(r.end_ns - r.start_ns) / 1e9:.2f} s</div>"
            + "".join(f'<div class="summary">{_e(clean_text(n))}</div>' for n in r.counter_notes[:8])
            + f"{fig}</div>"
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


def run_label(row: Mapping[str, Any]) -> str:
    """``12-01 21:10 ab12cd3``: a stored run on a trend chart's x axis (its start, its commit)."""
    when = str(row.get("started") or row.get("time") or "")
    when = when[5:16].replace("T", " ") if len(when) >= 16 else when
    commit = str(row.get("git_commit") or "")[:7]
    return " ".join(x for x in (when, commit) if x) or str(row.get("run_id", ""))[:15]


def trend_section(selected: list[tuple[str, Mapping[str, Any]]], store: Store) -> str:
    from . import plots

    cards = []
    for g in verdict_values(selected, "gate"):
        rows = [r for r in store.history(gate=g) if r["outcome"] != "error" and r["observed"] is not None][-50:]
        if len(rows) < 2:
            continue
        last = VerdictRecord.read(rows[-1]["verdict"])
        unit_name, factor = _scale(last)
        pts = [(r["observed"] / factor, _num_or_none(r["lower"], factor), _num_or_none(r["upper"], factor)) for r in rows]
        try:
            fig = plots.trend(pts, unit_name, threshold=_num_or_none(last.threshold, factor),
                              outcomes=[r["outcome"] for r in rows], labels=[run_label(r) for r in rows])
        except Exception as e:  # never fatal
            fig = f'<div class="summary">plot failed: {_e(type(e).__name__)}: {_e(e)}</div>'
        cards.append(f'<div class="card none"><h4>{_e(g)}</h4><div class="summary">{len(rows)} stored runs, '
                     f"{_e(rows[0]['time'])} to {_e(rows[-1]['time'])}</div>{fig}</div>")
    if not cards:
        return ""
    return f'<section><h2>Trend</h2><div class="cards">{"".join(cards)}</div></section>'
