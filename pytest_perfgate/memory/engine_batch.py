"""The engine-level max-safe-batch search: the largest concurrency an engine serves without
preempting a request or running out of memory, read from the engine's own metrics.

A probe at concurrency ``n`` runs ``rounds x n`` requests of one shape in a closed loop of ``n``
in flight (:class:`~pytest_perfgate.load.schedule.LoadConfig` ``mode="concurrency"``) and *fits*
when the engine's ``vllm:num_preemptions`` did not move over the run (:mod:`pytest_perfgate.load.kv`)
and no request failed (an out-of-memory answer, HTTP 500, a dropped stream), and the engine ran all
``n`` at once (the peak of its ``vllm:num_requests_running`` gauge over the run's polls reached
``n``: vLLM v1 does not admit a request whose prompt finds no free KV blocks, so a full cache
shows as requests left waiting more often than as preemptions; an engine without the gauge is
judged on preemptions and failures alone, and the probe says so). The search is the
memory suite's exponential-then-binary search (:func:`~pytest_perfgate.memory.workload.max_safe_batch`):
``best`` fit and ``best + 1`` did not, in this probe sequence. Assumption: fitting is monotone in
the concurrency (more requests in flight never need fewer KV blocks), as it is for one prompt
shape and a fixed KV cache. An engine without a preemption counter is an error, not a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import Request
from ..load.result import RunResult
from ..load.schedule import LoadConfig
from .workload import max_safe_batch

RUNNING = "vllm:num_requests_running"


class NoPreemptionCounter(RuntimeError):
    """The engine exposes no ``vllm:num_preemptions``: preemption cannot be seen, so nothing fits."""


@dataclass(frozen=True)
class Probe:
    concurrency: int
    fits: bool
    preemptions: int
    failed: int
    peak_kv_usage: float | None  # 0-1
    peak_running: int | None = None  # the engine's running-requests gauge, None: not exposed

    def text(self) -> str:
        usage = f", peak KV usage {self.peak_kv_usage:.0%}" if self.peak_kv_usage is not None else ""
        running = (f", at most {self.peak_running} running at once" if self.peak_running is not None
                   else ", no running-requests gauge")
        return (f"concurrency {self.concurrency}: {'fits' if self.fits else 'does not fit'} "
                f"({self.preemptions} preemptions, {self.failed} failed requests{running}{usage})")


@dataclass
class EngineBatchSearch:
    """The largest safe concurrency and every probe, in the order run."""

    best: int
    capped: bool
    probes: list[Probe] = field(default_factory=list)

    def text(self) -> str:
        head = (f"max safe concurrency {self.best}" + (" (the cap: every probe fitted)" if self.capped else "")
                + f", {len(self.probes)} probes")
        return "\n".join([head, *(f"  {p.text()}" for p in self.probes)])

    def perfgate_data(self, metric: str) -> Any:
        """``concurrency``: the search's one result (a ``single`` or record-only gate)."""
        from ..verdicts.samples import SampleError, make_samples

        if metric not in ("concurrency", "value"):
            raise SampleError(f"{metric}: the max-safe-batch search measures concurrency")
        return make_samples([float(self.best)], "", label="max safe concurrency")

    def to_dict(self) -> dict[str, Any]:
        return {"best": self.best, "capped": self.capped,
                "probes": [p.__dict__ for p in self.probes]}


def probe_of(n: int, run: RunResult) -> Probe:
    """A probe's result from its run: the preemption counter's delta and the failed requests."""
    kv = run.kv_pressure()
    if kv.preemptions is None:
        raise NoPreemptionCounter(f"concurrency {n}: the engine exposes no vllm:num_preemptions counter: "
                                  "preemptions cannot be seen, so the max-safe-batch search cannot run")
    failed = len(run.measured) - len(run.successful)
    seen = [g[RUNNING] for g in (*run.gauges, run.counters_after) if RUNNING in g]
    peak = int(max(seen)) if seen else None
    ok = kv.preemptions == 0 and failed == 0 and len(run.measured) > 0 and (peak is None or peak >= n)
    return Probe(n, ok, kv.preemptions, failed, kv.peak_usage, peak)


def search(run: Callable[[Sequence[Request], LoadConfig], RunResult], requests: Callable[[int], Sequence[Request]],
           *, cap: int = 64, rounds: int = 2, gauge_interval: float = 0.1, max_seconds: float = 300,
           on_probe: Callable[[Probe], None] | None = None) -> EngineBatchSearch:
    """Search concurrencies 1, 2, 4, ... then bisect, up to ``cap``. ``run(requests, config)``
    measures on the engine (``perfgate_engines.run`` or ``run_load``); ``requests(k)``: k fresh
    requests of the probe's shape (fresh prompts: no probe is helped by another's prefix cache)."""
    probes: list[Probe] = []

    def fits(n: int) -> bool:
        cfg = LoadConfig(mode="concurrency", concurrency=n, num_requests=rounds * n, gauge_interval=gauge_interval,
                         max_seconds=max_seconds)
        p = probe_of(n, run(requests(rounds * n), cfg))
        probes.append(p)
        if on_probe is not None:
            on_probe(p)
        return p.fits

    s = max_safe_batch(fits, cap=cap)
    return EngineBatchSearch(s.best, s.capped, probes)
