"""Did the client keep up? The figures of one run (or one worker) that say how late the client was.

* **loop lag** (the arrival-to-read delay of a probe socket): a thread of its own writes one byte to
  a socket pair every ``interval`` seconds, stamping the write; the event loop reads it like any
  response socket and stamps the read. Read minus write is exactly how long a chunk that arrived at
  that moment waited for the loop (a busy callback, a long parse, the GIL), with no timer rounding
  (a sleeping probe task wakes up to 1 ms late on an idle loop: epoll's millisecond timeout). The
  writer keeps its pace whatever the loop does, so a 50 ms stall leaves 10 probes (at 5 ms) waiting
  50, 45, ... 5 ms, as the chunks that arrived during it did: the lag's quantiles are over time, not
  over loop iterations; and, as chunks cluster where the loop is busiest, also over the run's
  events (each probe standing for the chunks read since the one before it): the P99 is the larger.
  A thread held off the GIL by C code is stamped late (the lag then reads low).
* **send lag** (open loops): how late the schedule's send of each request was dispatched (after its
  sleep, before the request task starts; neither a concurrency cap's wait nor a dependent turn),
  with the schedule's mean gap between sends (what a late send distorts: the arrival process).
* **CPU share**: the loop thread's CPU seconds over the run's wall seconds (1.0: the client's thread
  never waited for I/O, it is the bottleneck), and the whole client process's (every thread's) over
  the same wall seconds: a loop that lagged with little CPU of its own was starved, by another thread
  of its own process holding the GIL when the process's CPU is well above the loop's, else by other
  processes taking the machine (:mod:`.validity` says which, and the fix).

:mod:`.validity` turns them into a verdict per timing gate.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..contract import clock

PROBE_INTERVAL_S = 0.005  # 200 probes a second: a 10 s run has 2,000 (its P99 rests on 20)
# the lag validity judges: the mean over the run's worst 2.5% (12 probes or more, up to 3%: a 2 s run's
# 400 probes average their worst 12), what a stall costs in proportion to the share of the run it
# could have touched (load/validity.py)
TAIL_FRACTION = 0.025
TAIL_MIN_PROBES = 12
TAIL_MAX_FRACTION = 0.03


Hist = tuple[tuple[int, int], ...]  # (bin, count), bins 32 a decade from 1 us (load/health.py: _bin)


def _bin(ns: float) -> int:
    return 0 if ns < 1000 else 1 + int(32 * math.log10(ns / 1000))


def hist(values_ns: list[int], weights: list[int] | None = None) -> Hist:
    """A sparse histogram of lags (32 bins a decade: 7% wide), what pools across runs exactly."""
    out: dict[int, int] = {}
    for i, x in enumerate(values_ns):
        b = _bin(x)
        out[b] = out.get(b, 0) + (weights[i] if weights is not None else 1)
    return tuple(sorted((b, c) for b, c in out.items() if c))


def hist_quantile(h: Hist, q: float) -> float:
    """The ``q`` quantile of a pooled histogram, in seconds: its bin's upper edge (never low)."""
    total = sum(c for _, c in h)
    if not total:
        return math.nan
    need, cum = max(1, math.ceil(q * total)), 0
    for b, c in h:
        cum += c
        if cum >= need:
            return 1e-6 * 10 ** (b / 32)
    return math.nan


def hist_tail(h: Hist, n: int | None = None) -> float:
    """:func:`tail_mean` of a pooled histogram, in seconds (its bins' upper edges: never low)."""
    return tail_mean([1e-6 * 10 ** (b / 32) for b, _ in h], [c for _, c in h], n if n is not None else sum(c for _, c in h))


def _pooled(hists: list[Hist]) -> Hist:
    out: dict[int, int] = {}
    for h in hists:
        for b, c in h:
            out[b] = out.get(b, 0) + c
    return tuple(sorted(out.items()))


def event_weights(read_ns: list[int], events_ns: list[int]) -> list[int]:
    """How many of the run's events each probe stands for: those read since the probe before it."""
    if not read_ns or not events_ns:
        return []
    import numpy as np

    idx = np.minimum(np.searchsorted(np.asarray(read_ns), np.asarray(events_ns)), len(read_ns) - 1)
    return [int(x) for x in np.bincount(idx, minlength=len(read_ns))]


