"""Client worker processes: one run's schedule split over ``workers`` processes (``LoadConfig.workers``,
``[perfgate] workers``, ``--perfgate-workers``; ``"auto"``: usable cores - 1, at least 1).

* **The global arrival process is the one asked for.** An open loop's send times are drawn once,
  here, exactly as one process draws them (same seed, same ``exact_rate``); each worker sends its
  share of the requests at their global times, from a common start on CLOCK_MONOTONIC (the clock
  of every record: ``perf_counter_ns``, system-wide on Linux) that the coordinator picks once every
  worker is ready. Requests are dealt round-robin, except that every turn of a multi-turn session
  goes to one worker (its turns wait for each other there, load/replay.py).
* **Concurrency is held globally** by shares: ``concurrency = C`` over W workers gives each
  ``C // W`` (the first ``C % W`` one more; at most C workers). A closed loop keeps C in flight in
  all; an open loop's cap is then per share (a worker at its cap waits while another has room).
* **Records stream as columns**: each worker sends its finished records in Arrow batches
  (load/parquet.py; up to ``BATCH`` records or ``FLUSH_S`` of them, one at a time for a run with a
  ``stop``), and the coordinator appends them to a Parquet spool as they come: its memory holds no
  Python object per request. They merge in index order at the end, read back once as numpy
  columns (``RunResult.from_columns``; a list of records for a short run).
* **Warm-up** runs first, one at a time, in this process; counters are snapshotted here around the
  run; progress lines and ``stop`` (sequential sampling) see every batch as it arrives (a
  ``stop`` reaches the workers as a message). Budgets (``max_seconds``, ``drain_seconds``) run
  from the common start in each worker.
* **Health per worker**: each worker's loop lag, send lag and CPU share (load/health.py) are in
  ``RunResult.worker_health``; ``RunResult.health`` is the worst of each (load/validity.py).
* **A worker that dies** keeps the records it sent; the rest of its requests are recorded as
  failed with the cause (exit status, its last stderr line).
* **No worker outlives the session** (load/worker.py): a death signal and EOF on its stdin end it
  when the session is killed (SIGKILL included); on Ctrl-C or any error here every worker is
  killed before this returns.

An engine is rebuilt in each worker from its ``worker_spec()`` (the ``openai`` kind: a client of a
server); an engine without one (an embedded vLLM) runs in this process only.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from ..config.load import MAX_WORKERS, shown
from ..contract import Engine, Request, RequestRecord, clock, run_sync
from .frames import receive, send
from .health import ClientHealth
from .parquet import Spool, records_of, run_of, to_batch
from .replay import trace_offsets_ns
from .result import RunResult
from .schedule import LoadConfig, LoadConfigError, RayWorkers, parse_ray, send_offsets_ns

Progress = Callable[[int, int, float], None]
Stop = Callable[[RunResult], bool]
Share = tuple[tuple[int, ...], tuple[int, ...] | None]  # a worker's request indices and their send offsets


class Home(Protocol):
    """The session's own run (load/runner.py's): its warm-up, counters and warm-up records."""

    records: list[RequestRecord]
    requests: Sequence[Request]

    async def warm_up(self) -> None: ...

    async def _counters(self) -> dict[str, float]: ...

    def counter_notes(self) -> list[str]: ...

WORKER_ENV = "PERFGATE_CLIENT_WORKER_OF"  # a worker's environment names its session's pid
READY_TIMEOUT_S = 120.0  # a worker that never says ready (an import that hangs): the run fails
START_MARGIN_NS = 100_000_000  # the common start, after every worker got it
BATCH = 2048  # a worker sends its records when it has this many ...
FLUSH_S = 0.2  # ... or at a finished request this long or more after its last batch


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def batch_size(stop: Stop | None) -> int:
    """Records per batch from a worker: one for a run with a ``stop`` (it is asked after each)."""
    return 1 if stop is not None else BATCH


def resolve_workers(spec: int | str) -> int | RayWorkers:
    """``N`` or ``"auto"`` (usable cores - 1, at least 1) as a worker count, ``ray://...`` as the
    Ray cluster's workers (load/ray_workers.py); a clear error otherwise."""
    if isinstance(spec, str) and spec.strip().startswith("ray://"):
        got = parse_ray(spec)
        if importlib.util.find_spec("ray") is None:  # said at start, not as a traceback inside the first load run
            raise LoadConfigError(f"workers {shown(spec)}: workers on a Ray cluster need Ray, which is not "
                                  "installed here: pip install 'pytest-perfgate[ray]'")
        return got
    if spec == "auto":
        return max(1, usable_cores() - 1)
    text = str(spec).strip()
    if not (text.isascii() and text.isdigit() and text.strip("0")) or isinstance(spec, bool):
        raise LoadConfigError(f'workers must be a positive integer, "auto" or "ray://HOST:PORT", got {shown(spec)}')
    if len(text.lstrip("0")) > 6 or int(text) > MAX_WORKERS:  # no int() of a 5,000-digit value
        raise LoadConfigError(f"workers: at most {MAX_WORKERS} client worker processes, got {shown(spec)}")
    return int(text)


