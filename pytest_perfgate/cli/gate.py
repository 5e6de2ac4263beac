"""``perfgate gate RESULTS... [--run NAME=FILE ...] [--thresholds FILE] [--out DIR] [--warmup K]
[--format F]``: the gates of thresholds.toml decided on another tool's benchmark results.

Each file is read by its format's reader (:mod:`pytest_perfgate.imports`; detected or ``--format``),
each gate decided on the run(s) it names (:mod:`.gate_runs`) with the fixed-sample verdict at its
confidence (a file is one look: no sequential stopping), through the same :class:`Perfgate` as a
test, so every verdict is stored, re-evaluable, compared with ``--baseline`` and written by every
writer (gates.xml, decisions.json, summary.md, report.html, history.sqlite). Prints the pytest
session's gate table and failing-gate lines. Exit 0 all passed; 1 a gate failed or errored, or was
inconclusive under ``inconclusive = "fail"``; 4 a bad file or a usage error (the other files are
still decided and written) or an invalid thresholds.toml.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..runtime.redaction import printable
from .gate_runs import Inputs, plan, read_inputs

OK, FAILED, BAD = 0, 1, 4
LINES = 5  # a failing gate's message, as pytest's short failures


def extend(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "gate", help="decide the gates of thresholds.toml on benchmark results (vllm bench, AIPerf, guidellm, ...)",
        description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("results", nargs="*", metavar="RESULTS", help="result files or folders (run named by the file's stem)")
    p.add_argument("--run", action="append", default=[], metavar="NAME=FILE",
                   help="a named run: the name a gate's engine = or runs = [...] uses")
    p.add_argument("--thresholds", metavar="FILE", help="thresholds.toml (default: ./thresholds.toml)")
    p.add_argument("--out", default="perfgate-results", metavar="DIR", help="results directory (default perfgate-results)")
    p.add_argument("--warmup", type=int, default=0, metavar="K", help="drop the first K requests of each run (by send time)")
    p.add_argument("--format", metavar="F", help="the files' format (default: detected); see --list-formats")
    p.add_argument("--baseline", metavar="REF", help="compare each gate with a stored run, as --perfgate-baseline "
                   "(a run id, 'latest', a results directory); a regression beyond the gate's tolerance fails it")
    p.add_argument("--list-formats", action="store_true", help="print the known formats and exit")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="each failing gate's full summary (bounds, dependence, projection) as pytest -v prints it")
    p.set_defaults(func=run)


class BadBaseline(ValueError):
    """``--baseline`` names nothing usable."""


def run(ns: argparse.Namespace) -> int:
    from ..imports import formats
    from .commands import _thresholds

    if ns.list_formats:
        for f in formats().values():
            print(f"{f.name:16} {f.title}")
        return OK
    if not ns.results and not ns.run:
        _say("perfgate gate: no results given (files, or --run NAME=FILE)", err=True)
        return BAD
    if ns.warmup < 0:
        _say("perfgate gate: --warmup must be >= 0", err=True)
        return BAD
    from ..session.startup import unwritable

    th = _thresholds(ns.thresholds)
    out = Path(ns.out)
    problem = unwritable(out)  # a read-only folder, a link planted in it: nothing is decided
    if problem:
        _say(f"perfgate gate: --out {out}: {problem}", err=True)
        return BAD
    got = read_inputs(list(ns.results), list(ns.run), ns.format, ns.warmup)
    todo = plan(th.gates, got)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            verdicts, rows, done = _decide(th, todo, out, ns.baseline)
    except BadBaseline as e:  # a --baseline that names nothing usable
        _say(f"perfgate gate: --baseline {ns.baseline}: {e}", err=True)
        return BAD
    for w in dict.fromkeys(str(w.message).removeprefix("perfgate: ") for w in caught):
        if not any(e in w for e in done.errors):  # a write that failed is said once, below
            _say(f"perfgate gate: {w}", err=True)
    _print(verdicts, rows, got, done.written, th, verbose=bool(getattr(ns, "verbose", False)))
    for line in done.errors:  # what could not be written; everything else was (pytest's recorder does the same)
        _say(f"perfgate gate: could not write results: {line}", err=True)
    if got.problems or done.errors:
        return BAD
    inconclusive = th.settings.inconclusive
    bad = [v for v in verdicts if v.outcome in ("fail", "error") or (v.outcome == "inconclusive" and inconclusive == "fail")]
    return FAILED if bad or not verdicts else OK


@dataclass
class Written:
    written: list[Path] = field(default_factory=list)  # the results files written
    errors: list[str] = field(default_factory=list)  # one line each: the path and the cause (exit 4)


def _decide(th: Any, todo: list[tuple[Any, Any, str]], out: Path, baseline: str | None = None
            ) -> tuple[list[Any], list[dict[str, Any]], Written]:
    """Every (gate, data, label) evaluated and recorded; the results directory written. A file that
    cannot be written (a full disk, a read-only folder, a lock that cannot be taken) is one line in
    ``errors`` and the others are still written."""
    from ..session.perfgate import Perfgate, RunState, verdict_properties
    from ..session.startup import live_store
    from ..store import decisions, history
    from ..store.decisions import now_iso
    from ..verdicts.rules import resolve_confidence
    from ..verdicts.verdict import Verdict

    done = Written()
    if not todo:
        return [], [], done
    st = RunState.start(th, out, th.settings.inconclusive, Path.cwd())
    try:
        live = live_store(st, Path.cwd(), SimpleNamespace(perfgate_baseline=baseline))
    except ValueError as e:
        raise BadBaseline(str(e)) from None
    started = now_iso()
    verdicts = []
    for g, data, label in todo:
        test = f"perfgate gate {_files(data)}"

        def record(v: Any, engines: list[Any], extras: Mapping[str, Any], test: str = test) -> None:
            d, _ = verdict_properties(v, engines, {**live.extras(v), **extras})
            st.add_verdict(test, d)

        pg = Perfgate(st, (g.name,), record, None, store=live.hook(test))
        try:
            verdicts.append(pg.evaluate(data, g.name, note=_more(data), label=label))
        except ValueError as e:  # (a SampleError) this gate cannot be computed on this run: its error; the others decided
            v = Verdict.error(g, str(e), confidence=resolve_confidence(g, th))
            record(v, [], {"label": label} if label else {})
            verdicts.append(v)
    try:
        doc = st.flush()
        done.written.append(out / decisions.FILENAME)
    except OSError as e:  # a full disk, a read-only folder, a lock that cannot be taken
        done.errors.append(_failed(out / decisions.FILENAME, e))
        doc = decisions.merged({}, th, st.phase_entries())
    done.errors += live.errors  # gate data not stored
    kept: list[Path] = []
    try:
        live.record_history(st.all_verdicts(), started=started, commit=st.commit, engines=[])
        if not live.shared:
            kept.append(history.path_of(out))
    except (OSError, ValueError, sqlite3.Error) as e:
        done.errors.append(_failed(history.path_of(out), e))
    from ..writers import write_all

    phases = sorted({v["phase"] for v in st.all_verdicts()})
    try:
        done.written += write_all(doc, out, phases=phases, inconclusive=st.inconclusive, final=True)
    except Exception as e:  # every writer was tried; those that wrote are kept
        done.written += list(getattr(e, "written", []))
        done.errors.append(f"{out}: {e}")
    done.written += kept
    return verdicts, st.all_verdicts(), done


def _failed(where: Path, e: BaseException) -> str:
    """``PATH: cause`` of a write that failed (the file the error names, else ``where``)."""
    name = getattr(e, "filename", None) or where
    cause = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return f"{name}: {cause}" if str(name) not in cause else cause


def _runs(data: Any) -> list[Any]:
    """The imported runs behind a gate's data: one, a pair, or a sweep's levels."""
    parts = data if isinstance(data, tuple) else (data,)
    return [r for p in parts for r in (p.results.values() if hasattr(p, "results") else (p,))]


def _files(data: Any) -> str:
    return " vs ".join(dict.fromkeys(r.source.path for r in _runs(data)))


def _more(data: Any) -> Any:
    """The note of an inconclusive verdict: the requests that would decide it, in the tool's words."""
    run = _runs(data)[0]

    def note(v: Any) -> str:
        if v.outcome != "inconclusive" or not v.needed or hasattr(data, "results"):
            return ""
        n = run.requests_for(int(v.needed), int(v.n))
        if "independent" in (v.details or {}):  # dependent runs without a bound: the count gives a bound, no more
            return (f"{run.source.rerun(n)} (each run) is the least that could decide it: a bound first exists "
                    "there if this run's dependence held (a file is one look: no sequential stopping)")
        return (f"{run.source.rerun(n)} would decide it if this run's distribution held "
                "(a file is one look: no sequential stopping)")

    return note