def event_weighted(read_ns: list[int], lags_ns: list[int], events_ns: list[int], q: float = 0.99) -> float:
    """The lag's ``q`` quantile over the run's events, in seconds (NaN without probes or events):
    each probe stands for the events read since the probe before it (chunks cluster where the loop
    is busiest -- 256 streams opening at once -- so a quantile over time alone reads low there)."""
    if not read_ns or not events_ns:
        return math.nan
    import numpy as np

    idx = np.minimum(np.searchsorted(np.asarray(read_ns), np.asarray(events_ns)), len(read_ns) - 1)
    weights = np.bincount(idx, minlength=len(read_ns)).astype(np.float64)
    order = np.argsort(np.asarray(lags_ns))
    cum = np.cumsum(weights[order])
    k = int(np.searchsorted(cum, q * cum[-1]))
    return float(np.asarray(lags_ns)[order][min(k, len(order) - 1)]) / 1e9


def tail_fraction(n: int) -> float:
    """The share of a run's probes the judged lag averages: :data:`TAIL_FRACTION`, or
    :data:`TAIL_MIN_PROBES` of ``n`` when that is more, up to :data:`TAIL_MAX_FRACTION` (a short
    run's tail is not diluted: 3% of 100 probes is the worst 3, where a P99 is the second worst)."""
    return min(TAIL_MAX_FRACTION, max(TAIL_FRACTION, TAIL_MIN_PROBES / n)) if n > 0 else math.nan


def tail_mean(values: Sequence[float], weights: Sequence[float] | None = None, n: int | None = None) -> float:
    """The mean of the worst :func:`tail_fraction` (of ``n`` probes, default ``len(values)``) of
    ``values`` (``weights``: what each stands for, e.g. events or a histogram's counts), in their own
    unit; NaN when empty. A single order statistic (a P99 read from ~20 probes in the tail) swings with
    a few probes either way; the tail's mean counts every stall in proportion to its share."""
    if not len(values):
        return math.nan
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.sum() <= 0:
        return math.nan
    order = np.argsort(-x)
    x, w = x[order], w[order]
    need = tail_fraction(n if n is not None else len(values)) * w.sum()
    before = np.concatenate(([0.0], np.cumsum(w)[:-1]))
    take = np.clip(need - before, 0.0, w)  # the boundary value counts in part
    return float((x * take).sum() / take.sum())


def _quantile(values_ns: list[int], q: float) -> float:
    """The empirical order statistic X_(ceil(nq)) in seconds, NaN when empty."""
    if not values_ns:
        return math.nan
    xs = sorted(values_ns)
    k = min(len(xs), max(1, math.ceil(q * len(xs))))
    return xs[k - 1] / 1e9