def assign(requests: Sequence[Request], n: int, workers: int) -> list[list[int]]:
    """The measured request indices of each worker: round-robin, a session's turns on one worker."""
    out: list[list[int]] = [[] for _ in range(workers)]
    sessions: dict[str, int] = {}
    dealt = 0
    for i in range(n):
        r = requests[i % len(requests)]
        if r.session:
            k = sessions.setdefault(r.session, len(sessions) % workers)
        else:
            k, dealt = dealt % workers, dealt + 1
        out[k].append(i)
    return out


def plan(requests: Sequence[Request], config: LoadConfig) -> list[tuple[Share, LoadConfig]]:
    """Each worker's share (indices, their global send offsets) and config."""
    n = config.num_requests if config.num_requests is not None else len(requests)
    w = min(config.workers, n, config.concurrency or n)
    offsets = None
    if config.open_loop:
        offsets = (trace_offsets_ns(requests, config) if config.mode == "trace" else send_offsets_ns(config))
        assert offsets is not None
    out = []
    for k, idx in enumerate(assign(requests, n, w)):
        if not idx:
            continue
        share = None if config.concurrency is None else config.concurrency // w + (k < config.concurrency % w)
        cfg = replace(config, workers=1, warmup=0, concurrency=share, num_requests=len(idx), gauge_interval=None)
        out.append(((tuple(idx), tuple(int(offsets[i]) for i in idx) if offsets is not None else None), cfg))
    return out


class _Worker:
    """One worker process and the threads reading its frames (into ``inbox``) and its stderr tail."""

    def __init__(self, k: int, inbox: queue.Queue[tuple[int, Any]]) -> None:
        # the worker imports what this process imports (this package first, then sys.path: an engine
        # class a conftest defines)
        paths = [str(Path(__file__).resolve().parents[2]), *(p for p in sys.path if p and os.path.isdir(p))]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), WORKER_ENV: str(os.getpid())}
        self.k, self.tail = k, ""
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest_perfgate.load.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        threading.Thread(target=self._read, args=(inbox,), daemon=True).start()
        threading.Thread(target=self._errors, daemon=True).start()

    def _read(self, inbox: queue.Queue[tuple[int, Any]]) -> None:
        assert self.proc.stdout is not None
        while True:
            msg = receive(self.proc.stdout)
            inbox.put((self.k, msg))
            if msg is None:
                return

    def _errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = line.decode("utf-8", "replace").strip()
            if text:
                self.tail = text[-300:]

    def tell(self, msg: Any) -> None:
        try:
            assert self.proc.stdin is not None
            send(self.proc.stdin, msg)
        except (OSError, ValueError):  # it died: its EOF says so
            pass

    def cause(self) -> str:
        code = self.proc.wait(5)
        what = f"exit status {code}" if code >= 0 else f"killed by signal {-code}"
        return what + (f": {self.tail}" if self.tail else "")

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


def run_workers(engine: Engine, requests: Sequence[Request], config: LoadConfig, progress: Progress | None,
                stop: Stop | None, home: Home) -> RunResult:
    """:func:`~pytest_perfgate.load.runner.run_load` over ``config.workers`` processes (module doc);
    ``home``: the session's own run, for the warm-up and the counters."""
    spec = getattr(engine, "worker_spec", None)
    if not callable(spec):
        raise LoadConfigError(f"workers = {config.workers}: engine {engine.name!r} (kind {engine.kind}) runs in "
                              "this process only (client workers rebuild a client-side engine: kind openai)")
    parts = plan(requests, config)
    run_sync(home.warm_up())
    before = run_sync(home._counters())
    inbox: queue.Queue[tuple[int, Any]] = queue.Queue()
    workers: list[_Worker] = []
    try:
        for k, (part, cfg) in enumerate(parts):
            workers.append(_Worker(k, inbox))
            workers[-1].tell({"parent": os.getpid(), "engine": spec(), "requests": list(requests),
                              "config": cfg, "part": part, "batch": batch_size(stop)})
        return _collect(workers, parts, inbox, home, config, progress, stop, before)
    finally:
        for w in workers:
            w.end()


