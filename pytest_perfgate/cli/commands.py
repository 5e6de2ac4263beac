"""The results commands of ``perfgate``: check, gates, show, diff, history, report, evaluate.

Exit codes (all commands): 0 success (gates pass, no regression); 1 a gate fails, is inconclusive
or errored, or ``diff`` found a regression; 2 bad command line (argparse); 3 nothing to read (no
results, history, run, gate or data file); 4 invalid thresholds.toml (as pytest's usage error).
``--json`` prints one JSON document on stdout (shapes in docs/reports.md); messages go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..verdicts.record import VerdictRecord
from .arguments import thresholds_arguments, trend_options

OK, FAILED, USAGE, NOT_FOUND, BAD_CONFIG = 0, 1, 2, 3, 4
DEFAULT_RESULTS = "perfgate-results"


class CommandError(Exception):
    def __init__(self, message: str, code: int = NOT_FOUND) -> None:
        super().__init__(message)
        self.code = code


def _print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, default=str, allow_nan=False))


def _thresholds(path: str | None, fallback: str | None = None) -> Any:
    from ..config import ConfigError, load_thresholds
    from ..session.features import register_features

    register_features()  # the feature packages' Methods, before a command evaluates stored data

    candidates = [path] if path else [p for p in (fallback, "thresholds.toml") if p]
    for c in candidates:
        p = Path(c)
        if p.exists() or path:
            try:
                return load_thresholds(p)
            except FileNotFoundError:
                raise CommandError(f"{p}: thresholds file not found", BAD_CONFIG) from None
            except ConfigError as e:
                raise CommandError(str(e), BAD_CONFIG) from None
    raise CommandError("no thresholds.toml here; give --thresholds PATH", BAD_CONFIG)


# ---------------------------------------------------------------- check, gates
def _check(ns: argparse.Namespace) -> int:
    th = _thresholds(ns.thresholds)
    _check_engines(th)
    _check_workers(th)
    info = {"ok": True, "path": str(th.path), "sha256": th.sha256, "phases": list(th.phases),
            "gates": len(th.gates), "fallbacks": len(th.fallbacks), "engines": list(th.engines)}
    if ns.json:
        _print_json(info)
    else:
        print(f"{th.path}: OK: {len(th.phases)} phases, {len(th.gates)} gates, {len(th.fallbacks)} fallbacks, "
              f"{len(th.engines)} engines")
    return OK


def _check_engines(th: Any) -> None:
    """The ``[engines.*]`` tables: kinds and argument names (engines/check.py); exit 4 on a problem."""
    from ..engines.check import engine_problems

    problems, notes = engine_problems(th)
    for n in notes:
        print(f"perfgate: note: {n}", file=sys.stderr)
    if problems:
        raise CommandError("\nperfgate: ".join(problems), BAD_CONFIG)


def _check_workers(th: Any) -> None:
    """``[perfgate] workers`` on a Ray cluster where Ray is not installed: a note (pytest stops at start)."""
    import importlib.util

    w = th.settings.workers
    if isinstance(w, str) and w.startswith("ray://") and importlib.util.find_spec("ray") is None:
        print(f"perfgate: note: {th.path}: [perfgate] workers = {w}: Ray is not installed here, so pytest stops at "
              "start: pip install 'pytest-perfgate[ray]'", file=sys.stderr)


def _gate_row(g: Any) -> dict[str, Any]:
    return {
        "gate": g.name, "phase": g.phase, "metric": g.metric, "statistic": g.statistic.text,
        "compare": g.compare, "direction": g.direction,
        "threshold": g.threshold.display() if g.threshold else None,
        "unit": g.unit or (g.threshold.unit.name if g.threshold else ""),
        "baseline": g.baseline.display() if g.baseline else None, "regression": g.regression,
        "fallbacks": list(g.fallbacks),
    }


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _gates(ns: argparse.Namespace) -> int:
    th = _thresholds(ns.thresholds)
    rows = [_gate_row(g) for g in th.gates.values()]
    if ns.json:
        _print_json({"path": str(th.path), "gates": rows,
                     "fallbacks": {n: {"title": f.title, "cost": f.cost, "doc": f.doc} for n, f in th.fallbacks.items()}})
        return OK
    print(_table(["gate", "phase", "metric", "threshold", "unit", "regression", "fallbacks"], [
        [r["gate"], r["phase"], f"{(r['compare'] + ' of ') if r['compare'] else ''}{r['metric']} {r['statistic']}",
         f"{r['direction']} {r['threshold']}" if r["direction"] else "recorded", r["unit"] or "-",
         f"{r['regression']:.0%}" if r["regression"] is not None else "-", ", ".join(r["fallbacks"]) or "-"]
        for r in rows]))
    return OK


# ---------------------------------------------------------------- show
def _decisions(results: str) -> dict[str, Any]:
    from ..store.decisions import read_decisions

    path = Path(results)
    if not (path / "decisions.json").exists():
        raise CommandError(f"{path}: no decisions.json (run pytest with perfgate first, or give the results directory)")
    try:
        return read_decisions(path)
    except ValueError as e:
        raise CommandError(str(e)) from None


def _show(ns: argparse.Namespace) -> int:
    doc = _decisions(ns.results)
    phases: dict[str, Any] = {}
    for name, e in doc.get("phases", {}).items():
        vs = [VerdictRecord.read(v) for v in e.get("verdicts", []) if isinstance(v, Mapping)]
        phases[name] = {
            "outcome": e.get("outcome"), "run_id": e.get("run_id"), "timestamp": e.get("timestamp"),
            "git_commit": e.get("git_commit"),
            "verdicts": [{"gate": v.gate, "outcome": v.outcome, "summary": v.summary} for v in vs],
            "triggered_fallbacks": [{"name": f, **{k: (doc.get("fallbacks", {}).get(f) or {}).get(k) for k in ("title", "cost", "doc")}}
                                    for f in e.get("triggered_fallbacks", [])],
        }
    if ns.json:
        _print_json({"results": ns.results, "phases": phases})
        return OK
    for name, p in phases.items():
        print(f"phase {name}: {str(p['outcome']).upper()} (run {p['run_id']}, {p['timestamp']})")
        order = sorted(p["verdicts"], key=lambda v: v["outcome"] in ("pass", "recorded"))
        for v in order:
            print(f"  [{v['outcome']}] {v['summary']}")
        for f in p["triggered_fallbacks"]:
            print(f"  -> fallback {f['name']}: {f['title'] or ''}" + (f" [cost: {f['cost']}]" if f["cost"] else "")
                  + (f" ({f['doc']})" if f["doc"] else ""))
    if not phases:
        print("no phase results recorded")
    return OK


# ---------------------------------------------------------------- history
def _history_at(ns: argparse.Namespace) -> Any:
    """The history a command reads: ``--history``, else ``$PERFGATE_HISTORY``, else ``[perfgate]
    history`` of the thresholds file (``--thresholds``, else ./thresholds.toml, when it loads), else
    the results directory's history.sqlite (store/backend.py)."""
    from ..store.backend import HistoryError, choose

    setting, base = None, None
    try:
        th = _thresholds(getattr(ns, "thresholds", None))
        setting, base = th.settings.history, Path(th.path).parent
    except CommandError:
        pass  # no usable thresholds file: no setting from it
    try:
        return choose(getattr(ns, "history", None), setting, Path(ns.results), base=base, option_name="--history")
    except HistoryError as e:
        raise CommandError(str(e), USAGE) from None


