"""One client worker process (``python -m pytest_perfgate.load.worker``), started by :mod:`.workers`.

Protocol, length-prefixed pickles (load/frames.py): the coordinator writes the job
on stdin (engine spec, requests, config, the worker's indices and offsets); the worker starts its
engine and answers ``("ready",)``; the coordinator writes the common start (``("start", ns)``);
the worker streams ``("rec", RequestRecord)`` as each request finishes and ends with ``("done",
ClientHealth)``, or ``("failed", cause)``. A ``("stop",)`` on stdin ends the run early (sequential
sampling decided). The worker dies with its session: ``PR_SET_PDEATHSIG`` = SIGKILL (as the engine
watchdog's, engines/procguard.py) and EOF on stdin (the session's end of the pipe closed: killed,
SIGKILLed, Ctrl-C) both end it at once. Its own prints go to stderr (stdout carries the frames).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from typing import Any

from .frames import receive, send


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent went before the death signal was armed
        os._exit(3)


def main() -> int:
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # prints (an engine's notes) go to stderr
    job = receive(inp)
    if job is None:
        return 3
    _die_with_parent(job["parent"])
    from ..contract import LOOP, run_sync
    from .runner import Part, _Run

    try:
        path, name, args, state = job["engine"]
        module, _, cls = path.partition(":")
        engine = getattr(importlib.import_module(module), cls)(name, args)
        for key, value in state.items():  # what the session's start() learned (no second probe)
            setattr(engine, key, value)
        if not state:
            engine.start()
    except Exception as e:  # the coordinator records it for this worker's requests
        send(out, ("failed", f"engine did not start in the worker: {type(e).__name__}: {e}"))
        return 1
    send(out, ("ready",))
    start = receive(inp)
    if start is None:
        os._exit(3)
    part = Part(job["part"][0], job["part"][1], start[1])
    run = _Run(engine, job["requests"], job["config"], None, None, (), part)
    lock = threading.Lock()

    def finished(rec: Any) -> None:
        with lock:
            send(out, ("rec", rec))

    run._finished = finished  # type: ignore[method-assign]

    def watch() -> None:  # ("stop",) ends the run early; EOF: the session is gone
        msg = receive(inp)
        if msg is None:
            os._exit(3)
        LOOP.get().call_soon_threadsafe(setattr, run, "stopped", True)
        if receive(inp) is None:
            os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
    try:
        result = run_sync(run.run())
    except Exception as e:
        send(out, ("failed", f"{type(e).__name__}: {e}"))
        return 1
    with lock:
        send(out, ("done", result.health))
    try:
        engine.stop()
    finally:
        out.close()
        sys.stderr.flush()
        os._exit(0)  # not a normal shutdown: the stdin watcher (a daemon thread) holds stdin's lock


if __name__ == "__main__":
    sys.exit(main())
