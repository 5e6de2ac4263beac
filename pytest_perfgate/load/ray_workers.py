"""Client workers on many hosts: the nodes of a Ray cluster (``workers = { ray = "auto", per_node = N }``,
``--perfgate-workers ray://HOST:PORT``; the ``ray`` install extra). Ray is what vLLM's own
multi-node serving runs on; nothing here is a protocol of its own.

* **The same worker as on one host.** Each alive node gets ``per_node`` actors (pinned to it by a
  hard node-affinity strategy, ``num_cpus=0``); each actor starts one local worker process there
  (``python -m pytest_perfgate.load.worker``, load/worker.py) and relays its frames. The schedule is
  drawn and split once, here (load/workers.py's ``plan``: the global arrival process, sessions on
  one worker, concurrency shares); warm-up, counters, progress, ``stop`` and a dying worker's lost
  requests are load/workers.py's too.
* **One start, on every host's clock.** Before the run each actor's CLOCK_MONOTONIC is measured
  against this process's by a ping exchange (load/clocks.py: the min-round-trip of 16 rounds; the
  uncertainty is half that round trip). The common start is converted into each host's clock, so
  every worker sends at its global offsets from the same instant, to within its host's uncertainty.
* **Per-request times stay host-local.** A record's stamps are all its host's; on arrival they are
  shifted onto this process's clock by the host's offset (every stamp by one integer: durations
  unchanged) for the run's merged timeline (throughput windows), and the record names its host
  (``RequestRecord.host``: the node's address). Records merge in index order.
* **Reported and judged.** Each worker's health (``RunResult.worker_health``) carries its host, its
  clock offset and uncertainty; the run's health the largest uncertainty. A host whose uncertainty
  exceeds a timing gate's send allowance makes that gate invalid (load/validity.py), as a send lag
  does.

``ray`` is imported only here, and only when a run asks for it.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..contract import Engine, Request, clock, run_sync
from .clocks import ClockOffset, estimate, to_local
from .parquet import shifted
from .result import RunResult
from .schedule import LoadConfig, LoadConfigError
from .workers import Home, Progress, Stop, _collect, _Worker, batch_size, plan

READY_TIMEOUT_S = 300.0  # an actor (a Python process on its node) that never started: the run fails
POLL_S = 0.2  # an actor's poll returns after this long without a frame
START_MARGIN_NS = 500_000_000  # the common start, after every host got it (a Ray call each)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise LoadConfigError("workers on a Ray cluster need Ray: pip install 'pytest-perfgate[ray]'") from None
    return ray


class Host:
    """The actor on one node: a local worker process (load/worker.py) and its frames, queued for the
    coordinator's polls."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[int, Any]] = queue.Queue()
        self.worker: _Worker | None = None

    def now(self) -> int:
        return clock()

    def begin(self, job: dict[str, Any]) -> int:
        """Start the worker process with ``job`` (its parent: this actor); returns its pid."""
        made = threading.Event()

        def keep() -> None:  # the worker's death signal is tied to the thread that started it: this one lives on
            self.worker = _Worker(0, self.inbox)
            made.set()
            self.worker.proc.wait()

        threading.Thread(target=keep, daemon=True).start()
        made.wait()
        assert self.worker is not None
        self.worker.tell({**job, "parent": os.getpid()})
        return int(self.worker.proc.pid)

    def tell(self, msg: Any) -> None:
        if self.worker is not None:
            self.worker.tell(msg)

    def poll(self, timeout_s: float) -> list[Any]:
        """The frames since the last poll (waits up to ``timeout_s`` for the first)."""
        try:
            out = [self.inbox.get(timeout=timeout_s)[1]]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self.inbox.get_nowait()[1])
            except queue.Empty:
                return out

    def cause(self) -> str:
        return self.worker.cause() if self.worker is not None else "its worker process never started"

    def end(self) -> None:
        if self.worker is not None:
            self.worker.end()


