"""Send requests to an engine under a :class:`LoadConfig` and collect a :class:`RunResult`.

Order of a run: warm-up requests (sequential, recorded with ``warmup=True`` and excluded from
metrics), counter snapshot, the measured requests (closed loop for ``sequential``/``concurrency``,
the precomputed open-loop schedule for ``poisson``/``gamma``, the requests' own arrival times for
``trace``; a multi-turn session's turn waits for its previous turn: load/replay.py), counter snapshot. Budgets: no new
request after ``num_requests`` or ``max_seconds``; in-flight requests finish under the engine's
own per-request timeout, or are cancelled ``drain_seconds`` after ``max_seconds`` when that is set
(recorded as errors: ``"run budget exhausted: ..."``). ``stop(partial_result) -> bool`` is asked
after each finished request (sequential sampling: stop as soon as the verdict is decided); it runs
on the engine loop, so keep it cheap.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..contract import Engine, Request, RequestRecord, clock, run_sync
from . import plausible
from .counters import BadCounters
from .health import LoopProbe
from .prompts import warmup_prompts
from .replay import Turns, trace_offsets_ns
from .result import RunResult
from .schedule import LoadConfig, send_offsets_ns
from .validity import starvation_notice

Progress = Callable[[int, int, float], None]
WARMUP_TICK_S = 1.0  # while a warm-up request runs, the progress printer is asked this often (it rate-limits)
WATCH_S = 1.0  # the client's health is looked at this often during a run: a starved client is said at once
Stop = Callable[[RunResult], bool]


def run_load(
    engine: Engine,
    requests: Sequence[Request],
    config: LoadConfig,
    progress: Progress | None = None,
    stop: Stop | None = None,
    *,
    slos: Mapping[str, float] | None = None,
    warmup: Sequence[Request] | None = None,
) -> RunResult:
    """Run ``config`` against ``engine`` (requests cycle if fewer than ``num_requests``; each is sent
    once when it is None); blocks until done. Warm-up requests are ``warmup`` (cycled), by default
    prompts of their own (:func:`~pytest_perfgate.load.prompts.warmup_prompts`)."""
    if not requests:
        raise ValueError("run_load: no requests to send")
    config = config.sized(len(requests))
    warm = list(warmup) if warmup else warmup_prompts(requests, config.warmup)
    info = engine.info()
    if config.ray is not None:  # workers on the nodes of a Ray cluster (load/ray_workers.py)
        from .ray_workers import run_ray

        result = run_ray(engine, requests, config, progress, stop, _Run(engine, requests, config, progress, None, warm))
    elif config.workers > 1:  # worker processes (load/workers.py), else this process's event loop
        from .workers import run_workers

        result = run_workers(engine, requests, config, progress, stop, _Run(engine, requests, config, progress, None, warm))
    else:
        result = run_sync(_Run(engine, requests, config, progress, stop, warm).run())
    result.engine_info = info
    result.slos = dict(slos or {})
    return result


@dataclass(frozen=True)
class Part:
    """One worker's part of a run (load/workers.py): its request indices, their send offsets (open
    loops; ns after the common start) and the common start on CLOCK_MONOTONIC."""

    indices: tuple[int, ...]
    offsets_ns: tuple[int, ...] | None
    anchor_ns: int


class _Run:
    def __init__(
        self, engine: Engine, requests: Sequence[Request], config: LoadConfig,
        progress: Progress | None, stop: Stop | None, warmup: Sequence[Request] = (), part: Part | None = None,
    ) -> None:
        self.engine, self.requests, self.config, self.part = engine, requests, config, part
        self.n = config.num_requests if config.num_requests is not None else len(requests)
        if part is not None:
            self.n = len(part.indices)
        self.warmup = warmup
        self.progress, self.stop_fn = progress, stop
        self.records: list[RequestRecord] = []
        self.keep = True  # a client worker keeps no record: it streams them (load/worker.py)
        self.request_counters: list[dict[str, float]] = []  # after each measured request (sequential runs)
        self.done: list[RequestRecord] = []
        self.stopped = False
        self.start_ns = 0
        self.deadline_ns: int | None = None
        self.gauges: list[dict[str, float]] = []
        self.bad_counters = BadCounters()  # /metrics values that are no finite number: dropped, noted
        self.turns = Turns(requests)  # multi-turn sessions: turn k after turn k - 1 (load/replay.py)
        self.send_lags: list[int] = []  # open loop: how late each scheduled send was dispatched (load/health.py)
        self.send_gap_s = math.nan  # open loop: the schedule's mean gap

    def _request(self, i: int) -> Request:
        if i < 0:  # warm-up -1, -2, ...: prompts of its own
            return self.warmup[(-i - 1) % len(self.warmup)]
        return self.requests[i % len(self.requests)]

    def _budget_left(self) -> bool:
        return not self.stopped and (self.deadline_ns is None or clock() < self.deadline_ns)

    async def _one(self, i: int, scheduled_ns: int | None, warmup: bool = False) -> RequestRecord:
        req = self._request(i)
        rec = RequestRecord(index=i, tag=req.tag, scheduled_ns=scheduled_ns, warmup=warmup,
                            expected_prompt_tokens=req.prompt_tokens)
        if self.keep or warmup:
            self.records.append(rec)
        drain = self.config.drain_seconds
        try:
            if warmup or drain is None or self.deadline_ns is None:
                await self.engine.generate(req, rec, clock)
            else:  # hard end of the run: time budget + drain, whatever the per-request timeout
                left = (self.deadline_ns + int(drain * 1e9) - clock()) / 1e9
                await asyncio.wait_for(self.engine.generate(req, rec, clock), max(left, 0.0))
        except TimeoutError:
            rec.error = (f"run budget exhausted: cancelled {drain:g} s after the run's time budget "
                         f"({self.config.max_seconds:g} s)")
        except Exception as e:  # the protocol says never raise; a broken engine must not end the run
            rec.error = f"engine raised: {type(e).__name__}: {e}"
        plausible.check(rec, req)  # usage 1e12 for a 16-token request: this request's error, not 1e15 tok/s
        self.turns.done(i)
        if not warmup:
            if self.config.in_flight == 1 and not self.config.open_loop:
                # one request at a time: counters after each one give per-request clusters (acceptance,
                # prefix-cache hits) instead of one pooled binomial (docs/statistics.md)
                self.request_counters.append(await self._counters())
            self._finished(rec)
        return rec

    def _finished(self, rec: RequestRecord) -> None:
        self.done.append(rec)
        if self.progress is not None:
            self.progress(len(self.done), self.n, (clock() - self.start_ns) / 1e9)
        if self.stop_fn is not None and not self.stopped:
            partial = RunResult(records=list(self.done), config=self.config, start_ns=self.start_ns)
            if self.stop_fn(partial):
                self.stopped = True

    async def _counters(self) -> dict[str, float]:
        try:
            got = await self.engine.counters()
        except Exception:
            return {}
        return self.bad_counters.keep(got) if isinstance(got, Mapping) else {}

    def counter_notes(self) -> list[str]:
        """One line per counter dropped from this run's snapshots (load/counters.py)."""
        return self.bad_counters.notes()

    async def _watch(self, probe: LoopProbe, say: Callable[[str], None]) -> None:
        """Say once, during the run, that the client is starved, as soon as a window of it shows it
        (load/validity.py: what starved it and the fix), not only in the verdicts at its end."""
        while True:
            await asyncio.sleep(WATCH_S)
            line = starvation_notice(probe.window(), (clock() - self.start_ns) / 1e9)
            if line is not None:
                say(line)
                return

    async def _poll_gauges(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            snap = await self._counters()
            if snap:
                self.gauges.append(snap)

    async def warm_up(self) -> None:
        """The warm-up requests, one at a time; their records take indices -1, -2, ..."""
        warming = getattr(self.progress, "warmup", None)  # progress.progress_printer's warm-up lines
        t_warm = clock()
        for w in range(self.config.warmup):
            one = asyncio.ensure_future(self._one(-(w + 1), None, warmup=True))
            try:
                while not one.done():  # a warm-up request that hangs is not silence: the printer's lines go on
                    if warming is not None:
                        warming(w, self.config.warmup, (clock() - t_warm) / 1e9)
                    await asyncio.wait({one}, timeout=WARMUP_TICK_S)
            except asyncio.CancelledError:
                one.cancel()
                raise
            one.result()

    async def run(self) -> RunResult:
        cfg = self.config
        await self.warm_up()
        before = await self._counters() if self.part is None else {}
        if self.part is not None:  # a worker: the common start the coordinator chose
            await _wait_until(self.part.anchor_ns)
        self.start_ns = self.part.anchor_ns if self.part is not None else clock()
        if cfg.max_seconds is not None:
            self.deadline_ns = self.start_ns + int(cfg.max_seconds * 1e9)
        poller = asyncio.create_task(self._poll_gauges(cfg.gauge_interval)) if cfg.gauge_interval else None
        probe = LoopProbe()
        probe.start()
        notice = getattr(self.progress, "notice", None)  # progress.progress_printer's one-off lines
        watch = asyncio.create_task(self._watch(probe, notice)) if notice is not None else None
        try:
            if cfg.open_loop:
                await self._open_loop()
            else:
                await self._closed_loop(cfg.in_flight or 1)
        finally:
            if watch is not None:
                watch.cancel()
            health = probe.stop(self.send_lags, self.send_gap_s, [c for r in self.done for c in r.chunk_ns])
            if poller is not None:
                poller.cancel()
        end_ns = clock()
        after = await self._counters() if self.part is None else {}
        return RunResult(
            records=sorted(self.records, key=lambda r: (not r.warmup, -r.index if r.warmup else r.index)),
            counters_before=before, counters_after=after, config=cfg,
            start_ns=self.start_ns, end_ns=end_ns, gauges=self.gauges, stopped_early=self.stopped,
            request_counters=self.request_counters, health=health, counter_notes=self.bad_counters.notes(),
        )

    async def _closed_loop(self, workers: int) -> None:
        next_i = 0
        n = self.n
        order = self.part.indices if self.part is not None else range(n)

        async def worker() -> None:
            nonlocal next_i
            while next_i < n and self._budget_left():
                i = order[next_i]
                next_i += 1
                await self.turns.wait(i)
                await self._one(i, clock())

        await asyncio.gather(*(worker() for _ in range(min(workers, n))))

    async def _open_loop(self) -> None:
        cfg = self.config
        if self.part is not None and self.part.offsets_ns is not None:  # a worker's share of the schedule
            plan = list(zip(self.part.indices, self.part.offsets_ns, strict=True))
            whole = self.part.offsets_ns
        else:
            offsets = trace_offsets_ns(self.requests, cfg) if cfg.mode == "trace" else send_offsets_ns(cfg)
            assert offsets is not None
            plan, whole = list(enumerate(offsets.tolist())), offsets.tolist()
        if len(whole) > 1:
            self.send_gap_s = float(whole[-1] - whole[0]) / (len(whole) - 1) / 1e9
        cap = self.config.concurrency
        sem = asyncio.Semaphore(cap) if cap else None
        tasks: list[asyncio.Task[RequestRecord]] = []

        async def send(i: int, at: int) -> RequestRecord:
            if self.turns.depends(i):
                await self.turns.wait(i)
                at = max(at, clock())
            if sem is None:
                return await self._one(i, at)
            async with sem:
                return await self._one(i, at)

        for i, off in plan:
            at = self.start_ns + int(off)
            await _wait_until(at)
            if not self._budget_left():
                break
            self.send_lags.append(max(0, clock() - at))
            tasks.append(asyncio.create_task(send(i, at)))
        if tasks:
            await asyncio.gather(*tasks)


# asyncio.sleep wakes up late by up to a timer tick (~1 ms): sleep until shortly before the send
# time, then yield to the loop until it comes (other requests keep being served meanwhile).
_COARSE_MARGIN_NS = 1_500_000


async def _wait_until(at_ns: int) -> None:
    delay = at_ns - clock() - _COARSE_MARGIN_NS
    if delay > 0:
        await asyncio.sleep(delay / 1e9)
    while clock() < at_ns:
        await asyncio.sleep(0)
