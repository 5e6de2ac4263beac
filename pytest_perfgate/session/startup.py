"""Session start-up checks and settings that need no pytest: the results directory, SIGTERM,
``--perfgate-engine`` values, the gates without a fallback plan, starting an engine's fork server
early."""

from __future__ import annotations

import atexit
import gc
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Thresholds

if TYPE_CHECKING:
    from ..store.live import LiveStore
    from .perfgate import RunState


@dataclass(frozen=True)
class PluginConfig:
    thresholds_path: Path | None
    out_dir: Path
    confidence: float | None
    inconclusive: str
    engine: list[str] | None
    searched: tuple[Path, ...] = ()  # where thresholds.toml was looked for (none found: the message names them)

    @classmethod
    def resolve(cls, opt: Any, ini: Callable[[str], Any], invocation_dir: Path, rootpath: Path,
                inipath: Path | None = None) -> PluginConfig:
        """CLI (``opt``: pytest's option namespace) > ini > default. Paths given on the command line
        are relative to the invocation directory, ini paths to the inifile's directory.

        Without ``--perfgate-thresholds`` or ini ``perfgate_thresholds``: the first existing
        ``thresholds.toml`` of :meth:`search_dirs`, never the rootdir alone, which pytest moves when
        an argument such as ``--perfgate-out /abs/dir`` names an existing directory outside the
        project. The default results directory is ``perfgate-results`` beside the inifile, else in
        the invocation directory."""
        ini_dir = inipath.parent if inipath is not None else rootpath
        path_s = opt.perfgate_thresholds or ini("perfgate_thresholds")
        path: Path | None
        searched: tuple[Path, ...] = ()
        if path_s:
            given = Path(path_s)
            path = given if given.is_absolute() else (invocation_dir if opt.perfgate_thresholds else ini_dir) / given
        else:
            searched = tuple(d / "thresholds.toml" for d in cls.search_dirs(invocation_dir, rootpath, inipath))
            path = next((p for p in searched if p.is_file()), None)
        out = Path(opt.perfgate_out or ini("perfgate_out") or "perfgate-results")
        if not out.is_absolute():
            out = (ini_dir if inipath is not None and not opt.perfgate_out else invocation_dir) / out
        return cls(path, out, opt.perfgate_confidence, opt.perfgate_inconclusive or "", opt.perfgate_engine, searched)

    @staticmethod
    def search_dirs(invocation_dir: Path, rootpath: Path, inipath: Path | None) -> list[Path]:
        """Where ``thresholds.toml`` is looked for, in order (README "Options", docs/quickstart.md):
        the inifile's directory; the invocation directory and each parent up to the first that is
        the inifile's directory, the rootdir or holds ``.git`` (a repository's root); the rootdir."""
        stops = {rootpath.resolve(), *([inipath.parent.resolve()] if inipath is not None else [])}
        dirs: list[Path] = [inipath.parent] if inipath is not None else []
        d = invocation_dir.resolve()
        while True:
            dirs.append(d)
            if d in stops or (d / ".git").exists() or d.parent == d:
                break
            d = d.parent
        dirs.append(rootpath)
        return list(dict.fromkeys(dirs))

    def not_found(self) -> str:
        """Where thresholds.toml was looked for, for the "no thresholds.toml" messages."""
        if not self.searched:
            return "give --perfgate-thresholds PATH"
        return f"looked in {', '.join(str(p.parent) for p in self.searched)}; give --perfgate-thresholds PATH"


def unwritable(out: Path) -> str | None:
    """Why the results directory can't be written (checked at start: a usage error, exit 4), or None.

    Nothing is created here: an existing directory gets a probe file, a missing one its nearest
    existing parent. A symbolic link in it that the session would write through (``samples/``,
    ``engines/``, ``history.sqlite``, ...: :func:`~pytest_perfgate.runtime.links.planted`) is refused."""
    import tempfile

    from ..runtime.links import planted

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
    return planted(out) if probe == out else None


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"perfgate: terminated by signal {signum}")


def install_sigterm(add_cleanup: Callable[[Callable[[], None]], None]) -> None:
    """Turn SIGTERM (CI cancellation, ``timeout``, ``kill``) into KeyboardInterrupt, like Ctrl-C, so
    that pytest finishes the session: fixtures are torn down (engines stopped, servers killed) and
    the results are written. Only when nobody else handles SIGTERM; ``add_cleanup`` restores it."""
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

    add_cleanup(restore)


_EXIT_FREEZE = False