def _history_path(results: str, at: Any = None) -> Any:
    from ..store import history
    from ..store.backend import label

    p = history.path_of(Path(results)) if at is None else at
    if not history.exists(p):
        raise CommandError(f"{label(p)}: no run history (no perfgate run has written {results})")
    return p


def _history(ns: argparse.Namespace) -> int:
    from ..store import history
    from ..store.backend import errors
    from ..store.export import export

    at = _history_at(ns)
    if ns.changes:  # change points over commits (history_changes.py)
        from .history_changes import changes

        return _guarded(changes, ns, _history_path(ns.results, at))
    if ns.export_to or ns.import_from:
        return _transfer(ns, at)
    try:
        rows = history.verdicts(_history_path(ns.results, at), gate=ns.gate, limit=ns.limit)
    except errors() as e:
        raise CommandError(str(e)) from None
    if ns.gate and not rows:
        raise CommandError(f"no stored verdict of gate {ns.gate!r} in {ns.results}")
    fmt = "json" if ns.json else ns.format
    if fmt in ("bencher", "github-smaller", "github-bigger"):
        latest_run = rows[-1]["run_id"] if rows else None
        vs = [{**r["verdict"], "run_id": r["run_id"]} for r in rows if ns.all or r["run_id"] == latest_run]
        _print_json(export(fmt, vs))
        return OK
    if fmt == "json":
        from ..store.backend import label

        _print_json({"results": ns.results, "history": label(at), "verdicts": [
            {k: r[k] for k in ("run_id", "started", "git_commit", "time", "phase", "gate", "test", "outcome", "observed",
                               "lower", "upper", "n", "unit", "threshold", "direction", "method", "confidence", "samples")}
            for r in rows]})
        return OK
    shown = [VerdictRecord.read(r["verdict"]) for r in rows]
    print(_table(["time", "run", "commit", "gate", "outcome", "observed", "bounds", "threshold"], [
        [r["time"], r["run_id"], (r["git_commit"] or "-")[:10], r["gate"], r["outcome"], v.shown("observed") or "-",
         f"{v.shown('lower') or ''} - {v.shown('upper') or ''}",
         f"{r['direction']} {v.shown('threshold') or ''}" if r["direction"] else "recorded"]
        for r, v in zip(rows, shown, strict=True)]))
    return OK


