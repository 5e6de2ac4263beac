"""pytest glue: options, markers, fixtures, reporting hooks. Everything else lives in the core.

Loaded through the ``pytest11`` entry point; imports nothing heavy (numpy, scipy, vllm, aiohttp are
imported inside fixtures and hooks when a gate is evaluated).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ..config import ConfigError, Thresholds, load_thresholds
from ..runtime import noise, redaction
from ..session import startup
from ..session.perfgate import (
    ENGINE_PROPERTY,
    FALLBACK_PROPERTY,
    VERDICT_PROPERTY,
    Perfgate,
    RunState,
    verdict_properties,
)
from ..session.runs import Runs
from ..verdicts.failures import GateFailure, PerfgateWarning
from . import xdist_groups
from .markers import MarkerError, Markers, parse
from .options import pytest_addoption as pytest_addoption
from .recorder import Recorder

if TYPE_CHECKING:
    from ..contract import Engine
    from ..load.schedule import RayWorkers
    from ..memory.fixture import MemoryGates
    from ..session.lab import Engines
    from ..verdicts.verdict import Verdict

STATE = pytest.StashKey["RunState | None"]()
CONF = pytest.StashKey["startup.PluginConfig"]()
RANK = pytest.StashKey[Any]()  # distributed.ranks.RankEnv of this process (torchrun / srun)
LIVE = pytest.StashKey[Any]()  # store.live.LiveStore: data files, history, baseline
SHORT = pytest.StashKey[bool]()  # this test's failure is a perfgate message: render it alone
ENGINES = pytest.StashKey["Engines"]()  # the session's engines, once created
STOPPING = pytest.StashKey[Callable[[float], "str | None"]]()  # waits for the last engine's stop
RUNS = pytest.StashKey[Runs]()  # runs kept by name in this session (perfgate.runs)
MARKERS = pytest.StashKey[Markers]()  # an item's markers, parsed once
FEASIBILITY = pytest.StashKey[list[str]]()  # report-header lines of the physical-floor check
INFEASIBLE = pytest.StashKey[dict[str, str]]()  # gate -> why its threshold is below its physical floor
MISSING = pytest.StashKey["tuple[str, frozenset[str]] | None"]()  # (message, nodeids it stops)
ENGINE_FIXTURES = ("perfgate_engine", "perfgate_engines")
GATE_TESTS = pytest.StashKey[int]()  # selected tests with gate/fallback markers (not known under xdist)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gate(*names): bind the test to gates of thresholds.toml (adds their phase markers)")
    config.addinivalue_line("markers", "fallback(name): the test validates a fallback plan; runs only when triggered")
    config.addinivalue_line("markers", "engine(name): the engine from [engines.NAME] this test measures")
    xdist_groups.register(config)  # the xdist_group marker known without xdist; with it, the groups named
    pc = startup.PluginConfig.resolve(config.option, config.getini, config.invocation_params.dir, config.rootpath, config.inipath)
    config.stash[CONF] = pc
    config.stash[STATE] = None
    _rank_setup(config)
    if pc.thresholds_path is None:
        return
    startup.freeze_heap_at_exit()  # the shutdown of a process with vLLM loaded: 4-5 s -> 0.5 s
    noise.install()  # torchao's CUDA kernels failing to load on a CPU machine, torch's deprecations to torchao
    for line in noise.WARNING_FILTERS:
        config.addinivalue_line("filterwarnings", line)
    if not pc.thresholds_path.exists():
        raise pytest.UsageError(f"perfgate: thresholds file not found: {pc.thresholds_path}")
    try:
        th = load_thresholds(pc.thresholds_path, confidence=pc.confidence)
    except ConfigError as e:
        raise pytest.UsageError(f"perfgate: {e}") from None
    for ph in th.phases.values():
        config.addinivalue_line("markers", f"{ph.name}: perfgate phase: {ph.title or ph.name}")
    bad_engine = startup.unknown_engines(pc.engine, th)
    if bad_engine:
        raise pytest.UsageError(f"perfgate: {bad_engine}")
    inconclusive = pc.inconclusive or th.settings.inconclusive
    if not hasattr(config, "workerinput"):
        problem = startup.unwritable(pc.out_dir)
        if problem:
            raise pytest.UsageError(f"perfgate: --perfgate-out {pc.out_dir}: {problem}")
    st = RunState.start(th, pc.out_dir, inconclusive, config.rootpath)
    st.validity = th.settings.validity and not config.option.perfgate_no_validity
    st.workers = _workers(config.option.perfgate_workers, th.settings.workers)
    config.stash[STATE] = st
    config.stash[RUNS] = Runs()
    try:  # data files, history and baseline of this session (store/live.py)
        config.stash[LIVE] = startup.live_store(st, config.invocation_params.dir, config.option)
    except ValueError as e:  # a --perfgate-baseline or history location that names nothing usable
        raise pytest.UsageError(f"perfgate: {e}") from None
    if _rank(config).writes:  # under torchrun/srun only rank 0 evaluates gates and writes results
        rec = Recorder(st, config.stash[LIVE], is_worker=hasattr(config, "workerinput"), warning=pytest.PytestWarning)
        config.pluginmanager.register(rec, "perfgate-recorder")
    startup.install_sigterm(config.add_cleanup)
    _check_feasibility(config, th)
    if not config.option.collectonly and (hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)):
        startup.prewarm(th, *_engine_aliases(config), config.option.markexpr or "", pc.out_dir)  # not on an xdist controller


def _workers(option: str | None, setting: int | str) -> int | RayWorkers:
    """Client worker processes of every load run (or a Ray cluster's): ``--perfgate-workers``, else ``[perfgate] workers``."""
    from ..load import schedule, workers
    try:
        return workers.resolve_workers(option if option is not None else setting)
    except schedule.LoadConfigError as e:  # the option shown cut: a 5,000-digit value is not echoed whole
        raise pytest.UsageError(f"perfgate: --perfgate-workers {redaction.clean(option, 40)}: {e}"
                                if option is not None else f"perfgate: [perfgate] {e}") from None


def _rank(config: pytest.Config) -> Any:
    from ..distributed.ranks import RankEnv

    return config.stash.get(RANK, None) or RankEnv()


def _rank_setup(config: pytest.Config) -> None:
    """Under torchrun / srun (RANK, WORLD_SIZE > 1): every rank runs the tests and measures; rank 0
    alone evaluates and writes; other ranks print nothing (pytest_sessionstart) and exit with rank
    0's status (pytest_sessionfinish)."""
    from ..distributed.ranks import RankEnv

    try:
        config.stash[RANK] = RankEnv.from_env()
    except ValueError as e:
        raise pytest.UsageError(f"perfgate: {e}") from None


def _state(config: pytest.Config) -> RunState | None:
    return config.stash.get(STATE, None)


def _markers(item: pytest.Item) -> Markers:
    """The item's gate/fallback/engine markers, parsed once (a bad marker is a usage error)."""
    got = item.stash.get(MARKERS, None)
    if got is None:
        try:
            got = parse(item)
        except MarkerError as e:
            raise pytest.UsageError(str(e)) from None
        item.stash[MARKERS] = got
    return got


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Validate gate/fallback markers, add phase markers (before -m selection), order fallbacks last."""
    st = _state(config)
    errors: list[str] = []
    for item in items:
        marks = _markers(item)
        if marks.perfgate and st is None:
            errors.append(f"{item.nodeid}: uses perfgate markers but no thresholds.toml was found "
                          f"({config.stash[CONF].not_found()})")
            continue
        if st is None:
            continue
        errors += marks.problems(item.nodeid, st.thresholds)
        phases = marks.phases(st.thresholds)
        for ph in sorted(phases):
            item.add_marker(ph)
        if phases:
            # with pytest-xdist --dist loadgroup, a phase's gate and fallback tests share one worker
            # (and its engine), in order, so fallbacks see the verdicts that trigger them
            item.add_marker(pytest.mark.xdist_group(name="perfgate-" + "+".join(sorted(phases))))
    if errors:
        raise pytest.UsageError("perfgate: bad markers:\n  " + "\n  ".join(errors))
    # gate tests before the fallback tests they can trigger (stable otherwise)
    items.sort(key=lambda it: 1 if _markers(it).fallbacks else 0)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before anything is measured: can the engines these tests use start here? A missing vLLM,
    tokenizers, transformers (or CUDA for a GPU engine) is stated once, with the command that fixes
    it; each test that needs the engine then errors with that one line, and its gates record ERROR."""
    _warn_infeasible(session)
    config = session.config
    config.stash[MISSING] = None
    config.stash[GATE_TESTS] = sum(1 for it in session.items
                                   if it.get_closest_marker("gate") or it.get_closest_marker("fallback"))
    st = _state(config)
    users = [it for it in session.items if any(f in getattr(it, "fixturenames", ()) for f in ENGINE_FIXTURES)]
    if st is None or not users:
        return
    default, aliases = _engine_aliases(config)
    # a perfgate_engine test uses its one engine; a perfgate_engines test any engine it names
    tests = [(it.nodeid, _markers(it).engine_name(st.thresholds, default)
              if "perfgate_engine" in getattr(it, "fixturenames", ()) else None) for it in users]
    config.stash[MISSING] = missing = startup.missing_engines(st.thresholds, aliases, tests)
    tr = config.pluginmanager.getplugin("terminalreporter")
    if missing is not None and tr is not None:
        tr.write_line(f"{missing[0]}; {len(missing[1])} test(s) that need it will error", red=True, bold=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    st = _state(item.config)
    if st is None:
        return
    missing = item.config.stash.get(MISSING, None)
    if missing is not None and item.nodeid in missing[1]:
        item.stash[SHORT] = True
        pytest.fail(missing[0], pytrace=False)
    for f in _markers(item).fallbacks:
        item.user_properties.append((FALLBACK_PROPERTY, f))
        triggered, why = st.triggered(f)
        if not triggered:
            pytest.skip(f"fallback {f}: {why}")
    _tell_dependencies(item, st)


def _tell_dependencies(item: pytest.Item, st: RunState) -> None:
    """A test of a phase whose ``depends_on`` phase failed (in this run or the recorded decisions)
    is told so: a warning on the test and a ``perfgate.depends_on`` property."""
    for msg in st.dependency_notes(_markers(item).gate_phases(st.thresholds)):
        item.user_properties.append(("perfgate.depends_on", msg))
        item.warn(PerfgateWarning(msg))


@pytest.fixture
def perfgate(request: pytest.FixtureRequest) -> Perfgate:
    """Evaluate gates: ``perfgate.check(data, gate=None)``, ``perfgate.samples([...], "ms")``,
    ``perfgate.sample_until_decided(draw)``, ``perfgate.decision("phase1")``."""
    st = _state(request.config)
    if st is None:
        raise pytest.UsageError(f"perfgate fixture used, no thresholds.toml found ({request.config.stash[CONF].not_found()})")
    item = request.node
    marks = _markers(item)
    nodeid = xdist_groups.plain(item.nodeid)  # (without an xdist group suffix)

    live = request.config.stash[LIVE]

    def record(v: Verdict, engines: list[Any], extras: Mapping[str, Any]) -> None:
        d, props = verdict_properties(v, engines, {**live.extras(v), **extras})
        item.user_properties.extend(props)
        st.add_verdict(nodeid, d)

    say = _say(request.config)

    def note(msg: str) -> None:
        say(f"{nodeid}: {msg}")
        item.user_properties.append(("perfgate.note", msg))

    return Perfgate(st, marks.gates, record, request.config.stash[CONF].confidence, say, store=live.hook(nodeid),
                    runs=request.config.stash[RUNS], engine=marks.engine_name(st.thresholds, _engine_aliases(request.config)[0]),
                    note=note)


def _say(config: pytest.Config) -> Callable[[str], None]:
    """Print a line to the terminal from inside a test without breaking pytest's output."""
    if not _rank(config).writes:
        return lambda msg: None
    capman = config.pluginmanager.getplugin("capturemanager")
    tw = config.get_terminal_writer()

    def say(msg: str) -> None:
        if capman is not None:
            with capman.global_and_fixture_disabled():
                tw.line(msg)
        else:
            tw.line(msg)

    return say


def _engine_aliases(config: pytest.Config) -> tuple[str | None, dict[str, str]]:
    return startup.engine_aliases(config.stash[CONF].engine)


@pytest.fixture(scope="session")
def perfgate_thresholds(request: pytest.FixtureRequest) -> Thresholds:
    """The validated thresholds.toml of this session (``.gates``, ``.params``, ``.engines``)."""
    st = _state(request.config)
    if st is None:
        raise pytest.UsageError(f"no thresholds.toml found ({request.config.stash[CONF].not_found()})")
    return st.thresholds


@pytest.fixture
def perfgate_memory() -> MemoryGates:
    """Memory probes and gates: ``with perfgate_memory.probe() as p: work()`` then ``p.report``
    (skips, saying why, without a CUDA device); ``perfgate_memory.check(perfgate, report_or_sweep, gate)``."""
    from ..memory.fixture import MemoryGates

    return MemoryGates(pytest.skip)


@pytest.fixture(scope="session")
def perfgate_engines(request: pytest.FixtureRequest) -> Generator[Engines, None, None]:
    """The session's engines, started lazily, at most one alive at a time:
    ``run(engine, requests, LoadConfig(...), keep_as=NAME)`` measures and returns a RunResult;
    ``get(name)``, ``tokenizer(name)``, ``variant(base, name, **args)`` (lab.py)."""
    from ..session.lab import Engines

    st = _state(request.config)
    capman = request.config.pluginmanager.getplugin("capturemanager")
    suspend = capman.global_and_fixture_disabled if capman is not None else contextlib.nullcontext
    engines = Engines.open(st.thresholds.engines if st else {}, _engine_aliases(request.config)[1],
                           request.config.stash[CONF].out_dir, suspend, _say(request.config),
                           request.config.stash[RUNS] if RUNS in request.config.stash else Runs())
    engines.workers = st.workers if st else 1  # --perfgate-workers / [perfgate] workers (load/workers.py)
    request.config.stash[ENGINES] = engines
    try:
        yield engines
    finally:  # the last stop overlaps writing the results; pytest_sessionfinish waits for it
        request.config.stash[STOPPING] = engines.close_in_background()


@pytest.fixture
def perfgate_engine(request: pytest.FixtureRequest, perfgate_engines: Engines) -> Engine:
    """The started engine this test measures: ``@pytest.mark.engine(NAME)``, else
    ``--perfgate-engine NAME``, else the gate's ``engine =``, else the embedded ``baseline``."""
    from ..contract import EngineError

    default, _aliases = _engine_aliases(request.config)
    st = _state(request.config)
    name = _markers(request.node).engine_name(st.thresholds if st is not None else None, default)
    failure: str | None = None
    try:
        engine = perfgate_engines.get(name)
    except EngineError as e:
        failure = str(e)
    if failure is not None:  # outside the except block: the message once, no exception chain
        request.node.stash[SHORT] = True
        pytest.fail(failure, pytrace=False)
    record_engine(request.node, engine)
    return engine


def record_engine(item: pytest.Item, engine: Engine) -> None:
    """Attach the engine's info to the test (JUnit property, decision record)."""
    info = dict(engine.info())
    info.setdefault("name", engine.name)
    item.user_properties.append((ENGINE_PROPERTY, json.dumps(info, default=str)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    st = _state(item.config)
    if st is not None and report.failed and report.when in ("setup", "call"):
        _unevaluated_gates_error(item, call, report, st)
    short = st is not None and report.failed and _short_failure(item, call, report)
    if st is not None and report.when == "call" and not short:
        lines = [json.loads(v)["summary"] for k, v in item.user_properties if k == VERDICT_PROPERTY and isinstance(v, str)]
        if lines:
            report.sections.append(("perfgate verdicts", "\n".join(lines)))
    return report


def _short_failure(item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> bool:
    """A gate failure, an engine error or a missing dependency is reported as its message alone
    (shortfail.py): no traceback, no locals, no plugin frames; the engine's captured output goes to
    its log file. The crash line (short test summary, ``--tb=line``) names the gate and measured vs
    threshold. ``--tb=long`` or ``-vv`` bring back pytest's full report."""
    from .shortfail import message

    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is None or item.config.option.tbstyle == "long" or item.config.option.verbose >= 2:
        return False
    got = message(exc, item.stash.get(SHORT, False), exc.msg if isinstance(exc, pytest.fail.Exception) else None,
                  item.config.option.verbose)
    if got is None:
        return False
    lines, head = got
    longrepr = call.excinfo.getrepr(style="value", chain=False) if call.excinfo is not None else None
    crash = getattr(longrepr, "reprcrash", None)
    entries = getattr(getattr(longrepr, "reprtraceback", None), "reprentries", None)
    _route_captured(item, report)
    if crash is None or not entries:
        report.longrepr = "\n".join(lines)
        return True
    path, lineno, _name = item.location
    crash.path, crash.lineno, crash.message = str(path), (lineno or 0) + 1, head
    entries[:] = entries[-1:]
    entries[0].lines[:] = lines
    report.longrepr = longrepr
    return True


def _route_captured(item: pytest.Item, report: Any) -> None:
    """Move a failing engine test's captured output into its engine's log, out of the report."""
    if any(f in getattr(item, "fixturenames", ()) for f in ENGINE_FIXTURES):
        from ..session.enginelog import route_captured

        engines = item.config.stash.get(ENGINES, None)
        name = engines.current() if engines is not None else None
        report.sections[:] = route_captured(item.config.stash[CONF].out_dir, name, xdist_groups.plain(item.nodeid), report.sections)


def _unevaluated_gates_error(item: pytest.Item, call: pytest.CallInfo[None], report: Any, st: RunState) -> None:
    """A gate test that failed before any verdict of its gate records an "error" verdict for each
    such gate, with the cause (unevaluated.py)."""
    from .unevaluated import error_verdicts

    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, GateFailure):
        return  # the test failed on a gate's own verdict
    try:
        gates = _markers(item).gates
    except pytest.UsageError:
        return
    done = {json.loads(v).get("gate") for k, v in item.user_properties if k == VERDICT_PROPERTY and isinstance(v, str)}
    if call.excinfo is not None and not isinstance(exc, pytest.fail.Exception):
        cause = call.excinfo.exconly()
    else:
        cause = str(exc) if exc is not None else report.longreprtext
    for v in error_verdicts(st.thresholds, gates, done, cause, report.when):
        prop = (VERDICT_PROPERTY, json.dumps(v.to_dict(), default=str, allow_nan=False))
        item.user_properties.append(prop)
        if report.user_properties is not item.user_properties:
            report.user_properties.append(prop)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if _rank(session.config).distributed and not _rank(session.config).writes:  # quiet: no output on ranks > 0
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            session.config.pluginmanager.unregister(tr)


def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    early_config.add_cleanup(startup.TEARDOWN_GC.unfreeze)  # the last cleanup: after pytest's own


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _state(config) is not None:  # pytest's gc passes at unconfigure: 1.6 s -> ~0 with vLLM loaded
        startup.TEARDOWN_GC.freeze()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Results that could not be written fail the session (exit 1 instead of 0), after the
    recorder's last flush; under torchrun / srun every rank exits with rank 0's status."""
    rec = session.config.pluginmanager.get_plugin("perfgate-recorder")
    if isinstance(rec, Recorder) and not rec.is_worker:
        if session.config.stash.get(GATE_TESTS, 0):
            rec.mark_stale()
        if rec.errors() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    problem = startup.wait_for_stop(session.config.stash.get(STOPPING, None))
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if problem and tr is not None:
        tr.write_line(f"perfgate: {problem}", yellow=True)
    rank = _rank(session.config)
    if rank.distributed:
        from ..distributed.ranks import exchange_status

        status = exchange_status(int(session.exitstatus))
        if not rank.writes:
            session.exitstatus = status


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rec = config.pluginmanager.get_plugin("perfgate-recorder")
    if isinstance(rec, Recorder):
        for m in rec.stale:
            terminalreporter.write_line(f"perfgate: {m}")


def _check_feasibility(config: pytest.Config, th: Thresholds) -> None:
    """Physical floors before anything is measured (feasibility.py): the header names every gate
    whose threshold is below its floor on its engine's hardware; once the tests are collected, such
    a gate among them is a warning, or with ``--perfgate-strict-feasibility`` a usage error."""
    config.stash[FEASIBILITY] = []
    if hasattr(config, "workerinput"):
        return
    from .feasibility import check

    default, aliases = _engine_aliases(config)
    st = config.stash.get(STATE, None)
    lines, bad = check(th, default, aliases, st.recorded if st is not None else None)
    config.stash[FEASIBILITY] = lines
    config.stash[INFEASIBLE] = bad


def _warn_infeasible(session: pytest.Session) -> None:
    """Warns (or, strict, stops) when a collected test is bound to a gate below its floor."""
    bad = session.config.stash.get(INFEASIBLE, {})
    selected = {g for it in session.items for g in _markers(it).gates} if bad else set()
    hit = [m for g, m in bad.items() if g in selected]
    if hit and session.config.getoption("perfgate_strict_feasibility"):
        raise pytest.UsageError("perfgate: --perfgate-strict-feasibility: " + "\n".join(hit))
    for m in hit:
        session.config.issue_config_time_warning(PerfgateWarning(m), stacklevel=2)


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines: list[str] = config.stash.get(FEASIBILITY, [])
    st = _state(config)
    return [*lines, *(startup.no_fallback(st.thresholds) if st is not None and not hasattr(config, "workerinput") else [])]


