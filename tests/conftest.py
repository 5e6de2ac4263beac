"""Fixtures shared by the test folders."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _pytest.pytester
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
# A shared run history set in the environment (store/backend.py) would send every test session's
# verdicts there; the tests of it pass their own (tests/postgres_history.py: $PERFGATE_TEST_POSTGRES).
os.environ.pop("PERFGATE_HISTORY", None)

# An in-process pytester run (runpytest / inline_run) puts sys.modules back as it was before the run,
# so a library first imported inside the run is dropped afterwards. A C extension cannot be dropped:
# torch imported inside a run (runtime/device.py from an engine's info) and removed with it crashed
# the next generation-2 collection (a freed PyMethodDef traversed, SIGSEGV) or the next `import
# torch` (`pytest tests/reliability`, issue 31); numpy imported twice made `np.array(copy=...)` fail
# with "_CopyMode.IF_NEEDED is neither True nor False" in a later run. Installed libraries (stdlib
# and site-packages) are kept; what the run imported from its own directory is still dropped.
_LIBRARY_DIRS = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep
                       for k in ("stdlib", "platstdlib", "purelib", "platlib")})


def _installed(name: str) -> bool:
    """Whether module ``name`` belongs to an installed library: its top-level package is in the
    standard library or site-packages (torch.classes and the like have no usable file of their own)."""
    top = sys.modules.get(name.partition(".")[0])
    try:
        places = [getattr(top, "__file__", None), *list(getattr(top, "__path__", None) or [])]
    except Exception:  # a module object that pretends to be something else
        return False
    return any(isinstance(f, str) and os.path.realpath(f).startswith(_LIBRARY_DIRS) for f in places)


class _KeepInstalledModules(_pytest.pytester.SysModulesSnapshot):
    def __init__(self, preserve: Callable[[str], bool] | None = None) -> None:
        super().__init__(preserve=lambda name: _installed(name) or (preserve is not None and preserve(name)))


_pytest.pytester.SysModulesSnapshot = _KeepInstalledModules  # type: ignore[misc]


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
    try:  # the PostgreSQL history tests that could not run (absent where this conftest is copied alone)
        from postgres_history import NO_SERVER, SKIPPED
    except ImportError:
        return
    if SKIPPED:
        terminalreporter.write_line(f"{NO_SERVER}: {len(SKIPPED)} tests skipped", red=True, bold=True)


# `scripts/test.sh` runs these tests on two pytest-xdist workers: the seeded simulations (most of the
# suite's CPU time) on either, while everything that holds a machine-wide resource runs one at a time on
# one worker: real vLLM engines and servers (each takes every core and ~2 GB; the generated-model cache),
# PostgreSQL, Ray, torchrun's rendezvous, network namespaces, Chromium, the peer tools, `transformers
# serve`, and the folders that start or kill such processes. The scheduler below does the grouping:
# xdist 3.8's `--dist loadgroup` renames item._nodeid, which pytest 9 no longer reads (node ids come
# from item._id), so its groups were silently ignored and two vLLM tests ran at once.
EXCLUSIVE_FOLDERS = frozenset({"engines", "reliability", "preflight", "distributed", "suite", "models", "memory",
                               "vision", "cli", "ci"})
EXCLUSIVE_WORDS = re.compile(r"needs_engine|vllm|postgres|\bray\b|torchrun|netns|chromium|transformers|guidellm|aiperf|"
                             r"inference.perf")
TESTS = Path(__file__).parent


def exclusive(path: Path, seen: dict[Path, bool]) -> bool:
    """Whether the tests of module ``path`` must run one at a time (see above)."""
    if path not in seen:
        try:
            folder = path.relative_to(TESTS).parts[0]
            seen[path] = folder in EXCLUSIVE_FOLDERS or bool(EXCLUSIVE_WORDS.search(path.read_text()))
        except (ValueError, OSError):  # outside this folder, or no source: one at a time
            seen[path] = True
    return seen[path]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """One scope ("exclusive") for every test of an exclusive module, a scope of its own for each other."""
    from xdist.scheduler import LoadScopeScheduling

    seen: dict[Path, bool] = {}

    class ExclusiveScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return "exclusive" if exclusive(config.rootpath / nodeid.split("::")[0], seen) else nodeid

    return ExclusiveScheduling(config, log)


# Tests that measure how a workload fares on the machine's cores (a starved client loop and its split
# over processes): each runs alone, never beside the other worker's test (a busy machine's two loops
# are all they share the cores with, as in a serial run). Every other test holds the lock shared.
SOLO = frozenset({"load/test_workers.py", "load/test_gil_starvation.py"})


@pytest.fixture(autouse=True)
def _solo_or_shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is None:  # not under xdist: one test at a time anyway
        yield
        return
    import fcntl

    solo = request.node.path.relative_to(TESTS).as_posix() in SOLO if request.node.path.is_relative_to(TESTS) else False
    lock = tmp_path_factory.getbasetemp().parent / f"solo-{workerinput['testrunuid']}.lock"  # the workers' common base
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if solo else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest sessions a test starts (pytester, subprocesses) are not xdist workers: without this
    they inherit $PYTEST_XDIST_WORKER, and pytest-benchmark then disables itself in them."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
