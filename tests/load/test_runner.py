"""run_load against the scripted server over real sockets."""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Iterator

import pytest

from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.contract import Request
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load import runner as runner_module
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig, send_offsets_ns
from pytest_perfgate.runtime.timeouts import scaled
from pytest_perfgate.verdicts.samples import Proportion, SampleError, Samples

# Timing here is checked by ordering, not by speed: a chunk arrives after the server sent it
# (server and client share CLOCK_MONOTONIC), a run spans its budget, a request lasts at least what
# the server's script makes it wait. How close the stamps come to the server's (and how late the
# open loop sends) is a figure of the machine: benchmarks/bench_client.py prints it.
LIVENESS_S = 120  # fails only when a run never ends


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.004, itl=0.001, num_spec_tokens=2, tokens_per_chunk=2)) as srv:
        yield srv


@pytest.fixture(scope="module")
def engine(server: ScriptedServer, openai_engine_on: Callable[..., OpenAIEngine]) -> OpenAIEngine:
    return openai_engine_on(server, timeout=5)


def reqs(n: int = 3, max_tokens: int = 8) -> list[Request]:
    return [Request(prompt=tuple(range(i + 1, i + 6)), max_tokens=max_tokens, tag="t",
                    extra={"perfgate": {"id": f"r{i}"}}) for i in range(n)]


def test_sequential_run_matches_ground_truth(server: ScriptedServer, engine: OpenAIEngine) -> None:
    server.reset()
    seen: list[tuple[int, int, float]] = []
    res = run_load(engine, reqs(), LoadConfig(num_requests=7, warmup=2),
                   progress=lambda d, t, e: seen.append((d, t, e)))
    assert [r.warmup for r in res.records] == [True, True] + [False] * 7
    assert [r.index for r in res.measured] == list(range(7))
    assert seen[-1][:2] == (7, 7) and len(seen) == 7
    truth = server.ground_truth()
    assert len(truth) == 9
    for rec, gt in zip(res.records, truth, strict=True):  # sequential: same order
        assert rec.ok, rec.error
        assert rec.chunk_tokens == gt["chunk_tokens"] == [2, 2, 2, 2]
        for c, s in zip(rec.chunk_ns, gt["chunk_ns"], strict=True):
            assert c >= s  # arrival after the server's send
    # counters cover the measured requests only (warm-ups ran before the snapshot)
    acc = res.perfgate_data("acceptance_rate")
    assert isinstance(acc, Proportion) and (acc.successes, acc.trials) == (7 * 4, 7 * 4 * 2)
    length = res.perfgate_data("acceptance_length")
    assert isinstance(length, Samples) and length.values[0] == pytest.approx(2.0)
    hit = res.perfgate_data("prefix_cache_hit_rate")
    assert isinstance(hit, Proportion) and (hit.successes, hit.trials) == (0, 35)
    ttft = res.perfgate_data("ttft")
    assert isinstance(ttft, Samples) and ttft.n == 7 and ttft.values.min() >= 0.004
    assert res.perfgate_data("itl").n == 21
    thr = res.perfgate_data("output_throughput")
    assert isinstance(thr, Samples) and thr.denominators is not None
    assert res.errors() == {}
    res.to_dict()


def test_concurrency_and_cycling(engine: OpenAIEngine) -> None:
    res = run_load(engine, reqs(2), LoadConfig(mode="concurrency", concurrency=4, num_requests=12))
    assert len(res.measured) == 12 and all(r.ok for r in res.records)
    assert {r.tag for r in res.records} == {"t"}
    # 4 in flight at once: issued (scheduled_ns; sent_ns follows connection setup) before any ended
    starts = sorted(r.scheduled_ns or 0 for r in res.records)
    assert starts[3] < min(r.chunk_ns[-1] for r in res.records)
    thr = res.perfgate_data("output_throughput")
    assert isinstance(thr, Samples) and thr.n == 1


@pytest.mark.parametrize("mode", ["poisson", "gamma"])
def test_open_loop_schedule(engine: OpenAIEngine, mode: str) -> None:
    cfg = LoadConfig(mode=mode, rate=200.0, burstiness=2.0, num_requests=20, seed=3)  # type: ignore[arg-type]
    res = run_load(engine, reqs(), cfg)
    assert len(res.measured) == 20 and all(r.ok for r in res.records)
    assert all(r.scheduled_ns is not None for r in res.records)
    q = res.perfgate_data("queue_time")
    assert isinstance(q, Samples) and q.values.min() >= 0  # never sent before its scheduled time
    offsets = send_offsets_ns(res.config)
    assert offsets is not None
    assert [(r.scheduled_ns or 0) - res.start_ns for r in res.measured] == offsets.tolist()  # the seeded schedule