class Link(Protocol):
    """A worker as the run sees it: a local process (:class:`_Worker`) or a Ray actor (load/ray_workers.py)."""

    def tell(self, msg: Any) -> None: ...

    def cause(self) -> str: ...


def _collect(workers: Sequence[Link], parts: list[tuple[Share, LoadConfig]], inbox: queue.Queue[tuple[int, Any]],
             home: Home, config: LoadConfig, progress: Progress | None, stop: Stop | None,
             before: dict[str, float], margin_ns: int = START_MARGIN_NS) -> RunResult:
    failed: dict[int, str] = {}
    ready: set[int] = set()
    while len(ready) + len(failed) < len(workers):
        k, msg = inbox.get(timeout=READY_TIMEOUT_S)
        if msg is None or msg[0] == "failed":
            failed[k] = msg[1] if msg is not None else workers[k].cause()
        else:
            ready.add(k)
    start = clock() + margin_ns
    for k in ready:
        workers[k].tell(("start", start))
    health: dict[int, ClientHealth] = {}
    stopped = False
    open_ = set(ready)
    n = sum(len(p[0]) for p, _ in parts)
    sink = Sink(n, keep=stop is not None)
    try:
        while open_:
            k, msg = inbox.get()
            if k not in open_:  # the EOF after a worker's "done"
                continue
            if msg is not None and msg[0] == "batch":
                sink.add(msg[1])
                if progress is not None:
                    progress(sink.count, n, (clock() - start) / 1e9)
                if stop is not None and not stopped and stop(RunResult(records=list(sink.kept), config=config, start_ns=start)):
                    stopped = True
                    for j in open_:
                        workers[j].tell(("stop",))
                continue
            if msg is not None and msg[0] == "done":
                health[k] = msg[1]
            else:
                failed[k] = msg[1] if msg is not None else workers[k].cause()
            open_.discard(k)
        sink.add(to_batch([*home.records, *_lost(parts, failed, sink.received, home.requests)]))
        table = sink.spool.table()
    except BaseException:
        sink.spool.discard()
        raise
    after = run_sync(home._counters())
    per_worker = [health[k] for k in sorted(health)]
    return run_of(
        table, counters_before=before, counters_after=after, config=config, start_ns=start, end_ns=clock(),
        stopped_early=stopped, counter_notes=home.counter_notes(),
        health=replace(ClientHealth.worst(per_worker), workers=len(per_worker)) if per_worker else None,
        worker_health=per_worker,
    )


class Sink:
    """What the coordinator keeps of the workers' records (load/parquet.py): their batches appended
    to a Parquet spool as they come, which requests arrived (a bit per request), and, for a run with
    a ``stop`` (sequential sampling, bounded by its budget), the records themselves."""

    def __init__(self, n: int, keep: bool) -> None:
        import numpy as np

        self.spool = Spool()
        self.received = np.zeros(n, dtype=bool)
        self.count = 0
        self.keep = keep
        self.kept: list[RequestRecord] = []

    def add(self, batch: Any) -> None:
        idx = batch.column("index").to_numpy()
        measured = idx[idx >= 0]
        self.received[measured[measured < len(self.received)]] = True
        self.count += len(measured)
        self.spool.add(batch)
        if self.keep:
            self.kept.extend(records_of(batch))


def _lost(parts: list[tuple[Share, LoadConfig]], failed: dict[int, str], received: Any,
          requests: Sequence[Request]) -> list[RequestRecord]:
    """Failed records for the requests of the workers that died (or never started), with the cause."""
    out = []
    for k, cause in failed.items():
        for i in parts[k][0][0]:
            if not received[i]:
                out.append(RequestRecord(index=i, tag=requests[i % len(requests)].tag,
                                         error=f"client worker {k} failed: {cause}"))
    return out