def _transfer(ns: argparse.Namespace, at: Any) -> int:
    """``--export DEST``: this history's runs into DEST; ``--import SRC``: SRC's runs into this history."""
    from ..store import history
    from ..store.backend import check_location, errors, label
    from ..store.transfer import copy

    if ns.export_to and ns.import_from:
        raise CommandError("give --export or --import, not both", USAGE)
    try:
        other = check_location(ns.export_to or ns.import_from, "--export" if ns.export_to else "--import")
        src, dst = (at, other) if ns.export_to else (other, at)
        if ns.import_from and not history.exists(src):
            raise CommandError(f"--import {label(src)}: no run history there (nothing to import)")
        _history_path(ns.results, src)  # a missing source file is named as such
        done = copy(src, dst)
    except errors() as e:
        raise CommandError(str(e)) from None
    if ns.json:
        _print_json({"from": label(src), "to": label(dst), **done.to_dict()})
    else:
        print(f"{label(src)} -> {label(dst)}: {done.seen_runs} runs read, {done.runs} new runs, "
              f"{done.verdicts} verdicts and {done.files} data files ({done.bytes / 1e6:.1f} MB) added")
    return OK


# ---------------------------------------------------------------- evaluate, diff
def _run_verdict(results: str, run_ref: str, gate: str, *, errors: bool = False, at: Any = None) -> dict[str, Any]:
    from ..store import history
    from ..store.backend import label
    from ..store.baseline import find, resolve

    db = _history_path(results, at)
    try:
        ref = resolve(run_ref, Path(results), Path.cwd(), db)
        row = find(ref, gate, errors=errors)
        if row is not None and ref.results is not None and row["samples"] \
                and not (ref.results_dir / row["samples"]).exists():  # a shared history: its data files here
            history.materialize(ref.db, row["run_id"], ref.results_dir)
    except (history.HistoryError, OSError) as e:
        raise CommandError(str(e).replace("--perfgate-baseline", "run")) from None
    if row is None:
        raise CommandError(f"no stored data of gate {gate!r} for {ref.label} in {label(db)}")
    return {**row, "results_dir": str(ref.results_dir), "history_at": ref.db}


def _stored_thresholds(ns: argparse.Namespace, row: Mapping[str, Any]) -> Any:
    from ..store import history

    run = history.run(row.get("history_at") or history.path_of(Path(row["results_dir"])), row["run_id"])
    th = _thresholds(ns.thresholds, run.thresholds_file)
    if run.thresholds_sha256 and th.sha256 != run.thresholds_sha256:
        print(f"perfgate: note: {th.path} changed since run {run.run_id} (sha256 differs); using it as it is now",
              file=sys.stderr)
    return th


def _evaluate(ns: argparse.Namespace) -> int:
    from ..store.records import StoreError, load, reevaluate, same_verdict

    at = _history_at(ns)
    row = _run_verdict(ns.results, ns.run, ns.gate, errors=True, at=at)
    th = _stored_thresholds(ns, row)
    try:
        stored = load(Path(row["results_dir"]) / row["samples"])
    except StoreError as e:
        raise CommandError(str(e)) from None
    gate = th.gate(ns.gate)
    v = reevaluate(stored, gate, th)
    live = VerdictRecord.read(row["verdict"])
    vs_base = live.vs_baseline
    if vs_base is not None and vs_base.baseline_run:
        # the live verdict was compared with a baseline run: compare again, the same way
        from ..store.baseline import apply, compare
        from ..verdicts.rules import resolve_confidence

        base = _run_verdict(ns.results, vs_base.baseline_run, ns.gate, at=at)
        c = resolve_confidence(gate, th, stored.confidence)
        cmp = compare(gate, stored.data, load(Path(base["results_dir"]) / base["samples"]).data, confidence=c,
                      thresholds=th, baseline_run=base["run_id"], baseline_label=vs_base.baseline_label)
        if cmp is not None:
            v = apply(v, cmp, gate)
    d = v.to_dict()
    matches = same_verdict(d, live)
    if ns.json:
        _print_json({"run_id": row["run_id"], "gate": ns.gate, "samples": row["samples"], "verdict": d,
                     "live": {"outcome": live.outcome, "observed": live.observed, "lower": live.lower,
                              "upper": live.upper, "n": live.n}, "matches": matches})
    else:
        print(v.summary())
        print(f"run {row['run_id']}, data {row['samples']}: "
              + ("same verdict as the live run" if matches else
                 f"DIFFERS from the live run ({live.outcome}: {live.summary})"))
    return OK if v.outcome in ("pass", "recorded") else FAILED


