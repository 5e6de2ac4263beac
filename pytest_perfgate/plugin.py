"""pytest glue: options, markers, fixtures, reporting hooks. Everything else lives in the core.

Loaded through the ``pytest11`` entry point; imports nothing heavy (numpy, scipy, vllm, aiohttp are
imported inside fixtures and hooks when a gate is evaluated).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config import ConfigError, load_thresholds
from .recorder import Recorder
from .session import ENGINE_PROPERTY, FALLBACK_PROPERTY, VERDICT_PROPERTY, Perfgate, RunState

if TYPE_CHECKING:
    from .verdict import Verdict

STATE = pytest.StashKey["RunState | None"]()
CONF = pytest.StashKey["PluginConfig"]()
RANK = pytest.StashKey[Any]()  # distributed.ranks.RankEnv of this process (torchrun / srun)
LIVE = pytest.StashKey[Any]()  # store.live.LiveStore: data files, history, baseline
SHORT = pytest.StashKey[bool]()  # this test's failure is a perfgate message: render it alone
ENGINES = pytest.StashKey[Any]()  # the session's LoggedEngines, once created
MISSING = pytest.StashKey["tuple[str, frozenset[str]] | None"]()  # (message, nodeids it stops)
ENGINE_FIXTURES = ("perfgate_engine", "perfgate_engines")
GATE_TESTS = pytest.StashKey[int]()  # selected tests with gate/fallback markers (not known under xdist)


@dataclass(frozen=True)
class PluginConfig:
    thresholds_path: Path | None
    out_dir: Path
    confidence: float | None
    inconclusive: str
    engine: list[str] | None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfgate", "performance gates from thresholds.toml (pytest-perfgate)")
    group.addoption("--perfgate-thresholds", metavar="PATH", default=None,
                    help="thresholds file (default: ini perfgate_thresholds, else thresholds.toml in rootdir)")
    group.addoption("--perfgate-out", metavar="DIR", default=None,
                    help="results directory for gates.xml, decisions.json, summary.md, report.html "
                    "(default: ini perfgate_out, else perfgate-results/)")
    group.addoption("--perfgate-confidence", type=float, default=None, metavar="C",
                    help="confidence of every verdict, overrides [perfgate] confidence (e.g. 0.99)")
    group.addoption("--perfgate-inconclusive", choices=("fail", "warn"), default=None,
                    help="what an inconclusive verdict does to its test (default: fail)")
    group.addoption("--perfgate-engine", metavar="NAME|ROLE=NAME", action="append", default=None,
                    help="engine from [engines.NAME] that gate tests measure (default: the embedded CPU engine); "
                    "ROLE=NAME maps an engine the suite names (e.g. speculative=qwen72b-spec); repeatable")
    group.addoption("--perfgate-baseline", metavar="REF", default=None,
                    help="compare every gate with a baseline: a results directory or history.sqlite, 'latest', "
                    "a run id, or a git ref; gates with a `regression` tolerance fail when they regressed beyond it")
    group.addoption("--perfgate-strict-feasibility", action="store_true", default=False,
                    help="a gate whose threshold is below its physical floor on the engine's hardware is a usage "
                    "error before anything is measured (default: a warning; see `perfgate check`)")
    parser.addini("perfgate_thresholds", "path of thresholds.toml", default="")
    parser.addini("perfgate_out", "results directory", default="")


def _resolve(config: pytest.Config) -> PluginConfig:
    """CLI > ini > thresholds.toml > default."""
    opt = config.option
    path_s = opt.perfgate_thresholds or config.getini("perfgate_thresholds")
    path: Path | None
    if path_s:
        given = Path(path_s)
        base = config.invocation_params.dir if opt.perfgate_thresholds else config.rootpath
        path = given if given.is_absolute() else base / given
    else:
        default = config.rootpath / "thresholds.toml"
        path = default if default.exists() else None
    out_s = opt.perfgate_out or config.getini("perfgate_out") or "perfgate-results"
    out = Path(out_s)
    if not out.is_absolute():
        out = (config.invocation_params.dir if opt.perfgate_out else config.rootpath) / out
    return PluginConfig(path, out, opt.perfgate_confidence, opt.perfgate_inconclusive or "", opt.perfgate_engine)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gate(*names): bind the test to gates of thresholds.toml (adds their phase markers)")
    config.addinivalue_line("markers", "fallback(name): the test validates a fallback plan; runs only when triggered")
    config.addinivalue_line("markers", "engine(name): the engine from [engines.NAME] this test measures")
    if not config.pluginmanager.hasplugin("xdist"):
        # the plugin groups a phase's tests with xdist_group; without xdist the marker is inert but
        # must still be known (--strict-markers, -W error::pytest.PytestUnknownMarkWarning)
        config.addinivalue_line("markers", "xdist_group(name): pytest-xdist --dist loadgroup group (inert without xdist)")
    pc = _resolve(config)
    config.stash[CONF] = pc
    config.stash[STATE] = None
    _rank_setup(config)
    if pc.thresholds_path is None:
        return
    if not pc.thresholds_path.exists():
        raise pytest.UsageError(f"perfgate: thresholds file not found: {pc.thresholds_path}")
    try:
        th = load_thresholds(pc.thresholds_path, confidence=pc.confidence)
    except ConfigError as e:
        raise pytest.UsageError(f"perfgate: {e}") from None
    for ph in th.phases.values():
        config.addinivalue_line("markers", f"{ph.name}: perfgate phase: {ph.title or ph.name}")
    from .config import BUILTIN_ENGINES

    for v in pc.engine or []:
        name = v.partition("=")[2] if "=" in v else v
        if name.strip() not in th.engines and name.strip() not in BUILTIN_ENGINES:
            known = ", ".join([*th.engines, *BUILTIN_ENGINES])
            raise pytest.UsageError(f"perfgate: --perfgate-engine {v}: no [engines.{name.strip()}] in "
                                    f"{th.path.name} (engines: {known})")
    inconclusive = pc.inconclusive or th.settings.inconclusive
    if not hasattr(config, "workerinput"):
        problem = _unwritable(pc.out_dir)
        if problem:
            raise pytest.UsageError(f"perfgate: --perfgate-out {pc.out_dir}: {problem}")
    st = RunState.start(th, pc.out_dir, inconclusive, config.rootpath)
    config.stash[STATE] = st
    config.stash[LIVE] = _live_store(config, st)
    if _rank(config).writes:  # under torchrun/srun only rank 0 evaluates gates and writes results
        rec = Recorder(st, config.stash[LIVE], is_worker=hasattr(config, "workerinput"), warning=pytest.PytestWarning)
        config.pluginmanager.register(rec, "perfgate-recorder")
    _install_sigterm(config)
    _check_feasibility(config, th)


def _live_store(config: pytest.Config, st: RunState) -> Any:
    """Data files, history and baseline of this session (store/live.py)."""
    from .store.baseline import resolve
    from .store.history import HistoryError
    from .store.live import LiveStore

    ref = None
    if config.option.perfgate_baseline:
        try:
            ref = resolve(config.option.perfgate_baseline, st.out_dir, config.invocation_params.dir)
        except HistoryError as e:
            raise pytest.UsageError(f"perfgate: {e}") from None
    return LiveStore(st.out_dir, st.thresholds, st.run_id, ref)


def _rank(config: pytest.Config) -> Any:
    from .distributed.ranks import RankEnv

    return config.stash.get(RANK, None) or RankEnv()


def _rank_setup(config: pytest.Config) -> None:
    """Under torchrun / srun (RANK, WORLD_SIZE > 1): every rank runs the tests and measures; rank 0
    alone evaluates and writes; other ranks print nothing and exit with rank 0's status."""
    from .distributed.ranks import RankEnv

    try:
        rank = RankEnv.from_env()
    except ValueError as e:
        raise pytest.UsageError(f"perfgate: {e}") from None
    config.stash[RANK] = rank
    if rank.distributed:
        config.pluginmanager.register(_RankStatus(rank), "perfgate-rank-status")