# What the filter of :func:`freeze_heap_at_exit` drops: nanobind's report of the objects the frozen
# heap keeps alive (triton's bindings: "nanobind: leaked 4 instances! ... leaked 514 functions!").
_NANOBIND_FILTER = r"""
import sys
out, inp, report = sys.stdout.buffer, sys.stdin.buffer, False
for line in inp:
    if line.startswith(b"nanobind: leaked ") or (report and line.startswith(
            (b" - leaked ", b" - ... skipped", b"nanobind: this is likely", b"See https://nanobind."))):
        report = True
        continue
    report = False
    out.write(line)
    out.flush()
"""


def _freeze_and_filter() -> None:
    """The exit handler: standard error goes through :data:`_NANOBIND_FILTER` (a child that copies
    every other line to the real standard error, so a real shutdown error still shows), then the
    heap is frozen. Without the filter (it cannot be started), the heap is frozen all the same."""
    import os
    import subprocess
    import sys

    try:
        sys.stderr.flush()
        child = subprocess.Popen([sys.executable, "-S", "-I", "-c", _NANOBIND_FILTER], stdin=subprocess.PIPE,
                                 stdout=os.dup(2), stderr=subprocess.DEVNULL, close_fds=True)
        assert child.stdin is not None
        os.dup2(child.stdin.fileno(), 2)  # the pipe closes when this process exits; the filter then ends
        child.stdin.close()
    except (OSError, ValueError, AssertionError):
        pass
    gc.freeze()


def freeze_heap_at_exit() -> None:
    """Once per process: at interpreter exit, move every object into the garbage collector's
    permanent generation (``gc.freeze``) before Python's own shutdown collections run. With torch,
    transformers and vLLM loaded those collections walk millions of objects: 4.2-5.4 s after the
    last test on the busy 2-core runner, 0.5-0.6 s frozen (``benchmarks/bench_startup.py --exit``).
    Registered with atexit, so it runs after every exit handler registered later (vLLM's, the fork
    server's stop); objects are still freed by reference counting, only cycles are left to the
    operating system. nanobind (triton's bindings) reports the objects the frozen heap keeps as
    "leaked" after Python's shutdown; those lines, and only those, are filtered out of standard error
    (:func:`_freeze_and_filter`)."""
    global _EXIT_FREEZE
    if not _EXIT_FREEZE:
        atexit.register(_freeze_and_filter)
        _EXIT_FREEZE = True


class _TeardownGC:
    """The heap frozen while pytest tears a perfgate session down: pytest's unraisable-exception
    plugin runs a full garbage collection at unconfigure and another in its cleanup, 0.8 s each with
    torch and vLLM loaded on the 2-core runner. :meth:`freeze` in the first unconfigure hook,
    :meth:`unfreeze` in the last cleanup (registered before pytest's own), so an in-process session
    (pytester) leaves nothing frozen. Cyclic garbage from before the freeze is collected later, and
    an unraisable exception in its finalizer is then not reported by this session."""

    def __init__(self) -> None:
        self.frozen = False

    def freeze(self) -> None:
        if not self.frozen and not gc.get_freeze_count():  # someone else's freeze is left alone
            gc.freeze()
            self.frozen = True

    def unfreeze(self) -> None:
        if self.frozen:
            gc.unfreeze()
            self.frozen = False


TEARDOWN_GC = _TeardownGC()


def wait_for_stop(wait: Callable[[float], str | None] | None) -> str | None:
    """Wait for the session's last engine stop (``Engines.close_in_background``), a generous
    load-scaled 180 s at most; what went wrong, or None."""
    from ..runtime.timeouts import scaled

    return wait(scaled(180)) if wait is not None else None


def engine_aliases(values: Sequence[str] | None) -> tuple[str | None, dict[str, str]]:
    """``--perfgate-engine`` values: the default engine (``NAME``) and the roles (``ROLE=NAME``)."""
    default: str | None = None
    aliases: dict[str, str] = {}
    for v in values or []:
        if "=" in v:
            role, _, name = v.partition("=")
            aliases[role.strip()] = name.strip()
        else:
            default = v.strip()
    return default, aliases


def unknown_engines(values: Sequence[str] | None, th: Thresholds) -> str | None:
    """The first ``--perfgate-engine`` value naming no engine, as a message; None when all exist."""
    from ..config import BUILTIN_ENGINES

    for v in values or []:
        name = (v.partition("=")[2] if "=" in v else v).strip()
        if name not in th.engines and name not in BUILTIN_ENGINES:
            known = ", ".join([*th.engines, *BUILTIN_ENGINES])
            return f"--perfgate-engine {v}: no [engines.{name}] in {th.path.name} (engines: {known})"
    return None