def _diff(ns: argparse.Namespace) -> int:
    from ..config.units import UnitError, parse_quantity
    from ..store.baseline import compare
    from ..store.records import StoreError, load

    tol: float | None = None
    if ns.tolerance is not None:
        try:
            tol = parse_quantity(ns.tolerance).base
        except UnitError as e:
            raise CommandError(f"--tolerance {ns.tolerance}: {e}", USAGE) from None
    from ..store import history
    from ..verdicts.rules import resolve_confidence

    at = _history_at(ns)
    db = _history_path(ns.results, at)
    gates = [ns.gate] if ns.gate else sorted({r["gate"] for r in history.verdicts(db)})
    out: list[dict[str, Any]] = []
    th = None
    for g in gates:
        try:
            a = _run_verdict(ns.results, ns.a, g, at=at)
            b = _run_verdict(ns.results, ns.b, g, at=at)
        except CommandError:
            if ns.gate:
                raise
            continue
        th = th or _stored_thresholds(ns, b)
        if g not in th.gates:
            continue
        gate = th.gates[g]
        try:
            da, db_ = load(Path(a["results_dir"]) / a["samples"]), load(Path(b["results_dir"]) / b["samples"])
        except StoreError as e:
            raise CommandError(str(e)) from None
        c = resolve_confidence(gate, th, db_.confidence)
        cmp = compare(gate, db_.data, da.data, confidence=c, thresholds=th, tolerance=tol,
                      baseline_run=a["run_id"], baseline_label=f"run {a['run_id']}")
        if cmp is not None:
            out.append({"run": b["run_id"], **cmp.to_dict()})
    if not out:
        raise CommandError(f"no gate with stored data in both {ns.a} and {ns.b}")
    regressed = [row for row in out if row["regressed"]]
    if ns.json:
        _print_json({"a": ns.a, "b": ns.b, "comparisons": out, "regressed": [row["gate"] for row in regressed]})
    else:
        for row in out:
            print(f"gate {row['gate']}: {row['text']}")
    return FAILED if regressed else OK


# ---------------------------------------------------------------- report
def _guarded(func: Any, ns: argparse.Namespace, db: Path) -> int:
    try:
        return int(func(ns, db))
    except ValueError as e:  # a bad --alpha, an unreadable history
        raise CommandError(str(e), USAGE if str(e).startswith("--") else NOT_FOUND) from None


def _report(ns: argparse.Namespace) -> int:
    from ..store.backend import use
    from ..writers import write_all

    # the history read: --history-from (here --history names the trend site's folder)
    at = _history_at(argparse.Namespace(**{**vars(ns), "history": ns.history_from}))
    if ns.history:  # the trend site of the history (history_changes.py)
        from .history_changes import site

        return _guarded(site, ns, _history_path(ns.results, at))
    doc = _decisions(ns.results)
    out = Path(ns.results)
    use(out, at)  # the trend plots read the history the runs went to
    # every writer (built in and entry points), report.html with its plots
    written = write_all(doc, out, inconclusive=ns.inconclusive, final=True)
    if ns.json:
        _print_json({"written": [str(p) for p in written]})
    else:
        for p in written:
            print(f"wrote {p}")
    return OK