class _ScriptedLoop:
    """A clock that moves only when ``_wait_until`` sleeps: a sleep of d s ends ``late_ns`` after d
    (a timer tick late), a yield (sleep 0) takes ``yield_ns`` (one loop iteration)."""

    def __init__(self, late_ns: int, yield_ns: int) -> None:
        self.ns, self.late_ns, self.yield_ns = 1_000_000_000, late_ns, yield_ns
        self.sleeps: list[float] = []

    def clock(self) -> int:
        return self.ns

    async def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.ns += int(s * 1e9) + (self.late_ns if s > 0 else self.yield_ns)


@pytest.mark.parametrize("late_ns", [0, 1_000_000, 1_499_999])
def test_open_loop_send_is_never_early_and_late_by_one_loop_iteration_at_most(
        monkeypatch: pytest.MonkeyPatch, late_ns: int) -> None:
    """The open loop's wait for a send time, on a scripted clock: one coarse sleep that ends before
    the send time even when the timer fires late (up to the 1.5-ms margin), then yields to the loop
    until the time comes; so a send is never early and late by less than one loop iteration."""
    loop = _ScriptedLoop(late_ns, yield_ns=20_000)
    monkeypatch.setattr(runner_module, "clock", loop.clock)
    monkeypatch.setattr(runner_module, "asyncio", types.SimpleNamespace(sleep=loop.sleep))
    at = loop.ns + 40_000_000  # 40 ms ahead
    with pytest.raises(StopIteration):
        runner_module._wait_until(at).send(None)  # the scripted sleeps never suspend
    assert loop.sleeps[0] == pytest.approx((40_000_000 - runner_module._COARSE_MARGIN_NS) / 1e9)
    assert set(loop.sleeps[1:]) <= {0}  # then only yields
    assert at <= loop.ns < at + loop.yield_ns
    loop.sleeps.clear()
    with pytest.raises(StopIteration):
        runner_module._wait_until(loop.ns - 1).send(None)  # a time already past: no wait at all
    assert loop.sleeps == []


def test_time_budget(engine: OpenAIEngine) -> None:
    """By construction: the run sends only while its 0.3 s last and ends once it has seen them
    spent; each request lasts at least the 50 ms the server waits before answering, so at most
    0.3 / 0.05 + 1 = 7 are sent, far below the request budget."""
    slow = [Request(prompt=(1,), max_tokens=4, extra={"perfgate": {"ttft": 0.05}})]
    t = time.monotonic()
    res = run_load(engine, slow, LoadConfig(num_requests=1000, max_seconds=0.3))
    assert time.monotonic() - t < scaled(LIVENESS_S)  # liveness only
    assert 1 <= len(res.measured) <= 7
    assert res.end_ns - res.start_ns >= 0.3e9
    # each request held the run for the server's 50 ms at least (1 ms: asyncio's float clock)
    assert all(r.end_ns is not None and r.end_ns - r.sent_ns >= 0.049e9 for r in res.measured), res.errors()


def test_stop_callback_ends_early(engine: OpenAIEngine) -> None:
    calls: list[int] = []

    def stop(partial: RunResult) -> bool:
        calls.append(len(partial.measured))
        return partial.perfgate_data("ttft").n >= 5

    res = run_load(engine, reqs(), LoadConfig(num_requests=100), stop=stop)
    assert len(res.measured) == 5 and res.stopped_early and calls == [1, 2, 3, 4, 5]


def test_failures_are_recorded_not_raised() -> None:
    eng = OpenAIEngine("e", {"base_url": "http://127.0.0.1:9", "model": "m"})
    res = run_load(eng, reqs(), LoadConfig(num_requests=5))
    assert res.errors() == {"connection refused": 5}
    er = res.perfgate_data("error_rate")
    assert isinstance(er, Proportion) and (er.successes, er.trials) == (5, 5)
    with pytest.raises(SampleError, match="no successful requests: 5 x connection refused"):
        res.perfgate_data("ttft")
    with pytest.raises(SampleError, match="no counters"):
        res.perfgate_data("acceptance_rate")
    eng.stop()


def test_mixed_faults_in_one_run(engine: OpenAIEngine) -> None:
    mix = [Request(prompt=(1,), max_tokens=4, extra={"perfgate": {"fault": "status", "status": 500}}),
           Request(prompt=(1,), max_tokens=4)]
    res = run_load(engine, mix, LoadConfig(num_requests=6, mode="concurrency", concurrency=2),
                   slos={"ttft": 10.0})
    assert res.errors() == {"HTTP 500": 3}
    goodput = res.perfgate_data("goodput")
    assert isinstance(goodput, Samples) and goodput.values[0] > 0