def no_fallback(th: Thresholds) -> list[str]:
    """Gates with a threshold but no ``fallback``: allowed (not every target has a plan B yet), but
    said at the top of every run, and their failures say "fallback: none"."""
    bare = [g.name for g in th.gates.values() if g.threshold is not None and not g.fallbacks]
    if not bare:
        return []
    from ..verdicts.wording import NAMES_SHOWN, some_names

    return [f"perfgate: {len(bare):,} gate(s) name no fallback plan, so their failures trigger none: "
            f"{some_names(bare)}" + (" (all: perfgate gates)" if len(bare) > NAMES_SHOWN else "")]


def missing_engines(th: Thresholds, aliases: Mapping[str, str],
                    tests: Sequence[tuple[str, str | None]]) -> tuple[str, frozenset[str]] | None:
    """Can the engines the selected tests use start here? ``tests``: (test id, its one engine, or
    None: any engine, those of thresholds.toml, else the built-in ones). A missing vLLM, tokenizers,
    transformers (or CUDA for a GPU engine): (the one-line message with the command that fixes it,
    the test ids it stops); None when nothing is missing."""
    from ..config import BUILTIN_ENGINES
    from ..contract import EngineError
    from ..engines.manager import EngineManager, uses_embedded
    from ..engines.requirements import check

    wanted: dict[str, list[str]] = {}  # engine name -> test ids
    for nodeid, one in tests:
        for n in [one] if one is not None else [*th.engines] or [*BUILTIN_ENGINES]:
            wanted.setdefault(n, []).append(nodeid)

    mgr = EngineManager(th.engines, dict(aliases))
    specs = []
    for n in wanted:
        try:
            spec = mgr.spec(n)
        except EngineError:
            continue  # an unknown engine: the fixture says so
        specs.append((n, spec.kind, spec.args, uses_embedded(dict(spec.args))))
    missing = check(specs)
    if missing is None:
        return None
    return missing.message(), frozenset(i for n in missing.engines for i in wanted[n])


def phases_named(markexpr: str, phases: Iterable[str]) -> list[str]:
    """The phases a ``-m`` expression selects by name and does not negate: ``phase1``,
    ``phase1 or phase2``; ``not phase3`` and ``""`` name none. A hint, not pytest's own evaluation."""
    named = []
    for ph in phases:
        hits = list(re.finditer(rf"(?<![\w.-])(not\s+)?{re.escape(ph)}(?![\w.-])", markexpr))
        if any(m.group(1) is None for m in hits):
            named.append(ph)
    return named


def prewarm(th: Thresholds, default: str | None, aliases: Mapping[str, str], markexpr: str,
            out_dir: Path | None = None) -> str | None:
    """``pytest -m phase1``: start what the phase's first engine needs while pytest collects
    (:meth:`EngineManager.prewarm`: vLLM's fork server for the embedded CPU default). Engines are
    those of the named phases' gates (``engine =``, else the default engine, else ``baseline``).
    The server starts with its output in that engine's log under ``out_dir`` (``engines/<engine>.log``,
    as every engine start: :mod:`.enginelog`), never on the terminal. Returns the engine prepared
    for, or None."""
    from ..engines.manager import EngineManager
    from .enginelog import log_path, redirect_output

    selected = set(phases_named(markexpr, th.phases))
    names = list(dict.fromkeys(g.engine or default or "baseline" for g in th.gates.values() if g.phase in selected))
    if not names:
        return None
    output = None if out_dir is None else (lambda name: redirect_output(log_path(out_dir, name), out_dir))
    return EngineManager(th.engines, dict(aliases)).prewarm(names, output)


def live_store(st: RunState, invocation_dir: Path, options: Any) -> LiveStore:
    """The session's data files, history and baseline (store/live.py); ``options``: pytest's, whose
    ``perfgate_baseline`` is the ``--perfgate-baseline`` value and ``perfgate_history`` the
    ``--perfgate-history`` one (else ``$PERFGATE_HISTORY``, else ``[perfgate] history``, else the
    results directory's history.sqlite). A value naming nothing usable raises ValueError (HistoryError)."""
    from ..store.backend import choose
    from ..store.baseline import resolve
    from ..store.live import LiveStore

    baseline = getattr(options, "perfgate_baseline", None)
    at = choose(getattr(options, "perfgate_history", None), st.thresholds.settings.history, st.out_dir,
                base=Path(st.thresholds.path).parent)
    ref = resolve(baseline, st.out_dir, invocation_dir, at) if baseline else None
    return LiveStore(st.out_dir, st.thresholds, st.run_id, ref, history_at=at)
