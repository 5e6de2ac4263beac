"""Fixtures shared by the test folders."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_perfgate.calib import ScriptedServer
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.models.make import default_cache_dir

# pytester runs get a HOME of their own; without this each one would generate the tiny models
# (~10 s) and probe the CPU (~5 s) again in it. Tests of an empty cache set PERFGATE_CACHE themselves.
os.environ.setdefault("PERFGATE_CACHE", str(default_cache_dir()))
# `-m phase1` starts vLLM's fork server while pytest collects (startup.prewarm); the many short
# pytester sessions here that select phase1 but measure a scripted engine would each pay a 13-s
# import of vLLM on the other core for nothing. Tests of real phase runs turn it back on.
os.environ.setdefault("PERFGATE_PREWARM", "0")


@pytest.fixture(scope="module")
def openai_engine_on() -> Iterator[Callable[..., OpenAIEngine]]:
    """``openai_engine_on(server, name="e", **args)``: a started OpenAI engine on a scripted server
    (``args`` add to base_url and model); every engine started is stopped at the end of the module."""
    started: list[OpenAIEngine] = []

    def start(server: ScriptedServer, name: str = "e", **args: Any) -> OpenAIEngine:
        eng = OpenAIEngine(name, {"base_url": server.base_url, "model": "scripted", **args})
        eng.start()
        started.append(eng)
        return eng

    yield start
    for eng in started:
        eng.stop()


# A test (or a library it loads in this process) that leaves SIGINT ignored makes every later child
# process ignore it too: a disposition of SIG_IGN is inherited across exec, and Python then installs
# no KeyboardInterrupt handler. The SIGINT tests of tests/reliability then wait out their timeouts
# (seen once in a full CI run beside two busy loops, never alone). Put Ctrl-C back after each test
# and name the test that left it ignored.
SIGINT_LEFT_IGNORED: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    import signal
    import threading

    def restore(who: str) -> None:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            SIGINT_LEFT_IGNORED.append(who)

    restore(f"something before {item.nodeid}")
    yield
    restore(item.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for nodeid in SIGINT_LEFT_IGNORED:
        terminalreporter.write_line(f"note: {nodeid} left SIGINT ignored; restored for the tests after it")
