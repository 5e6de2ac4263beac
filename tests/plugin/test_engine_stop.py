"""The session's last engine stops on a thread while the results are written (issue #16: vLLM's
shutdown waits 1.4-2.3 s for its engine core); the session still ends only once it has stopped,
and a stop that fails or outlasts its wait is said."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from pytest_perfgate.config import EngineSpec
from pytest_perfgate.engines.manager import EngineManager

pytest_plugins = ["pytester"]
THRESHOLDS = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "plugin.toml").read_text()

SLOW_STOP = """
import json, os, sys, threading, time
from pytest_perfgate.engines import registry

registry.register("slowstop", "conftest:make")
HERE = os.path.dirname(__file__)
LOG = os.path.join(HERE, "stop.json")
REPORT = os.path.join(HERE, "perfgate-results", "report.html")
WAIT_S = 120  # liveness only: when the plugin works, what is awaited below happens without delay


def identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size  # a rewrite is a new file (atomic replace): a new inode


def until(cond):
    deadline = time.monotonic() + WAIT_S
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def joined_by_main_thread():
    # the main thread is blocked in Thread.join of this very thread (the session waiting for the stop)
    me = threading.current_thread()
    f = sys._current_frames().get(threading.main_thread().ident)
    while f is not None:
        if f.f_code.co_name == "join" and f.f_locals.get("self") is me:
            return True
        f = f.f_back
    return False


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
        # the stop cannot end before the results are written anew (the plotted report of the session's
        # end) and before the session waits for it: both by construction, neither by the clock
        before = identity(REPORT)  # written after the test, before this stop began
        rewritten = until(lambda: identity(REPORT) not in (before, None))
        joined = until(joined_by_main_thread)
        with open(LOG, "w") as f:
            json.dump({"thread": threading.current_thread().name, "report_rewritten_during_stop": rewritten,
                       "before": before is not None, "session_joined": joined}, f)
        if self.fail:
            raise RuntimeError("engine core did not exit")


def make(name, args):
    return SlowStop(name, args)


def pytest_unconfigure(config):  # after pytest_sessionfinish: has the stop ended by now?
    with open(os.path.join(HERE, "unconfigure.json"), "w") as f:
        json.dump({"stop_ended": os.path.exists(LOG)}, f)
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
    """By construction, not by timestamps: the fake stop returns only once report.html has been
    written anew (so that write happened while the stop was in progress) and once the session's
    main thread is joining the stop's thread; pytest_unconfigure, after pytest_sessionfinish, finds
    the stop ended. A plugin that stopped before writing, or did not wait, fails every time."""
    _project(pytester, fail=False)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    stop = json.loads((pytester.path / "stop.json").read_text())
    assert stop == {"thread": "perfgate-stop-slow", "report_rewritten_during_stop": True, "before": True,
                    "session_joined": True}
    assert json.loads((pytester.path / "unconfigure.json").read_text()) == {"stop_ended": True}
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
        self.returned = threading.Event()

    def stop(self) -> None:
        self.release.wait(300)  # released by the test (300 s: liveness only)
        self.returned.set()


def test_wait_says_when_the_stop_outlasts_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    mgr = EngineManager({"x": EngineSpec("x", "openai", {})}, say=lambda s: None)
    assert mgr.close_in_background()(1.0) is None  # nothing live: nothing to wait for
    eng = _Stuck()
    mgr.live = eng  # type: ignore[assignment]
    wait = mgr.close_in_background()
    assert mgr.live is None  # a later get() starts afresh, never beside the stopping one
    assert wait(1.0) == "stopping engine 'stuck': still stopping after 1 s"
    assert not eng.returned.is_set()  # wait gave up at its own timeout: the stop had not ended
    eng.release.set()
    assert wait(300) is None and eng.returned.is_set()
