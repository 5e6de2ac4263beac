"""The session's last engine stops on a thread while the results are written (issue #16: vLLM's
shutdown waits 1.4-2.3 s for its engine core); the session still ends only once it has stopped,
and a stop that fails or outlasts its wait is said."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from pytest_perfgate.config import EngineSpec
from pytest_perfgate.engines.manager import EngineManager

pytest_plugins = ["pytester"]
THRESHOLDS = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "plugin.toml").read_text()

SLOW_STOP = """
import json, os, threading, time
from pytest_perfgate.engines import registry

registry.register("slowstop", "conftest:make")
LOG = os.path.join(os.path.dirname(__file__), "stop.json")


class SlowStop:
    kind = "slowstop"

    def __init__(self, name, args):
        self.name = name
        self.fail = bool(args.get("fail"))

    def start(self):
        pass

    def info(self):
        return {"kind": self.kind}

    def stop(self):
        begun = time.time()
        time.sleep(1.5)
        with open(LOG, "w") as f:
            json.dump({"thread": threading.current_thread().name, "begun": begun, "ended": time.time()}, f)
        if self.fail:
            raise RuntimeError("engine core did not exit")


def make(name, args):
    return SlowStop(name, args)
"""

TEST = """
import pytest

@pytest.mark.gate("acceptance")
@pytest.mark.engine("slow")
def test_acceptance(perfgate, perfgate_engine):
    perfgate.check(perfgate.proportion(760, 1000))
"""


def _project(pytester: pytest.Pytester, fail: bool) -> None:
    extra = "fail = true\n" if fail else ""
    pytester.makefile(".toml", thresholds=THRESHOLDS + f'\n[engines.slow]\nkind = "slowstop"\n{extra}')
    pytester.makeconftest(SLOW_STOP)
    pytester.makepyfile(test_stop=TEST)


def test_the_last_stop_overlaps_the_results_and_the_session_waits_for_it(pytester: pytest.Pytester) -> None:
    _project(pytester, fail=False)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    stop = json.loads((pytester.path / "stop.json").read_text())  # the session ended after the stop
    assert stop["thread"] == "perfgate-stop-slow"
    written = (pytester.path / "perfgate-results" / "report.html").stat().st_mtime
    assert stop["begun"] < written < stop["ended"]  # the plotted report was written during the stop
    assert "perfgate: stopping engine" not in r.stdout.str()


def test_a_failed_last_stop_is_said(pytester: pytest.Pytester) -> None:
    _project(pytester, fail=True)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["perfgate: stopping engine 'slow': RuntimeError: engine core did not exit"])
    assert (pytester.path / "perfgate-results" / "decisions.json").exists()


class _Stuck:
    kind = "stuck"

    def __init__(self) -> None:
        self.name = "stuck"
        self.release = threading.Event()

    def stop(self) -> None:
        self.release.wait(30)


def test_wait_says_when_the_stop_outlasts_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    mgr = EngineManager({"x": EngineSpec("x", "openai", {})}, say=lambda s: None)
    assert mgr.close_in_background()(1.0) is None  # nothing live: nothing to wait for
    eng = _Stuck()
    mgr.live = eng  # type: ignore[assignment]
    wait = mgr.close_in_background()
    assert mgr.live is None  # a later get() starts afresh, never beside the stopping one
    t = time.monotonic()
    assert wait(1.0) == "stopping engine 'stuck': still stopping after 1 s"
    assert time.monotonic() - t < 10
    eng.release.set()
    assert wait(30) is None