class _RankStatus:
    def __init__(self, rank: Any) -> None:
        self.rank = rank

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if not self.rank.writes:  # quiet: no terminal output on ranks other than 0
            tr = session.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                session.config.pluginmanager.unregister(tr)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from .distributed.ranks import exchange_status

        status = exchange_status(int(session.exitstatus))
        if not self.rank.writes:
            session.exitstatus = status


def _unwritable(out: Path) -> str | None:
    """Why the results directory can't be written (checked at start: a usage error, exit 4), or None.

    Nothing is created here: an existing directory gets a probe file, a missing one its nearest
    existing parent."""
    import tempfile

    probe = out
    while not probe.exists():
        if probe.parent == probe:
            return "no existing parent directory"
        probe = probe.parent
    if not probe.is_dir():
        return "is a file, not a directory" if probe == out else f"{probe} is a file, not a directory"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        return f"not writable ({e.strerror or e})" if probe == out else f"cannot be created in {probe} ({e.strerror or e})"
    return None


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"perfgate: terminated by signal {signum}")


def _install_sigterm(config: pytest.Config) -> None:
    """Turn SIGTERM (CI cancellation, ``timeout``, ``kill``) into KeyboardInterrupt, like Ctrl-C, so
    that pytest finishes the session: fixtures are torn down (engines stopped, servers killed) and
    the results are written. Only when nobody else handles SIGTERM; restored at unconfigure."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            return
        signal.signal(signal.SIGTERM, _sigterm)
    except (ValueError, OSError):  # pragma: no cover - not the main interpreter
        return
    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is _sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    config.add_cleanup(restore)


def _state(config: pytest.Config) -> RunState | None:
    return config.stash.get(STATE, None)


def _marker_names(item: pytest.Item, name: str) -> list[str]:
    out: list[str] = []
    for m in item.iter_markers(name):
        if m.kwargs:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} takes names only, got {sorted(m.kwargs)}")
        for a in m.args:
            if not isinstance(a, str):
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} takes names (strings), got {a!r}")
            out.append(a)
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Validate gate/fallback markers, add phase markers (before -m selection), order fallbacks last."""
    st = _state(config)
    errors: list[str] = []
    for item in items:
        gates = _marker_names(item, "gate")
        fbs = _marker_names(item, "fallback")
        if (gates or fbs) and st is None:
            errors.append(f"{item.nodeid}: uses perfgate markers but no thresholds.toml was found "
                          "(give --perfgate-thresholds PATH)")
            continue
        if st is None:
            continue
        th = st.thresholds
        phases: set[str] = set()
        for g in gates:
            if g not in th.gates:
                errors.append(f"{item.nodeid}: unknown gate {g!r} (gates in {th.path.name}: {', '.join(th.gates) or '(none)'})")
            else:
                phases.add(th.gates[g].phase)
        for f in fbs:
            if f not in th.fallbacks:
                errors.append(f"{item.nodeid}: unknown fallback {f!r} (fallbacks: {', '.join(th.fallbacks) or '(none)'})")
            phases.update(g.phase for g in th.gates.values() if f in g.fallbacks)
        for ph in sorted(phases):
            item.add_marker(ph)
        if phases:
            # with pytest-xdist --dist loadgroup, a phase's gate and fallback tests share one worker
            # (and its engine), in order, so fallbacks see the verdicts that trigger them
            item.add_marker(pytest.mark.xdist_group(name="perfgate-" + "+".join(sorted(phases))))
    if errors:
        raise pytest.UsageError("perfgate: bad markers:\n  " + "\n  ".join(errors))
    # gate tests before the fallback tests they can trigger (stable otherwise)
    items.sort(key=lambda it: 1 if it.get_closest_marker("fallback") else 0)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before anything is measured: can the engines these tests use start here? A missing vLLM,
    tokenizers, transformers (or CUDA for a GPU engine) is stated once, with the command that fixes
    it; each test that needs the engine then errors with that one line, and its gates record ERROR."""
    config = session.config
    config.stash[MISSING] = None
    config.stash[GATE_TESTS] = sum(1 for it in session.items
                                   if it.get_closest_marker("gate") or it.get_closest_marker("fallback"))
    st = _state(config)
    users = [it for it in session.items if any(f in getattr(it, "fixturenames", ()) for f in ENGINE_FIXTURES)]
    if st is None or not users:
        return
    from .config import BUILTIN_ENGINES
    from .engines.base import EngineError
    from .engines.manager import EngineManager, uses_embedded
    from .requirements import check

    default, aliases = _engine_aliases(config)
    mgr = EngineManager(st.thresholds.engines, aliases)
    wanted: dict[str, list[str]] = {}  # engine name -> nodeids
    for it in users:
        if "perfgate_engine" in getattr(it, "fixturenames", ()):
            names = [_engine_name(it, st, default)]
        else:  # the test picks engines itself: those of thresholds.toml, else the built-in ones
            names = [*st.thresholds.engines] or [*BUILTIN_ENGINES]
        for n in names:
            wanted.setdefault(n, []).append(it.nodeid)
    specs = []
    for n in wanted:
        try:
            spec = mgr.spec(n)
        except EngineError:
            continue  # an unknown engine: the fixture says so
        specs.append((n, spec.kind, spec.args, uses_embedded(dict(spec.args))))
    missing = check(specs)
    if missing is None:
        return
    stopped = frozenset(i for n in missing.engines for i in wanted[n])
    config.stash[MISSING] = (missing.message(), stopped)
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"{missing.message()}; {len(stopped)} test(s) that need it will error", red=True, bold=True)


def _engine_name(item: pytest.Item, st: RunState | None, default: str | None) -> str:
    """``@pytest.mark.engine(NAME)``, else ``--perfgate-engine NAME``, else the gate's ``engine =``,
    else the embedded ``baseline``."""
    m = item.get_closest_marker("engine")
    name = m.args[0] if m and m.args else None
    if name is None and default is None and st is not None:
        for g in _marker_names(item, "gate"):
            if g in st.thresholds.gates and st.thresholds.gates[g].engine:
                return str(st.thresholds.gates[g].engine)
    return str(name or default or "baseline")


def pytest_runtest_setup(item: pytest.Item) -> None:
    st = _state(item.config)
    if st is None:
        return
    missing = item.config.stash.get(MISSING, None)
    if missing is not None and item.nodeid in missing[1]:
        item.stash[SHORT] = True
        pytest.fail(missing[0], pytrace=False)
    fbs = _marker_names(item, "fallback")
    for f in fbs:
        item.user_properties.append((FALLBACK_PROPERTY, f))
        triggered, why = st.triggered(f)
        if not triggered:
            pytest.skip(f"fallback {f}: {why}")
    _tell_dependencies(item, st)


def _tell_dependencies(item: pytest.Item, st: RunState) -> None:
    """A test of a phase whose ``depends_on`` phase failed (in this run or the recorded decisions)
    is told so: a warning on the test and a ``perfgate.depends_on`` property."""
    from .failures import PerfgateWarning

    phases = {st.thresholds.gates[g].phase for g in _marker_names(item, "gate") if g in st.thresholds.gates}
    for ph in sorted(phases):
        for dep in st.thresholds.phases[ph].depends_on:
            d = st.decision(dep)
            if d is None:
                msg = f"phase {ph} depends on {dep}, which has no recorded decision yet"
            elif d.get("outcome") in ("failed", "fallback", "inconclusive"):
                msg = (f"phase {ph} depends on {dep}, whose recorded outcome is {d['outcome'].upper()} "
                       f"(run {d.get('run_id')}, triggered: {', '.join(d.get('triggered_fallbacks', [])) or 'none'}); "
                       f"see perfgate.decision({dep!r})")
            else:
                continue
            item.user_properties.append(("perfgate.depends_on", msg))
            item.warn(PerfgateWarning(msg))


@pytest.fixture
def perfgate(request: pytest.FixtureRequest) -> Perfgate:
    """Evaluate gates: ``perfgate.check(data, gate=None)``, ``perfgate.samples([...], "ms")``,
    ``perfgate.sample_until_decided(draw)``, ``perfgate.decision("phase1")``."""
    st = _state(request.config)
    if st is None:
        raise pytest.UsageError(
            "perfgate fixture used but no thresholds.toml was found: create one in the rootdir or pass "
            "--perfgate-thresholds PATH"
        )
    item = request.node
    bound = _marker_names(item, "gate")

    live = request.config.stash[LIVE]

    def record(v: Verdict, engines: list[Any]) -> None:
        d = v.to_dict()
        d.update(live.extras(v))
        if engines:
            d["engines"] = [str(e.get("name", e.get("model", "?"))) for e in engines]
            for e in engines:
                item.user_properties.append((ENGINE_PROPERTY, json.dumps(dict(e), default=str)))
        item.user_properties.append((VERDICT_PROPERTY, json.dumps(d, default=str, allow_nan=False)))
        item.user_properties.extend(v.user_properties())
        st.add_verdict(item.nodeid, d)

    return Perfgate(st, bound, record, request.config.stash[CONF].confidence, _say(request.config),
                    store=live.hook(item.nodeid))


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
    default: str | None = None
    aliases: dict[str, str] = {}
    for v in config.stash[CONF].engine or []:
        if "=" in v:
            role, _, name = v.partition("=")
            aliases[role.strip()] = name.strip()
        else:
            default = v.strip()
    return default, aliases


@pytest.fixture(scope="session")
def perfgate_thresholds(request: pytest.FixtureRequest) -> Any:
    """The validated thresholds.toml of this session (``.gates``, ``.params``, ``.engines``)."""
    st = _state(request.config)
    if st is None:
        raise pytest.UsageError("no thresholds.toml found: create one in the rootdir or pass --perfgate-thresholds PATH")
    return st.thresholds


@pytest.fixture
def perfgate_memory() -> Any:
    """Memory probes and gates: ``with perfgate_memory.probe() as p: work()`` then ``p.report``
    (skips, saying why, without a CUDA device); ``perfgate_memory.check(perfgate, report_or_sweep, gate)``."""
    from .memory.fixture import MemoryGates

    return MemoryGates(pytest.skip)


@pytest.fixture(scope="session")
def perfgate_engines(request: pytest.FixtureRequest) -> Generator[Any, None, None]:
    """Session-scoped engine manager: ``get(name)`` starts ``[engines.NAME]`` lazily, at most one
    engine alive at a time; ``run(name, requests, LoadConfig(...))`` measures and returns a RunResult."""
    from .enginelog import LoggedEngines
    from .engines.base import EngineError
    from .engines.manager import EngineManager

    st = _state(request.config)
    _default, aliases = _engine_aliases(request.config)
    said: list[LoggedEngines] = []
    mgr = EngineManager(st.thresholds.engines if st else {}, aliases, lambda m: said[0].say(m))
    capman = request.config.pluginmanager.getplugin("capturemanager")
    suspend = capman.global_and_fixture_disabled if capman is not None else contextlib.nullcontext
    engines = LoggedEngines(mgr, request.config.stash[CONF].out_dir, suspend, EngineError, _say(request.config))
    said.append(engines)
    request.config.stash[ENGINES] = engines
    try:
        yield engines
    finally:
        mgr.close()


@pytest.fixture
def perfgate_engine(request: pytest.FixtureRequest, perfgate_engines: Any) -> Any:
    """The started engine this test measures: ``@pytest.mark.engine(NAME)``, else
    ``--perfgate-engine NAME``, else the gate's ``engine =``, else the embedded ``baseline``."""
    from .engines.base import EngineError

    default, _aliases = _engine_aliases(request.config)
    name = _engine_name(request.node, _state(request.config), default)
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


