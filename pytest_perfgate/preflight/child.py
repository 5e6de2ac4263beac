"""The preflight's process boundary: vLLM's config build and attention-backend enumeration run in a
child process (``python -m pytest_perfgate.preflight``), never in the user's process.

Why: vLLM's C++ code can end a process in ways no ``except`` catches. On x86 CPUs without
AVX512-BF16 the CPU platform loads ``_C_AVX2``/``_C_AVX512``; anything that later imports
``vllm._C`` registers the same torch library twice: ``c10::Error`` -> ``std::terminate`` -> SIGABRT
(issue 38). So the child reports every result as an event line on stdout *as it goes*; the parent
(:func:`supervise`) keeps them, and when the child dies (a signal, an exit status, no event within
the step deadline) it records one ``crashed`` finding naming the unit (engine or plan variant), the
step it was in and the cause, then starts a fresh child that skips every unit already reported. So
one engine that takes vLLM down never hides what the preflight says of the others.

The deadline is a step's (``PERFGATE_PREFLIGHT_STEP_TIMEOUT`` seconds, default 600: vLLM's import
on a busy 2-core machine takes 20-60 s, one config build a few seconds).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from .build import CRASHED, STEP_BUILD, Finding

if TYPE_CHECKING:
    from ..config import Thresholds
    from . import Report

MARK = "@@perfgate-preflight "  # event lines start with it (vLLM may print to stdout too)
STEP_TIMEOUT_ENV = "PERFGATE_PREFLIGHT_STEP_TIMEOUT"
WORK_ENV = "PERFGATE_PREFLIGHT_WORK"  # the child's work folder, made and removed by the supervisor
DEFAULT_STEP_TIMEOUT = 600.0
START = "vLLM import"  # the step before the first unit's own


def step_timeout() -> float:
    try:
        return max(1.0, float(os.environ.get(STEP_TIMEOUT_ENV, DEFAULT_STEP_TIMEOUT)))
    except ValueError:
        return DEFAULT_STEP_TIMEOUT


def command(th: Thresholds, aliases: Mapping[str, str], embedded: bool, only: set[str] | None,
            skip: Sequence[str]) -> list[str]:
    """The child's command line."""
    return [sys.executable, "-m", "pytest_perfgate.preflight", str(th.path),
            *(f"--engine={r}={n}" for r, n in aliases.items()),
            *(f"--only={n}" for n in sorted(only or ())), *(["--only-none"] if only is not None and not only else []),
            *(f"--skip={u}" for u in skip), *(["--embedded"] if embedded else [])]


def _cause(rc: int | None, timed_out: float | None) -> str:
    if timed_out is not None:
        return f"no progress for {timed_out:g} s (killed; {STEP_TIMEOUT_ENV} sets the deadline)"
    assert rc is not None
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"the process was killed by {name}" + (" (vLLM's C++ code called abort)" if name == "SIGABRT" else "")
    return f"the process exited with status {rc}"


def _reader(stream: IO[str], q: queue.Queue[str | None]) -> None:
    for line in stream:
        q.put(line)
    q.put(None)


class _Child:
    """One child run: its events applied to ``report``; what it was doing when it ended."""

    def __init__(self, cmd: list[str], report: Report, progress: Callable[[str], None] | None) -> None:
        self.cmd, self.report, self.progress = cmd, report, progress
        self.unit, self.step = "", START
        self.done: list[str] = []
        self.ended = False
        self.tail: list[str] = []

    def apply(self, ev: Mapping[str, Any]) -> None:
        kind = ev.get("ev")
        if kind == "step":
            self.unit, self.step = str(ev["unit"]), str(ev["step"])
            if self.progress and self.step == STEP_BUILD:
                self.progress(f"preflight: building [engines.{self.unit}] (a child process) ...")
        elif kind == "finding":
            self.report.findings.append(Finding(**ev["f"]))
        elif kind == "built":
            self.report.built.append(str(ev["text"]))
        elif kind == "skipped":
            self.report.skipped.append(str(ev["text"]))
            self.done.append(str(ev["unit"]))
        elif kind == "done":
            self.done.append(str(ev["unit"]))
            self.unit, self.step = "", "between engines"
        elif kind == "end":
            self.ended = True

    def run(self, deadline: float) -> tuple[int | None, float | None]:
        """(exit status, None) or (None, deadline) when it made no progress in time."""
        # the child's work folder is the supervisor's: a child killed mid-build (SIGABRT, the deadline)
        # runs no cleanup of its own, and its engine configs stayed in /tmp, one folder a crash
        work = tempfile.mkdtemp(prefix="perfgate-preflight-")
        try:
            return self._run(deadline, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _run(self, deadline: float, work: str) -> tuple[int | None, float | None]:
        cmd = self.cmd  # an argument list, never a shell
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                             start_new_session=True, env={**os.environ, WORK_ENV: work})
        q: queue.Queue[str | None] = queue.Queue()
        assert p.stdout is not None and p.stderr is not None
        threading.Thread(target=_reader, args=(p.stdout, q), daemon=True).start()
        err: list[str] = []
        te = threading.Thread(target=lambda: err.extend(p.stderr or ()), daemon=True)
        te.start()
        while True:
            try:
                line = q.get(timeout=deadline)
            except queue.Empty:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                te.join(5)
                self.tail = err[-40:]
                return None, deadline
            if line is None:
                break
            if line.startswith(MARK):
                try:
                    self.apply(json.loads(line[len(MARK):]))
                except (ValueError, TypeError, KeyError):
                    pass
        rc = p.wait()
        te.join(5)
        self.tail = err[-40:]
        return rc, None