# ---------------------------------------------------------------- parser
def add_commands(sub: Any) -> None:
    """Register the results commands on the ``perfgate`` subparsers."""

    def cmd(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--json", action="store_true", help="print JSON on stdout")
        p.set_defaults(func=func)
        return p

    p = cmd("check", "validate thresholds.toml with the plugin's messages (exit 0 valid, 4 invalid)", _check)
    thresholds_arguments(p)
    p = cmd("gates", "list the gates: thresholds, units, regression tolerance, fallbacks", _gates)
    thresholds_arguments(p)
    p = cmd("show", "the last decision per phase: verdicts and triggered fallback plans", _show)
    p.add_argument("results", nargs="?", default=DEFAULT_RESULTS, help=f"results directory (default: {DEFAULT_RESULTS})")
    p = cmd("history", "stored verdicts over time, or export them for dashboards", _history)
    p.add_argument("gate", nargs="?", default=None, help="only this gate")
    p.add_argument("--results", default=DEFAULT_RESULTS, help=f"results directory (default: {DEFAULT_RESULTS})")
    p.add_argument("--history", default=None, metavar="URL|PATH",
                   help="the history: a postgresql:// URL or a SQLite file (default: $PERFGATE_HISTORY, else "
                   "[perfgate] history, else history.sqlite in the results directory)")
    p.add_argument("--thresholds", default=None, help="thresholds file whose [perfgate] history to read (default: ./thresholds.toml)")
    p.add_argument("--limit", type=int, default=None, help="the last N verdicts")
    p.add_argument("--format", choices=("table", "json", "bencher", "github-smaller", "github-bigger"), default="table",
                   help="bencher: Bencher Metric Format; github-smaller/-bigger: github-action-benchmark "
                   "customSmallerIsBetter/customBiggerIsBetter (exports hold the latest run unless --all)")
    p.add_argument("--all", action="store_true", help="export every stored verdict, not only the latest run's")
    trend_options(p)
    p.add_argument("--changes", action="store_true", help="change points of each gate over commits on a branch "
                   "(last commit before, first after, size with its interval, confidence)")
    p.add_argument("--export", dest="export_to", metavar="DEST", default=None,
                   help="copy every run (verdicts and data files) into DEST: a postgresql:// URL or a SQLite file")
    p.add_argument("--import", dest="import_from", metavar="SRC", default=None,
                   help="copy every run of SRC (a postgresql:// URL, a SQLite file, a results directory's "
                   "history.sqlite with its data files) into this history")
    p = cmd("evaluate", "re-evaluate a gate from a run's stored data (no engine); exit 0 pass, 1 otherwise", _evaluate)
    p.add_argument("run", help="run id (or unique prefix), 'latest', a git ref, or a results directory")
    p.add_argument("gate", help="gate name")
    p.add_argument("--results", default=DEFAULT_RESULTS, help=f"results directory (default: {DEFAULT_RESULTS})")
    p.add_argument("--thresholds", default=None, help="thresholds file (default: the run's, else ./thresholds.toml)")
    p.add_argument("--history", default=None, metavar="URL|PATH",
                   help="the history: a postgresql:// URL or a SQLite file (default: $PERFGATE_HISTORY, else "
                   "[perfgate] history, else history.sqlite in the results directory)")
    p = cmd("diff", "compare run B with run A per gate (exact bound on the ratio); exit 1 on a regression", _diff)
    p.add_argument("a", help="baseline run: run id, 'latest', a git ref, or a results directory")
    p.add_argument("b", help="the run compared with A")
    p.add_argument("--gate", default=None, help="only this gate")
    p.add_argument("--tolerance", default=None, help="minimum relative change that counts, e.g. 5%% "
                   "(default: each gate's `regression`, else 0)")
    p.add_argument("--results", default=DEFAULT_RESULTS, help=f"results directory (default: {DEFAULT_RESULTS})")
    p.add_argument("--thresholds", default=None, help="thresholds file (default: run B's, else ./thresholds.toml)")
    p.add_argument("--history", default=None, metavar="URL|PATH",
                   help="the history: a postgresql:// URL or a SQLite file (default: $PERFGATE_HISTORY, else "
                   "[perfgate] history, else history.sqlite in the results directory)")
    p = cmd("report", "rebuild report.html, summary.md, gates.xml (and every added writer's report) from the stored results", _report)
    p.add_argument("results", nargs="?", default=DEFAULT_RESULTS, help=f"results directory (default: {DEFAULT_RESULTS})")
    p.add_argument("--inconclusive", choices=("fail", "warn"), default="fail")
    p.add_argument("--history", metavar="DIR", default=None, help="write the trend site instead: a page per gate "
                   "with every run over commits, its bounds, the threshold and the change points, per branch")
    p.add_argument("--history-from", dest="history_from", default=None, metavar="URL|PATH",
                   help="the history the trend plots and the trend site read (default: $PERFGATE_HISTORY, else "
                   "[perfgate] history of ./thresholds.toml, else history.sqlite in the results directory)")
    trend_options(p)


def run(ns: argparse.Namespace) -> int:
    """Run a parsed command; errors become a message on stderr (or JSON) and their exit code."""
    try:
        return int(ns.func(ns))
    except CommandError as e:
        if getattr(ns, "json", False):
            _print_json({"error": str(e), "exit_code": e.code})
        print(f"perfgate: {e}", file=sys.stderr)
        return e.code