def _tool_terms(v: Any) -> list[str]:
    """The tool's own command that would decide an inconclusive gate (``vllm bench serve --num-prompts 59
    would decide it ...``), from the verdict's note."""
    if v.outcome != "inconclusive":
        return []
    return [part.strip() for part in str(v.note).split(";") if "would decide it" in part or "could decide it" in part][:1]


def _print(verdicts: list[Any], rows: list[dict[str, Any]], got: Inputs, written: list[Path], th: Any, *,
           verbose: bool = False) -> None:
    from ..verdicts.review import review_lines
    from ..verdicts.wording import plan_line
    from ..writers.table import gate_table

    for problem in got.problems:
        _say(f"perfgate gate: {problem}", err=True)
    if verdicts:
        _say("=" * 30 + " perfgate " + "=" * 30)
        for line in gate_table(rows):
            _say(line)
    failing = [v for v in verdicts if v.outcome in ("fail", "error", "invalid", "inconclusive")]
    if failing:
        _say("")
    for v in failing:  # as pytest's failing-gate lines: the reviewer's lines (all of it with -v), the fallback
        lines = v.message().splitlines() if verbose else [*review_lines(v), *_tool_terms(v), v.fallback_text()]
        lines = [ln for ln in lines if ln]
        if len(lines) > LINES:
            lines = [*lines[: LINES - 1], f"... ({len(lines) - LINES + 1} more lines)"]
        for ln in lines:
            _say(ln)
    triggered = sorted({f for v in verdicts if v.outcome == "fail" for f in v.fallbacks})
    if triggered:
        _say("\ntriggered fallbacks:")
        for f in triggered:
            _say("  " + plan_line(th.fallbacks[f]))
    if got.skipped:
        _say(f"\nnot decided here: {'; '.join(got.skipped)}")
    if verdicts:
        passed = sum(v.outcome == "pass" for v in verdicts)
        _say(f"\n{len(verdicts)} gate verdict(s): {passed} passed, {len(verdicts) - passed} not")
    for p in written:
        _say(f"perfgate: wrote {p}")


def _say(text: str, err: bool = False) -> None:
    """A line for the terminal: names from files (a file name with ESC, a bidi override) shown escaped."""
    print("\n".join(printable(ln, fold=False) for ln in text.split("\n")), file=sys.stderr if err else sys.stdout)