@dataclass(frozen=True)
class ClientHealth:
    """How late the client was, in seconds (NaN: not measured, e.g. no send lag in a closed loop)."""

    loop_lag_p50: float = math.nan
    loop_lag_p99: float = math.nan
    loop_lag_max: float = math.nan
    probes: int = 0
    send_lag_p99: float = math.nan
    send_lag_max: float = math.nan
    sends: int = 0
    cpu_share: float = math.nan  # loop thread CPU / wall
    wall_s: float = 0.0
    workers: int = 1
    send_gap: float = math.nan  # the schedule's mean gap between sends (open loops)
    # sparse histograms that pool across runs (sequential sampling's one-request draws) and workers:
    # loop lags over time, over the run's events, send lags
    lag_hist: Hist = ()
    event_hist: Hist = ()
    send_hist: Hist = ()
    # the lag validity judges (:func:`tail_mean`: over time or over events, the larger); NaN in
    # figures from before it (validity then judges the P99)
    loop_lag_tail: float = math.nan
    # a worker on another host (load/ray_workers.py): its node, its CLOCK_MONOTONIC minus the
    # coordinator's and that offset's uncertainty (half the round trip it was measured on), seconds
    host: str = ""
    clock_offset: float = math.nan
    clock_uncertainty: float = math.nan
    process_cpu_share: float = math.nan  # the client process's CPU (every thread) / wall: 1.0 = one core

    @classmethod
    def of(cls, loop_lags_ns: list[int], send_lags_ns: list[int], cpu_s: float, wall_s: float,
           send_gap_s: float = math.nan, over_events: float = math.nan, weights: list[int] | None = None,
           process_cpu_s: float = math.nan) -> ClientHealth:
        """``over_events``: the lag P99 over the run's events (:func:`event_weighted`; ``weights``:
        :func:`event_weights`); the loop lag P99 is the larger of it and the P99 over time, and so is
        its tail mean. ``cpu_s``: the loop thread's CPU seconds; ``process_cpu_s``: every thread's."""
        p99 = _quantile(loop_lags_ns, 0.99)
        if not math.isnan(over_events) and not math.isnan(p99):
            p99 = max(p99, over_events)
        tails = [tail_mean(loop_lags_ns), tail_mean(loop_lags_ns, weights, len(loop_lags_ns)) if weights else math.nan]
        tail = max((t / 1e9 for t in tails if not math.isnan(t)), default=math.nan)
        return cls(_quantile(loop_lags_ns, 0.5), p99,
                   max(loop_lags_ns) / 1e9 if loop_lags_ns else math.nan, len(loop_lags_ns),
                   _quantile(send_lags_ns, 0.99), max(send_lags_ns) / 1e9 if send_lags_ns else math.nan,
                   len(send_lags_ns), cpu_s / wall_s if wall_s > 0 else math.nan, wall_s, 1, send_gap_s,
                   hist(loop_lags_ns), hist(loop_lags_ns, weights) if weights else (), hist(send_lags_ns), tail,
                   process_cpu_share=process_cpu_s / wall_s if wall_s > 0 and math.isfinite(process_cpu_s) else math.nan)

    @classmethod
    def worst(cls, parts: Iterable[ClientHealth]) -> ClientHealth:
        """Several runs' or workers' health as one (a gate's samples come from all): the P50 / P99
        of their pooled histograms (a bin's upper edge, never low) when every part has them, else
        the worst of each figure; the max, CPU share and gap the worst."""
        ps = list(parts)
        if not ps:
            return cls()
        if len(ps) > 1 and any(p.lag_hist for p in ps) and all(p.lag_hist or not p.probes for p in ps):
            lag, ev, sends = (_pooled([getattr(p, k) for p in ps]) for k in ("lag_hist", "event_hist", "send_hist"))
            p99 = max((x for x in (hist_quantile(lag, 0.99), hist_quantile(ev, 0.99)) if not math.isnan(x)),
                      default=math.nan)
            n = sum(c for _, c in lag)
            tail = max((x for x in (hist_tail(lag), hist_tail(ev, n) if ev else math.nan) if not math.isnan(x)),
                       default=math.nan)
            one = cls.worst([replace(p, lag_hist=()) for p in ps])
            return replace(one, loop_lag_p50=hist_quantile(lag, 0.5), loop_lag_p99=p99, loop_lag_tail=tail,
                           send_lag_p99=hist_quantile(sends, 0.99), lag_hist=lag, event_hist=ev, send_hist=sends)

        def w(key: str) -> float:
            xs = [getattr(p, key) for p in ps if not math.isnan(getattr(p, key))]
            return max(xs) if xs else math.nan

        return cls(w("loop_lag_p50"), w("loop_lag_p99"), w("loop_lag_max"), sum(p.probes for p in ps),
                   w("send_lag_p99"), w("send_lag_max"), sum(p.sends for p in ps), w("cpu_share"),
                   max(p.wall_s for p in ps), max(p.workers for p in ps), w("send_gap"),
                   loop_lag_tail=w("loop_lag_tail"), clock_uncertainty=w("clock_uncertainty"),
                   process_cpu_share=w("process_cpu_share"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                               for k, v in asdict(self).items()}
        for k in ("lag_hist", "event_hist", "send_hist"):
            out[k] = [list(x) for x in getattr(self, k)]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClientHealth:
        def num(k: str) -> float:
            x = d.get(k)
            return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan

        def hist_of(k: str) -> Hist:
            raw = d.get(k)
            if not isinstance(raw, list):
                return ()
            return tuple((int(x[0]), int(x[1])) for x in raw if isinstance(x, (list, tuple)) and len(x) == 2
                         and all(isinstance(y, int) and not isinstance(y, bool) for y in x))

        return cls(num("loop_lag_p50"), num("loop_lag_p99"), num("loop_lag_max"), int(num("probes") if d.get("probes") else 0),
                   num("send_lag_p99"), num("send_lag_max"), int(num("sends") if d.get("sends") else 0),
                   num("cpu_share"), num("wall_s") if d.get("wall_s") else 0.0, int(num("workers")) if d.get("workers") else 1,
                   num("send_gap"), hist_of("lag_hist"), hist_of("event_hist"), hist_of("send_hist"),
                   num("loop_lag_tail"), str(d.get("host") or "")[:200], num("clock_offset"), num("clock_uncertainty"),
                   num("process_cpu_share"))

    def text(self) -> str:
        """``loop lag P50/P99/max 0.08/0.4/2.1 ms (2,000 probes), send lag P99 0.1 ms, CPU 35%``."""
        def ms(x: float) -> str:
            return "n/a" if math.isnan(x) else f"{x * 1e3:.3g}"

        out = f"loop lag P50/P99/max {ms(self.loop_lag_p50)}/{ms(self.loop_lag_p99)}/{ms(self.loop_lag_max)} ms ({self.probes:,} probes)"
        if not math.isnan(self.loop_lag_tail):
            out += f", tail mean {ms(self.loop_lag_tail)} ms"
        if self.sends:
            out += f", send lag P99/max {ms(self.send_lag_p99)}/{ms(self.send_lag_max)} ms"
        if not math.isnan(self.cpu_share):
            out += f", client loop CPU {self.cpu_share * 100:.0f}%"
        if not math.isnan(self.process_cpu_share):
            out += f", client process CPU {self.process_cpu_share * 100:.0f}%"
        if self.host:
            out = f"{self.host}: {out}"
        if not math.isnan(self.clock_uncertainty):
            off = "n/a" if math.isnan(self.clock_offset) else f"{self.clock_offset * 1e3:+.3g}"
            out += f", clock offset {off} ± {self.clock_uncertainty * 1e3:.3g} ms"
        return out + (f", {self.workers} workers (worst of each)" if self.workers > 1 else "")


Reading = Callable[[], int]  # a clock in ns: CPU time of the calling thread, of the process, wall time


class LoopProbe:
    """The loop-lag probe of one run: ``start()``, ``window()`` and ``stop()`` on the event loop's own
    thread. ``thread_cpu``, ``process_cpu``, ``wall``: the CPU-time and wall readings (ns) the shares
    are computed from (scripted in tests)."""

    def __init__(self, interval_s: float = PROBE_INTERVAL_S, *, thread_cpu: Reading = time.thread_time_ns,
                 process_cpu: Reading = time.process_time_ns, wall: Reading = clock) -> None:
        self.interval = interval_s
        self._thread_cpu, self._process_cpu, self._wall = thread_cpu, process_cpu, wall
        self._mark = (0, 0, 0, 0)  # where the current window began: probes, thread CPU, process CPU, wall
        self.lags_ns: list[int] = []
        self.read_ns: list[int] = []
        self._written: deque[int] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._r: socket.socket | None = None
        self._w: socket.socket | None = None
        self._cpu0 = 0
        self._pcpu0 = 0
        self._t0 = 0

    def start(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        loop.add_reader(self._r.fileno(), self._on_read)
        self._cpu0, self._pcpu0, self._t0 = self._thread_cpu(), self._process_cpu(), self._wall()
        self._mark = (0, self._cpu0, self._pcpu0, self._t0)
        self._thread = threading.Thread(target=self._beat, name="perfgate-loop-probe", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        w = self._w
        assert w is not None
        while not self._stop.wait(self.interval):
            self._written.append(clock())
            try:
                w.send(b"x")
            except OSError:  # closed under us by stop()
                return

    def _on_read(self) -> None:
        now = clock()
        assert self._r is not None
        try:
            got = len(self._r.recv(4096))
        except (BlockingIOError, InterruptedError):
            return
        for _ in range(min(got, len(self._written))):
            self.lags_ns.append(now - self._written.popleft())
            self.read_ns.append(now)

    def stop(self, send_lags_ns: list[int], send_gap_s: float = math.nan, events_ns: list[int] | None = None) -> ClientHealth:
        """Stop the probe; the run's health (``send_lags_ns``: the open loop's dispatch lateness,
        ``send_gap_s`` its schedule's mean gap, ``events_ns`` the read stamps of its chunks)."""
        import asyncio

        cpu = (self._thread_cpu() - self._cpu0) / 1e9
        pcpu = (self._process_cpu() - self._pcpu0) / 1e9
        wall = (self._wall() - self._t0) / 1e9
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
        if self._r is not None:
            self._on_read()
            asyncio.get_running_loop().remove_reader(self._r.fileno())
            self._r.close()
        if self._w is not None:
            self._w.close()
        over = event_weighted(self.read_ns, self.lags_ns, events_ns or [])
        weights = event_weights(self.read_ns, events_ns or [])
        return ClientHealth.of(self.lags_ns, send_lags_ns, cpu, wall, send_gap_s, over, weights, pcpu)

    def window(self) -> ClientHealth:
        """The health since the previous window (or the start): its probes' lags, the loop thread's
        and the process's CPU shares over it; each call starts the next window."""
        n, cpu0, pcpu0, t0 = self._mark
        cpu, pcpu, now = self._thread_cpu(), self._process_cpu(), self._wall()
        lags = self.lags_ns[n:]
        self._mark = (n + len(lags), cpu, pcpu, now)
        return ClientHealth.of(lags, [], (cpu - cpu0) / 1e9, (now - t0) / 1e9, process_cpu_s=(pcpu - pcpu0) / 1e9)
