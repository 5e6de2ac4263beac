"""Engine output goes to ``<results>/engines/<engine>.log``, never into a test's failure report.

:func:`redirect_output` points file descriptors 1 and 2 at the log while an engine starts, so the
engine's own lines and every process it spawns (vLLM's EngineCore and workers inherit them) write
there. :class:`LoggedEngines` wraps the session's engine manager: each start is logged, and a failed
start names the log and shows its last lines once (later tests needing that engine get one line).
No pytest import: the plugin passes in a context manager that suspends pytest's capture.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..runtime.links import check, open_nofollow
from ..runtime.redaction import clean

TAIL_LINES = 15


def log_path(out_dir: Path, engine: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", engine) or "engine"
    return out_dir / "engines" / f"{safe}.log"


@contextlib.contextmanager
def redirect_output(path: Path, root: Path | None = None) -> Iterator[int]:
    """fds 1 and 2 (and ``sys.stdout``/``sys.stderr``) append to ``path`` inside the block, which
    gets a duplicate of the original stdout to tell the user what is going on. ``root``: the results
    folder; no link below it is written through (``LinkInResults``, an ``OSError``)."""
    fd = _open_log(path, root)
    for s in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            s.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield saved[0]
    finally:
        for s in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                s.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)


def _open_log(path: Path, root: Path | None) -> int:
    """The log opened for appending: never through a link in the results folder (``O_NOFOLLOW``)."""
    check(path, root if root is not None else path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    return open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)


# The loggers of the engines' libraries whose handlers write to the terminal (vLLM's "[shutdown]" lines).
LIBRARY_LOGGERS = ("vllm",)


def retarget_handlers(prefixes: tuple[str, ...], path: Path, root: Path | None = None) -> Callable[[], None]:
    """Point every ``logging.StreamHandler`` of the loggers named ``prefixes`` (and their children)
    that writes to ``sys.stdout``/``sys.stderr`` at ``path``; returns the function that puts them back."""
    import logging

    names = [n for n in logging.Logger.manager.loggerDict if any(n == p or n.startswith(p + ".") for p in prefixes)]
    handlers = {id(h): h for n in names for h in getattr(logging.getLogger(n), "handlers", [])
                if type(h) is logging.StreamHandler and h.stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}
    if not handlers:
        return lambda: None
    try:
        f = os.fdopen(_open_log(path, root), "a", encoding="utf-8", errors="replace")
    except OSError:
        return lambda: None
    old = {k: h.setStream(f) for k, h in handlers.items()}

    def restore() -> None:
        for k, h in handlers.items():
            if h.stream is f:
                h.setStream(old[k])
        f.close()

    return restore


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    try:
        text = path.read_bytes()[-200_000:].decode("utf-8", "replace")
    except OSError:
        return []
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]


def append(path: Path, header: str, text: str, root: Path | None = None) -> None:
    """Add a test's captured output to an engine log (never raises: logs are a courtesy; nothing
    goes through a link in the results folder ``root``)."""
    if not text.strip():
        return
    try:
        with os.fdopen(_open_log(path, root), "a", encoding="utf-8", errors="replace") as f:
            f.write(f"----- {header} -----\n{text.rstrip()}\n")
    except OSError:
        pass


class LoggedEngines:
    """The engine manager, with engine output in log files and start failures told once."""

    def __init__(self, manager: Any, out_dir: Path, suspend: Callable[[], AbstractContextManager[Any]],
                 error: type[Exception], say: Callable[[str], None] = print) -> None:
        self._mgr = manager
        self._say = say
        self._terminal: int | None = None  # the real stdout while fds 1 and 2 go to a log
        self._out = out_dir
        self._suspend = suspend
        self._error = error
        self._told: set[str] = set()
        self.used: set[str] = set()  # engine names started (or attempted) in this session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mgr, name)

    def say(self, msg: str) -> None:
        """Progress lines reach the terminal even while the engine's output goes to its log."""
        if self._terminal is None:
            self._say(msg)
            return
        with contextlib.suppress(OSError):
            os.write(self._terminal, (msg + "\n").encode("utf-8", "replace"))

    def log(self, name: str) -> Path:
        return log_path(self._out, name)

    def get(self, name: str) -> Any:
        real = self._mgr.spec(name).name  # an unknown name raises the manager's own one-line error
        live = self._mgr.live
        if live is not None and live.name == real:
            return live
        self.used.add(real)
        path = self.log(real)
        failure = ""
        try:
            check(path, self._out)
        except OSError as e:  # a link planted in the results folder after the start: nothing goes through it
            raise self._error(f"[engines.{real}] not started: engine log {path}: {e}") from None
        try:
            with self._suspend(), redirect_output(path, self._out) as terminal:
                self._terminal = terminal
                try:
                    return self._mgr.get(name)
                finally:
                    self._terminal = None
        except self._error as e:
            failure = str(e)
        first = real not in self._told
        text = self.failure_text(failure, path, first)
        if first:
            append(path, f"perfgate: engine {real!r} failed to start", failure, self._out)
        self._told.add(real)
        raise self._error(text)

    def run(self, name: str, requests: Any, config: Any, *, stop: Callable[[Any], bool] | None = None,
            slos: Mapping[str, float] | None = None) -> Any:
        """Start (or reuse) engine ``name`` and run ``config`` with progress lines; a RunResult."""
        from ..load.runner import run_load
        from ..runtime.progress import progress_printer

        engine = self.get(name)
        return run_load(engine, requests, config, progress_printer(self.say, engine.name), stop, slos=slos)

    def close_in_background(self) -> Callable[[float], str | None]:
        """The session's last stop on a thread (the manager's), with what the engine's library logs
        meanwhile in the engine's log: fds 1 and 2 stay the terminal's (the main thread writes the
        results then), so the library's terminal handlers are pointed at the log until ``wait``."""
        live = self._mgr.live
        if live is None:
            return self._mgr.close_in_background()  # type: ignore[no-any-return]
        restore = retarget_handlers(LIBRARY_LOGGERS, self.log(live.name), self._out)
        wait = self._mgr.close_in_background()

        def waited(timeout_s: float) -> str | None:
            try:
                return wait(timeout_s)  # type: ignore[no-any-return]
            finally:
                restore()

        return waited

    def failure_text(self, message: str, path: Path, first: bool) -> str:
        """The manager's first line; then, the first time, the last lines of the engine's output
        (or, for a server with its own log, the lines the manager quoted from it)."""
        lines = message.strip().splitlines() or ["engine failed to start"]
        head, rest = lines[0], lines[1:]
        if not first:
            return f"{head} (told above; log: {path})"
        quoted = [ln for ln in rest if ln.strip() and not ln.startswith("--- ")]
        # A server engine quotes its own log (its error is at the end): those lines, which go into
        # ``path`` with the failure; an in-process engine's output is already in ``path``.
        # the server's own words: made printable (a launched server's colours, a hostile one's escapes)
        shown = [clean(ln, 300, lines=True) for ln in (quoted[-TAIL_LINES:] if quoted else tail(path))]
        text = f"{head}\nlast {len(shown)} lines of {path}:" if shown else f"{head}\nlog: {path}"
        return text + "".join("\n  " + ln for ln in shown)


def route_captured(out_dir: Path, engine: str | None, nodeid: str,
                   sections: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A failing engine test's captured output goes to its engine's log (``session.log`` when no
    engine started); returns the report sections left."""
    path = log_path(out_dir, engine or "session")
    kept = []
    for title, content in sections:
        if title.startswith("Captured "):
            append(path, f"{nodeid}: {title.lower()}", content, out_dir)
        else:
            kept.append((title, content))
    return kept