def _last_words(tail: Sequence[str], clean: Callable[[str], str]) -> str:
    """What the dying process said about why: C++'s ``what():`` line, a Python error line, else ""."""
    for line in reversed(tail):
        text = " ".join(line.split())
        if "what():" in text or "terminate called" in text or re.match(r"^\w*(Error|Exception)\b", text):
            return clean(text)[:300]
    return ""


def supervise(th: Thresholds, aliases: dict[str, str], embedded: bool, only: set[str] | None,
              report: Report, progress: Callable[[str], None] | None = None,
              cmd: Callable[[list[str]], list[str]] | None = None) -> None:
    """Run children until every unit is reported (see the module doc). ``cmd`` maps the skip list to
    a command line (tests give a scripted child)."""
    from ..runtime.redaction import clean

    skip: list[str] = []
    make = cmd or (lambda s: command(th, aliases, embedded, only, s))
    while True:
        child = _Child(make(skip), report, progress)
        rc, timed_out = child.run(step_timeout())
        skip += child.done
        if child.ended and rc == 0:
            return
        cause = _cause(rc, timed_out)
        last = _last_words(child.tail, clean)
        if child.unit:
            report.findings.append(Finding(child.unit, "", CRASHED,
                                           f"{cause} during the {child.step}" + (f" ({last})" if last else "")
                                           + "; the preflight went on with the other engines in a fresh process"))
            skip.append(child.unit)
            continue
        # died outside any unit (vLLM's import, or between engines): nothing to skip, so stop here
        report.skipped.append(f"the preflight's child process ended during the {child.step}: {cause}"
                              + (f" ({last})" if last else "")
                              + "; engines not built: every one not listed above")
        report.findings.append(Finding("preflight", "", CRASHED, f"{cause} during the {child.step}"
                                       + (f" ({last})" if last else "")))
        return


def main(argv: list[str]) -> int:
    """The child: ``python -m pytest_perfgate.preflight THRESHOLDS [--engine ROLE=NAME] [--only NAME]
    [--skip UNIT] [--embedded]``; event lines on stdout (see the module doc)."""
    import argparse

    from ..config import load_thresholds
    from . import build_here

    p = argparse.ArgumentParser(prog="python -m pytest_perfgate.preflight")
    p.add_argument("thresholds")
    p.add_argument("--engine", action="append", default=[])
    p.add_argument("--only", action="append", default=None)
    p.add_argument("--only-none", action="store_true")
    p.add_argument("--skip", action="append", default=[])
    p.add_argument("--embedded", action="store_true")
    ns = p.parse_args(argv)
    aliases = {r: n for r, _, n in (e.partition("=") for e in ns.engine) if n}
    only = set(ns.only) if ns.only is not None else (set() if ns.only_none else None)
    embedded = None
    if ns.embedded:
        from ..floors.cli import cached_models

        embedded = cached_models()

    def emit(ev: dict[str, Any]) -> None:
        sys.stdout.write(MARK + json.dumps(ev) + "\n")
        sys.stdout.flush()

    build_here(load_thresholds(ns.thresholds), aliases, embedded, only, emit, frozenset(ns.skip))
    emit({"ev": "end"})
    return 0
