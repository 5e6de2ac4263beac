"""The recorder: collects verdicts from test reports (also those forwarded by xdist workers) and
writes the results directory (decisions.json, history, and every report writer's file: gates.xml,
summary.md, report.html and those of writers added by entry points, :mod:`pytest_perfgate.writers`).

Registered by plugin.py as a pytest plugin object (its methods are hooks found by name); it does
not import pytest: the plugin hands it the session state, the live store and the warning class.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..session.perfgate import FALLBACK_PROPERTY
from ..store.decisions import now_iso
from ..verdicts.wording import plan_line
from .xdist_groups import plain

if TYPE_CHECKING:
    from ..session.perfgate import RunState


def own_times(verdicts: list[dict[str, Any]], start: float, duration: float) -> None:
    """Each verdict's ``duration``: from the test's start (or its previous verdict) to its own
    recording, so that a test checking six gates does not count its time six times; a verdict
    without a stamp (recorded after the test) gets the rest. Without a start: the whole test's."""
    prev, stop = start, start + duration
    for v in verdicts:
        if "duration" in v:
            continue
        at = v.get("recorded_at")
        if not start:
            v["duration"] = round(duration, 6)
            continue
        end = min(stop, float(at)) if isinstance(at, (int, float)) else stop
        v["duration"] = round(max(0.0, end - prev), 6)
        prev = max(prev, end)


class Recorder:
    """Writes this session's results after every test and once more, with plots, at its end."""

    def __init__(self, st: RunState, live: Any, *, is_worker: bool, warning: type[Warning] = UserWarning) -> None:
        self.st = st
        self.live = live  # store.live.LiveStore: data files, history, baseline
        self.is_worker = is_worker
        self.warning = warning  # the class of the warning an unreadable earlier run raises
        self.written: list[Path] = []
        self.write_errors: list[str] = []  # a results file that could not be written fails the session
        self.stale: list[str] = []
        self.started = now_iso()

    def pytest_sessionstart(self, session: Any) -> None:
        if self.st.recorded_error:
            warnings.warn(self.warning(f"perfgate: {self.st.recorded_error}"), stacklevel=1)
        if not self.is_worker:  # a shared history that cannot be opened: the local file from now on, said now
            self.live.open_history()

    def pytest_runtest_logreport(self, report: Any) -> None:
        st = self.st
        props = list(report.user_properties)
        fallback = next((v for k, v in props if k == FALLBACK_PROPERTY), None)
        if not (report.when == "call" or (report.when == "setup" and not report.passed)):
            return
        nodeid = plain(report.nodeid)  # (an xdist group suffix dropped: the records name the test as without xdist)
        st.add_properties(nodeid, props)
        if report.when == "call":  # JUnit test cases carry the time their gate took in the test
            own_times(st.verdicts.get(nodeid, []), float(getattr(report, "start", 0.0) or 0.0),
                      float(report.duration))
        if isinstance(fallback, str):
            reason = ""
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            elif report.failed and report.longreprtext:
                reason = report.longreprtext.strip().splitlines()[-1]
            st.add_fallback_test(nodeid, fallback, report.outcome, reason)
        if not self.is_worker:
            self._flush()

    def _flush(self, reports: bool = True, final: bool = False) -> dict[str, Any] | None:
        """decisions.json, then (``reports``) every writer's report (gates.xml, summary.md,
        report.html, ...): all atomic, after every test, so a killed run leaves complete files with
        everything measured up to then; ``final``: the session's last write (report.html with plots)."""
        try:
            doc = self.st.flush()
        except OSError as e:  # the tests go on; the session fails at its end (results are missing)
            warnings.warn(f"perfgate: could not write {self.st.out_dir}: {e}", stacklevel=1)
            self._write_error(f"{self.st.out_dir / 'decisions.json'}: {e}")
            return None
        self._history()
        if reports and self.st.all_verdicts():
            from ..writers import write_all

            phases = sorted({v["phase"] for v in self.st.all_verdicts()})
            try:
                written = write_all(doc, self.st.out_dir, phases=phases, inconclusive=self.st.inconclusive, final=final)
            except Exception as e:  # the tests go on; the session fails at its end
                warnings.warn(f"perfgate: could not write reports in {self.st.out_dir}: {e}", stacklevel=1)
                self._write_error(f"reports in {self.st.out_dir}: {e}")
                written = list(getattr(e, "written", []))
            self.written = [self.st.out_dir / "decisions.json", *written]
        return doc

    def mark_stale(self) -> None:
        """Gate tests ran but did not rewrite a report (all skipped, nothing measured): the report of
        an earlier run is renamed ``previous-<name>`` so that nobody publishes it as this run's."""
        from ..writers import filenames

        for name in filenames():
            path = self.st.out_dir / name
            if path.exists() and path not in self.written:
                try:
                    path.replace(path.with_name("previous-" + name))
                    self.stale.append(f"{name} was from an earlier run: renamed previous-{name}")
                except OSError as e:
                    self._write_error(f"{path}: from an earlier run and could not be renamed: {e}")

    def _write_error(self, msg: str) -> None:
        if msg not in self.write_errors:
            self.write_errors.append(msg)

    def _history(self) -> None:
        """Append this run's new verdicts to the run history (history.sqlite, or the shared history:
        store/live.py, store/history.py)."""
        from ..store.backend import errors

        try:
            self.live.record_history(self.st.all_verdicts(), started=self.started, commit=self.st.commit,
                                     engines=list(self.st.engines.values()))
        except errors() as e:  # the session fails at its end
            from ..store.history import path_of

            warnings.warn(f"perfgate: could not append to the run history in {self.st.out_dir}: {e}", stacklevel=1)
            self._write_error(f"{path_of(self.st.out_dir)}: {e}")

    def errors(self) -> list[str]:
        """Every output this session could not write (results, reports, history, samples data)."""
        return [*self.write_errors, *(e for e in getattr(self.live, "errors", []) if e not in self.write_errors)]

    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        st = self.st
        if self.is_worker or (not st.all_verdicts() and not st.fallback_tests):
            return
        # the last write: the full report.html (distribution plots from the stored data) once, at the end
        self._flush(final=True)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: Any) -> None:
        st = self.st
        if self.is_worker or not st.all_verdicts():
            return
        from ..writers.table import gate_table

        tr = terminalreporter
        tr.section("perfgate", sep="=", bold=True)
        for line in gate_table(st.all_verdicts()):
            tr.write_line(line)
        triggered = sorted({f for v in st.all_verdicts() if v["outcome"] == "fail" for f in v.get("fallbacks", [])})
        if triggered:
            tr.write_line("")
            tr.write_line("triggered fallbacks:")
            for f in triggered:
                tr.write_line("  " + plan_line(st.thresholds.fallbacks[f]))
        for t in st.fallback_tests.values():
            tr.write_line(f"fallback test {t['test']}: {t['outcome']}" + (f" ({t['reason']})" if t["reason"] else ""))
        tr.write_line("")
        for p in self.written:
            tr.write_line(f"perfgate: wrote {p}")
        for e in self.errors():
            tr.write_line(f"perfgate: could not write results (the session fails): {e}", red=True, bold=True)
