"""One client worker process (``python -m pytest_perfgate.load.worker``), started by :mod:`.workers`.

Protocol, length-prefixed pickles (load/frames.py): the coordinator writes the job
on stdin (engine spec, requests, config, the worker's indices and offsets); the worker starts its
engine and answers ``("ready",)``; the coordinator writes the common start (``("start", ns)``);
the worker streams its finished records as ``("batch", pyarrow.RecordBatch)`` (load/parquet.py: up
to the job's ``batch`` records, or what finished in ``workers.FLUSH_S``; it keeps none of them) and
ends with ``("done", ClientHealth)``, or ``("failed", cause)``. A ``("stop",)`` on stdin ends the run early (sequential
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .frames import receive, send

if TYPE_CHECKING:
    from ..contract import RequestRecord


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent went before the death signal was armed
        os._exit(3)


def _batcher(out: Any, size: int) -> Callable[[RequestRecord | None], None]:
    """``flush(rec)``: keep ``rec`` for the next batch, sent at ``size`` records or when the last batch
    went ``FLUSH_S`` ago or more (a slow run sends each record at once); ``flush(None)``: the rest."""
    from ..contract import clock
    from .parquet import to_batch
    from .workers import FLUSH_S

    pending: list[RequestRecord] = []
    since = [0]
    lock = threading.Lock()

    def flush(rec: RequestRecord | None) -> None:
        with lock:
            _add(rec)

    def _add(rec: RequestRecord | None) -> None:
        if rec is not None:
            pending.append(rec)
        now = clock()
        if pending and (rec is None or len(pending) >= size or now - since[0] >= FLUSH_S * 1e9):
            send(out, ("batch", to_batch(pending)))
            pending.clear()
            since[0] = now

    return flush


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
    run.keep = False
    flush = _batcher(out, int(job.get("batch", 1)))
    run._finished = flush  # type: ignore[method-assign, assignment]

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
    flush(None)
    send(out, ("done", result.health))
    try:
        engine.stop()
    finally:
        out.close()
        sys.stderr.flush()
        os._exit(0)  # not a normal shutdown: the stdin watcher (a daemon thread) holds stdin's lock


if __name__ == "__main__":
    sys.exit(main())