class _Link:
    """One remote worker as the run sees it (load/workers.py's ``Link``): frames from its actor's
    polls, moved onto this process's clock, into the run's inbox."""

    def __init__(self, ray: Any, k: int, actor: Any, host: str, inbox: queue.Queue[tuple[int, Any]]) -> None:
        self.ray, self.k, self.actor, self.host, self.inbox = ray, k, actor, host, inbox
        self.offset = ClockOffset(0, 0, 0)
        self.closed = threading.Event()

    def measure(self) -> None:
        self.ray.get(self.actor.now.remote(), timeout=READY_TIMEOUT_S)  # the actor is up
        self.offset = estimate(lambda: int(self.ray.get(self.actor.now.remote(), timeout=30)), clock)

    def begin(self, job: dict[str, Any]) -> None:
        self.ray.get(self.actor.begin.remote(job), timeout=READY_TIMEOUT_S)
        threading.Thread(target=self._relay, daemon=True).start()

    def _relay(self) -> None:
        while not self.closed.is_set():
            try:
                msgs = self.ray.get(self.actor.poll.remote(POLL_S), timeout=60)
            except Exception as e:  # the actor or its node died
                if not self.closed.is_set():
                    self.inbox.put((self.k, ("failed", f"Ray actor on {self.host} lost: {type(e).__name__}: "
                                             f"{str(e).splitlines()[0][:200] if str(e) else ''}")))
                return
            for m in msgs:
                self.inbox.put((self.k, self._here(m)))
                if m is None:
                    return

    def _here(self, msg: Any) -> Any:
        """A frame from the host, its stamps on this process's clock and its host named."""
        if msg is None:
            return None
        if msg[0] == "batch":
            return ("batch", shifted(msg[1], self.offset.offset_ns, self.host))
        if msg[0] == "done" and msg[1] is not None:
            return ("done", replace(msg[1], host=self.host, clock_offset=self.offset.offset_s,
                                    clock_uncertainty=self.offset.uncertainty_s))
        return msg

    def tell(self, msg: Any) -> None:
        if msg[0] == "start":  # the common start on the host's clock
            msg = ("start", to_local(msg[1], self.offset))
        self.actor.tell.remote(msg)

    def cause(self) -> str:
        try:
            return str(self.ray.get(self.actor.cause.remote(), timeout=30))
        except Exception as e:
            return f"Ray actor on {self.host} lost: {type(e).__name__}"

    def end(self) -> None:
        self.closed.set()
        try:
            self.ray.get(self.actor.end.remote(), timeout=30)
        except Exception:  # already gone
            pass
        self.ray.kill(self.actor)


def nodes(ray: Any) -> list[tuple[str, str]]:
    """(node id, address) of each alive node, by address."""
    alive = [(str(n["NodeID"]), str(n.get("NodeManagerAddress") or n["NodeID"])) for n in ray.nodes() if n.get("Alive")]
    return sorted(alive, key=lambda x: x[1])


def connect(ray: Any, address: str) -> bool:
    """Connect to the cluster at ``address`` (``auto``: the running one); True when this call did
    (and so disconnects after the run), False when this process already was."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as e:
        raise LoadConfigError(f"workers ray://{address}: cannot connect to the Ray cluster: "
                              f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
    return True


def run_ray(engine: Engine, requests: Sequence[Request], config: LoadConfig, progress: Progress | None,
            stop: Stop | None, home: Home) -> RunResult:
    """:func:`~pytest_perfgate.load.runner.run_load` over ``config.per_node`` workers on each node of
    the Ray cluster at ``config.ray`` (module doc)."""
    spec = getattr(engine, "worker_spec", None)
    if not callable(spec):
        raise LoadConfigError(f"workers ray://{config.ray}: engine {engine.name!r} (kind {engine.kind}) runs in "
                              "this process only (client workers rebuild a client-side engine: kind openai)")
    assert config.ray is not None
    ray = _ray()
    mine = connect(ray, config.ray)
    links: list[_Link] = []
    try:
        where = nodes(ray)
        if not where:
            raise LoadConfigError(f"workers ray://{config.ray}: the Ray cluster has no alive node")
        parts = [(p, replace(c, ray=None)) for p, c in plan(requests, replace(config, workers=len(where) * config.per_node))]
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = ray.remote(num_cpus=0, max_concurrency=4)(Host)
        inbox: queue.Queue[tuple[int, Any]] = queue.Queue()
        for k in range(len(parts)):
            node_id, addr = where[k % len(where)]
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            links.append(_Link(ray, k, actor.options(scheduling_strategy=strategy).remote(), addr, inbox))
        run_sync(home.warm_up())
        before = run_sync(home._counters())
        for link, (part, cfg) in zip(links, parts, strict=True):
            try:
                link.measure()
                link.begin({"engine": spec(), "requests": list(requests), "config": cfg, "part": part,
                            "batch": batch_size(stop)})
            except Exception as e:  # its requests fail with the cause; the other hosts run
                first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
                inbox.put((link.k, ("failed", f"Ray actor on {link.host} did not start: {type(e).__name__}: {first}")))
        return _collect(links, parts, inbox, home, replace(config, workers=len(parts)), progress, stop, before,
                        margin_ns=START_MARGIN_NS)
    finally:
        for link in links:
            link.end()
        if mine:
            ray.shutdown()