def record_engine(item: pytest.Item, engine: Any) -> None:
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


MAX_FAILURE_LINES = 5  # + the test's header line: at most 6 lines per failing test


def _debugging(config: pytest.Config) -> bool:
    """``--tb=long`` or ``-vv`` bring back pytest's full report (tracebacks, captured output)."""
    return bool(config.option.tbstyle == "long" or config.option.verbose >= 2)


def _is_engine_error(exc: BaseException) -> bool:
    return any(c.__name__ == "EngineError" and c.__module__.startswith(__package__ or "pytest_perfgate")
               for c in type(exc).__mro__)


def _short_failure(item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> bool:
    """A gate failure, an engine error or a missing dependency is reported as its message alone: no
    traceback, no locals, no plugin frames; the engine's captured output goes to its log file. The
    crash line (short test summary, ``--tb=line``) names the gate and measured vs threshold."""
    from .failures import GateFailure, headline

    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is None or _debugging(item.config):
        return False
    if isinstance(exc, GateFailure):
        text, head = str(exc), headline(exc.verdict)
    elif item.stash.get(SHORT, False) or _is_engine_error(exc):
        text = str(exc.msg if isinstance(exc, pytest.fail.Exception) else exc).strip()
        head = text.splitlines()[0] if text else type(exc).__name__
        if _is_engine_error(exc):
            text = text or head
    else:
        return False
    lines = text.splitlines()
    if len(lines) > MAX_FAILURE_LINES and not _engine_tail(lines):
        lines = [*lines[: MAX_FAILURE_LINES - 1], f"... ({len(lines) - MAX_FAILURE_LINES + 1} more lines)"]
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


def _engine_tail(lines: list[str]) -> bool:
    """An engine start failure shows its log's last lines (once): exempt from the line cap."""
    return len(lines) > 1 and (lines[1].startswith("log: ") or (lines[1].startswith("last ") and " lines of " in lines[1]))


def _route_captured(item: pytest.Item, report: Any) -> None:
    """Move a failing engine test's captured output into its engine's log, out of the report."""
    if not any(f in getattr(item, "fixturenames", ()) for f in ENGINE_FIXTURES):
        return
    from .enginelog import append, log_path

    engines = item.config.stash.get(ENGINES, None)
    live = getattr(engines, "live", None) if engines is not None else None
    name = getattr(live, "name", None) or (sorted(engines.used)[-1] if engines is not None and engines.used else "session")
    path = log_path(item.config.stash[CONF].out_dir, name)
    kept = []
    for title, content in report.sections:
        if title.startswith("Captured "):
            append(path, f"{item.nodeid}: {title.lower()}", content)
        else:
            kept.append((title, content))
    report.sections[:] = kept


def _unevaluated_gates_error(item: pytest.Item, call: pytest.CallInfo[None], report: Any, st: RunState) -> None:
    """A gate test that failed before any verdict of its gate (engine failed to start, every request
    failed, an exception in the test) records an "error" verdict for each such gate, with the cause:
    the phase is then failed, never passed or "not run" for lack of data."""
    from .failures import GateFailure

    if call.excinfo is not None and isinstance(call.excinfo.value, GateFailure):
        return  # the test failed on a gate's own verdict
    try:
        gates = _marker_names(item, "gate")
    except pytest.UsageError:
        return
    done = {json.loads(v).get("gate") for k, v in item.user_properties if k == VERDICT_PROPERTY and isinstance(v, str)}
    missing = [g for g in dict.fromkeys(gates) if g in st.thresholds.gates and g not in done]
    if not missing:
        return
    if call.excinfo is not None and not isinstance(call.excinfo.value, pytest.fail.Exception):
        cause = call.excinfo.exconly()
    else:
        cause = str(call.excinfo.value) if call.excinfo is not None else report.longreprtext
    cause = " ".join(cause.split())
    if len(cause) > 500:
        cause = cause[:500] + "..."
    from .rules import resolve_confidence
    from .verdict import Verdict

    th = st.thresholds
    for name in missing:
        g = th.gates[name]
        v = Verdict.error(g, f"the test failed before the gate was evaluated ({report.when}): {cause}",
                          confidence=resolve_confidence(g, th))
        prop = (VERDICT_PROPERTY, json.dumps(v.to_dict(), default=str, allow_nan=False))
        item.user_properties.append(prop)
        if report.user_properties is not item.user_properties:
            report.user_properties.append(prop)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Results that could not be written fail the session (exit 1 instead of 0), after the
    recorder's last flush."""
    rec = session.config.pluginmanager.get_plugin("perfgate-recorder")
    if not isinstance(rec, Recorder) or rec.is_worker:
        return
    if session.config.stash.get(GATE_TESTS, 0):
        rec.mark_stale()
    if rec.write_errors and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rec = config.pluginmanager.get_plugin("perfgate-recorder")
    if isinstance(rec, Recorder):
        for m in rec.stale:
            terminalreporter.write_line(f"perfgate: {m}")


FEASIBILITY = pytest.StashKey[list[str]]()


def _check_feasibility(config: pytest.Config, th: Any) -> None:
    """Physical floors before anything is measured (floors/): the header names every gate whose
    threshold is below its floor on its engine's hardware; once the tests are collected, such a gate
    among them is a warning, or with ``--perfgate-strict-feasibility`` a usage error. Cheap: no
    torch, no model generation (embedded engines are checked when their models and this machine's
    probe are already cached)."""
    config.stash[FEASIBILITY] = []
    if hasattr(config, "workerinput"):
        return
    from .floors import check as check_floors
    from .floors.cli import cached_models

    default, aliases = _engine_aliases(config)
    try:
        from .floors import allreduce_from_decisions

        st = config.stash.get(STATE, None)
        ar = allreduce_from_decisions(st.recorded if st is not None else None)  # phase 3's measurement
        results, _notes = check_floors(th, aliases, default=default, models=cached_models(), probe=False,
                                       allreduce_s=ar)
    except Exception as e:  # a floor is advice: never break a session over it
        config.stash[FEASIBILITY] = [f"perfgate: floors not checked: {type(e).__name__}: {e}"]
        return
    bad = {r.gate: r.message() for r in results if not r.feasible}
    lines = [f"perfgate: {m}" for m in bad.values()]
    if results and not bad:
        lines.append(f"perfgate: floors: {len(results)} gate(s) within physical reach")
    config.stash[FEASIBILITY] = lines
    if bad:
        config.pluginmanager.register(_Infeasible(bad, bool(config.getoption("perfgate_strict_feasibility"))),
                                      "perfgate-feasibility")


class _Infeasible:
    """Warns (or, strict, stops) when a collected test is bound to a gate below its floor."""

    def __init__(self, bad: dict[str, str], strict: bool) -> None:
        self.bad, self.strict = bad, strict

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        selected = {g for it in session.items for g in _marker_names(it, "gate")}
        hit = [m for g, m in self.bad.items() if g in selected]
        if not hit:
            return
        if self.strict:
            raise pytest.UsageError("perfgate: --perfgate-strict-feasibility: " + "\n".join(hit))
        from .failures import PerfgateWarning

        for m in hit:
            session.config.issue_config_time_warning(PerfgateWarning(m), stacklevel=2)


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines: list[str] = config.stash.get(FEASIBILITY, [])
    return [*lines, *_no_fallback(config)]


def _no_fallback(config: pytest.Config) -> list[str]:
    """Gates with a threshold but no ``fallback``: allowed (not every target has a plan B yet), but
    said at the top of every run, and their failures say "fallback: none"."""
    st = _state(config)
    if st is None or hasattr(config, "workerinput"):
        return []
    bare = [g.name for g in st.thresholds.gates.values() if g.threshold is not None and not g.fallbacks]
    if not bare:
        return []
    return [f"perfgate: {len(bare)} gate(s) name no fallback plan, so their failures trigger none: {', '.join(bare)}"]
