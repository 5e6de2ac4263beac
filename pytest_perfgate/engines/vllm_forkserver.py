"""Start vLLM's engine-core process from a warm fork server instead of a fresh interpreter (issue #16).

On the CPU, vLLM starts its engine core with ``spawn``: every engine start imports torch and vLLM
again in a new interpreter (20 s on an idle 2-core machine, 45 s under load), and with vLLM's
default multiprocessing executor a second time for the worker process. A fork server (Python's
``multiprocessing`` ``forkserver``) started once per session imports vLLM's engine-core modules
while the session imports vLLM itself; every engine core is then forked from it, already imported.
The server is a clean single-threaded process (no OpenMP pool, no engine loop thread), so forking
it is safe where forking the pytest process is not (a fork after torch ran a parallel region
hangs in OpenMP).

A fork-server child inherits the server's environment and standard output, not the caller's;
:class:`_EnvProcess` carries the caller's ``os.environ`` at ``Process()`` time into the child, and
points the child's fds 1 and 2 where the caller's point then (the engine's log while the engine
starts: ``enginelog.redirect_output``), as ``spawn`` would.
Used only for eager CPU engines (no inductor, whose settings are read at import); see
:func:`launching`.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.context
import multiprocessing.forkserver
import multiprocessing.util
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

# What an engine core imports on the CPU (a missing one is skipped by the server).
PRELOAD = [
    "vllm.v1.engine.core",
    "vllm.v1.executor.uniproc_executor",
    "vllm.v1.worker.cpu_worker",
    "vllm.v1.worker.cpu_model_runner",
    "vllm.model_executor.models.llama",
]


def _output_targets() -> tuple[str | None, str | None]:
    """Where this process's fds 1 and 2 point, as paths a child can open: a regular file's path,
    else this process's ``/proc`` entry for the fd (a pipe or a terminal); None where unknown."""
    out: list[str | None] = []
    for fd in (1, 2):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            out.append(None)
            continue
        out.append(target if target.startswith("/") and os.path.isfile(target) else f"/proc/{os.getpid()}/fd/{fd}")
    return out[0], out[1]


def _point_output(targets: tuple[str | None, str | None]) -> None:
    """Child side: fds 1 and 2 appended to ``targets`` (a target that cannot be opened is left as is)."""
    for fd, path in zip((1, 2), targets, strict=True):
        if path is None:
            continue
        try:
            new = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            continue
        os.dup2(new, fd)
        os.close(new)


def _with_env(env: Mapping[str, str], output: tuple[str | None, str | None], target: Callable[..., Any],
              args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """Child side: the caller's environment and output, then the real target."""
    os.environ.clear()
    os.environ.update(env)
    _point_output(output)
    return target(*args, **kwargs)


class _EnvProcess(multiprocessing.context.ForkServerProcess):
    def __init__(self, group: Any = None, target: Callable[..., Any] | None = None, name: str | None = None,
                 args: Any = (), kwargs: Mapping[str, Any] | None = None, *, daemon: bool | None = None) -> None:
        super().__init__(group, _with_env, name,
                         (dict(os.environ), _output_targets(), target, tuple(args), dict(kwargs or {})), daemon=daemon)


class _Context(multiprocessing.context.ForkServerContext):
    Process = _EnvProcess


CONTEXT = _Context()


def warm() -> None:
    """Start the fork server (idempotent); it imports :data:`PRELOAD` in the background. It is
    stopped when this process exits (:func:`stop`)."""
    global _STOP_REGISTERED
    CONTEXT.set_forkserver_preload(PRELOAD)
    multiprocessing.forkserver.ensure_running()
    if not _STOP_REGISTERED:
        atexit.register(stop)
        # the tracker last: after multiprocessing's own exit work (semaphore finalizers talk to it)
        multiprocessing.util.Finalize(None, stop_resource_tracker, exitpriority=-100)
        _STOP_REGISTERED = True


_STOP_REGISTERED = False


TRACKER_GRACE_S = 10.0  # the resource tracker's own cleanup (leaked semaphores) before it is SIGKILLed


def stop() -> None:
    """Stop the fork server now (at exit: the resource tracker it started is stopped after
    multiprocessing's own exit work, :func:`stop_resource_tracker`). Python's own shutdown only
    closes the server's "alive" pipe, which the server reads after its preload: an orphan would go
    on importing vLLM for tens of seconds."""
    server: Any = getattr(multiprocessing.forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        server._stop()  # closes the pipe, reaps the pid, forgets the address


def stop_resource_tracker(grace: float | None = None) -> None:
    """End multiprocessing's resource tracker, which ``forkserver.ensure_running`` starts as this
    process's child, and reap it. Python leaves it running at exit until it reads EOF on its pipe
    and has cleaned up: it outlived the session (1.5 s on an idle 2-core machine, longer on a busy
    one; seen alive after a failed engine start, issue 31), and for as long as any process that
    inherited the pipe (a forked engine core) lives. Here: close the pipe, wait up to ``grace``
    seconds for its own cleanup, then SIGKILL (it ignores SIGTERM and SIGINT) and reap it."""
    from multiprocessing import resource_tracker

    tracker: Any = getattr(resource_tracker, "_resource_tracker", None)
    fd, pid = getattr(tracker, "_fd", None), getattr(tracker, "_pid", None)
    if fd is None or pid is None:
        return
    tracker._fd = tracker._pid = None  # a later ensure_running() starts a new one
    with contextlib.suppress(OSError):
        os.close(fd)
    deadline = time.monotonic() + (TRACKER_GRACE_S if grace is None else grace)
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (reaped elsewhere)
            return
        if done or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if not done:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


@contextmanager
def launching() -> Iterator[None]:
    """While active, vLLM starts engine cores through the fork server (``AsyncLLM(...)`` inside)."""
    import importlib

    engine_utils: Any = importlib.import_module("vllm.v1.engine.utils")  # where vLLM starts engine cores
    warm()
    original = engine_utils.get_mp_context
    engine_utils.get_mp_context = lambda: CONTEXT
    try:
        yield
    finally:
        engine_utils.get_mp_context = original
