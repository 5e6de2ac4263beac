"""pytest glue: options, markers, fixtures, reporting hooks. Everything else lives in the core.

Loaded through the ``pytest11`` entry point; imports nothing heavy (numpy, scipy, vllm, aiohttp are
imported inside fixtures and hooks when a gate is evaluated).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config import ConfigError, load_thresholds
from .session import ENGINE_PROPERTY, FALLBACK_PROPERTY, VERDICT_PROPERTY, Perfgate, RunState

if TYPE_CHECKING:
    from .verdict import Verdict

STATE = pytest.StashKey["RunState | None"]()
CONF = pytest.StashKey["PluginConfig"]()
RANK = pytest.StashKey[Any]()  # distributed.ranks.RankEnv of this process (torchrun / srun)


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
    st = RunState.start(th, pc.out_dir, inconclusive, config.rootpath)
    config.stash[STATE] = st
    if _rank(config).writes:  # under torchrun/srun only rank 0 evaluates gates and writes results
        config.pluginmanager.register(_Recorder(config, st), "perfgate-recorder")
    _install_sigterm(config)
    _check_feasibility(config, th)


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


def pytest_runtest_setup(item: pytest.Item) -> None:
    st = _state(item.config)
    if st is None:
        return
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

    def record(v: Verdict, engines: list[Any]) -> None:
        d = v.to_dict()
        if engines:
            d["engines"] = [str(e.get("name", e.get("model", "?"))) for e in engines]
            for e in engines:
                item.user_properties.append((ENGINE_PROPERTY, json.dumps(dict(e), default=str)))
        item.user_properties.append((VERDICT_PROPERTY, json.dumps(d, default=str, allow_nan=False)))
        item.user_properties.extend(v.user_properties())
        st.add_verdict(item.nodeid, d)

    return Perfgate(st, bound, record, request.config.stash[CONF].confidence, _say(request.config))


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
    from .engines.manager import EngineManager

    st = _state(request.config)
    _default, aliases = _engine_aliases(request.config)
    mgr = EngineManager(st.thresholds.engines if st else {}, aliases, _say(request.config))
    try:
        yield mgr
    finally:
        mgr.close()


@pytest.fixture
def perfgate_engine(request: pytest.FixtureRequest, perfgate_engines: Any) -> Any:
    """The started engine this test measures: ``@pytest.mark.engine(NAME)``, else
    ``--perfgate-engine NAME``, else the gate's ``engine =``, else the embedded ``baseline``."""
    from .engines.base import EngineError

    default, _aliases = _engine_aliases(request.config)
    m = request.node.get_closest_marker("engine")
    name = m.args[0] if m and m.args else None
    if name is None and default is None:
        st = _state(request.config)
        for g in _marker_names(request.node, "gate"):
            if st is not None and g in st.thresholds.gates and st.thresholds.gates[g].engine:
                name = st.thresholds.gates[g].engine
                break
    name = name or default or "baseline"
    failure: str | None = None
    try:
        engine = perfgate_engines.get(name)
    except EngineError as e:
        failure = str(e)
    if failure is not None:  # outside the except block: the message once, no exception chain
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
    if st is not None and report.when == "call":
        lines = [json.loads(v)["summary"] for k, v in item.user_properties if k == VERDICT_PROPERTY and isinstance(v, str)]
        if lines:
            report.sections.append(("perfgate verdicts", "\n".join(lines)))
    return report


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
    from .verdict import Verdict

    th = st.thresholds
    for name in missing:
        g = th.gates[name]
        v = Verdict(
            gate=g.name, phase=g.phase, outcome="error", metric=g.metric, statistic=g.statistic.text,
            observed=float("nan"), lower=float("nan"), upper=float("nan"), n=0,
            confidence=g.confidence or th.settings.confidence, method="none", unit=g.unit or "",
            direction=g.direction, threshold=g.threshold.base if g.threshold else None,
            baseline=g.baseline.base if g.baseline else None, fallbacks=g.fallbacks,
            note=f"the test failed before the gate was evaluated ({report.when}): {cause}",
        )
        prop = (VERDICT_PROPERTY, json.dumps(v.to_dict(), default=str, allow_nan=False))
        item.user_properties.append(prop)
        if report.user_properties is not item.user_properties:
            report.user_properties.append(prop)


class _Recorder:
    """Collects verdicts from test reports (also those forwarded by xdist workers) and writes results."""

    def __init__(self, config: pytest.Config, st: RunState) -> None:
        self.config = config
        self.st = st
        self.is_worker = hasattr(config, "workerinput")
        self.written: list[Path] = []

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.st.recorded_error:
            import warnings

            warnings.warn(pytest.PytestWarning(f"perfgate: {self.st.recorded_error}"), stacklevel=1)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        st = self.st
        props = list(report.user_properties)
        fallback = next((v for k, v in props if k == FALLBACK_PROPERTY), None)
        if not (report.when == "call" or (report.when == "setup" and not report.passed)):
            return
        st.add_properties(report.nodeid, props)
        if isinstance(fallback, str):
            reason = ""
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            elif report.failed and report.longreprtext:
                reason = report.longreprtext.strip().splitlines()[-1]
            st.add_fallback_test(report.nodeid, fallback, report.outcome, reason)
        if not self.is_worker:
            self._flush()

    def _flush(self, reports: bool = True) -> dict[str, Any] | None:
        """decisions.json, then (``reports``) gates.xml / summary.md / report.html: all atomic, after
        every test, so a killed run leaves complete files with everything measured up to then."""
        import warnings

        try:
            doc = self.st.flush()
        except OSError as e:  # never lose the test run over a results directory problem
            warnings.warn(f"perfgate: could not write {self.st.out_dir}: {e}", stacklevel=1)
            return None
        if reports and self.st.all_verdicts():
            from .writers import write_all

            phases = sorted({v["phase"] for v in self.st.all_verdicts()})
            try:
                written = write_all(doc, self.st.out_dir, phases=phases, inconclusive=self.st.inconclusive)
            except Exception as e:  # the writers' own problems are reported, never fatal to the run
                warnings.warn(f"perfgate: could not write reports in {self.st.out_dir}: {e}", stacklevel=1)
                written = list(getattr(e, "written", []))
            self.written = [self.st.out_dir / "decisions.json", *written]
        return doc

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        st = self.st
        if self.is_worker or (not st.all_verdicts() and not st.fallback_tests):
            return
        self._flush()

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        st = self.st
        if self.is_worker or not st.all_verdicts():
            return
        from .table import gate_table

        tr = terminalreporter
        tr.section("perfgate", sep="=", bold=True)
        for line in gate_table(st.all_verdicts()):
            tr.write_line(line)
        triggered = sorted({f for v in st.all_verdicts() if v["outcome"] == "fail" for f in v.get("fallbacks", [])})
        if triggered:
            tr.write_line("")
            tr.write_line("triggered fallbacks:")
            for f in triggered:
                fb = st.thresholds.fallbacks[f]
                tr.write_line(f"  {f}: {fb.title}" + (f" ({fb.doc})" if fb.doc else "") + (f" [cost: {fb.cost}]" if fb.cost else ""))
        for t in st.fallback_tests.values():
            tr.write_line(f"fallback test {t['test']}: {t['outcome']}" + (f" ({t['reason']})" if t["reason"] else ""))
        tr.write_line("")
        for p in self.written:
            tr.write_line(f"perfgate: wrote {p}")


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
        results, _notes = check_floors(th, aliases, default=default, models=cached_models(), probe=False)
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
