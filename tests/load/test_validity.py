"""A run whose client did not keep up is invalid for its timing gates (load/health.py, load/validity.py).

The rule on scripted figures (no clock), then for real: the scripted server in a process of its own,
our client starved by design -- a task inside the client's event loop that busy-waits 1.2 s every
100 ms -- against a 10 s ITL P99 gate (500 ms allowed client error). The lag such a hog causes is
about 1.2 s, over twice the allowance; a healthy loop's is a fraction of a millisecond, and this
busy 2-core machine has been seen to stall a healthy client for 200 ms (a run then invalid for a
2 s gate, rightly): neither side rests on the machine's speed.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from scripted_process import calibration_engine, scripted_server_process

from pytest_perfgate.config import load_thresholds
from pytest_perfgate.contract import Clock, Request, RequestRecord
from pytest_perfgate.load.health import ClientHealth
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.load.validity import allowed_error, apply, invalid_cause
from pytest_perfgate.verdicts.failures import headline
from pytest_perfgate.verdicts.verdict import Verdict, evaluate

TOML = """
[phases.p]
[gates.ttft_p99]
phase = "p"
metric = "ttft"
statistic = "p99"
max = "{ttft}"
[gates.itl_p99]
phase = "p"
metric = "itl"
statistic = "p99"
max = "{itl}"
[gates.rate]
phase = "p"
metric = "output_throughput"
statistic = "value"
min = "1 tok/s"
"""


@pytest.fixture
def gates(tmp_path: Any) -> Any:
    def make(ttft: str = "150 ms", itl: str = "20 ms") -> Any:
        p = tmp_path / "thresholds.toml"
        p.write_text(TOML.format(ttft=ttft, itl=itl))
        return load_thresholds(p)

    return make


def test_the_allowed_error_derives_from_the_gate(gates: Any) -> None:
    th = gates()
    assert allowed_error(th.gate("ttft_p99")) == pytest.approx((0.0075, "ttft p99 at 150 ms"))
    assert allowed_error(th.gate("itl_p99"))[0] == pytest.approx(0.001)  # type: ignore[index]
    assert allowed_error(th.gate("rate")) is None  # a rate: its client error is no time


def test_invalid_names_the_figure_the_gate_and_the_fix(gates: Any) -> None:
    th = gates()
    starved = ClientHealth(loop_lag_p99=0.0042, probes=400, cpu_share=0.97)
    ttft, itl = th.gate("ttft_p99"), th.gate("itl_p99")
    assert invalid_cause(ttft, starved) is None  # 4.2 ms < 7.5 ms allowed at 150 ms
    cause = invalid_cause(itl, starved)
    assert cause is not None
    assert "loop lag P99 4.2 ms > 1 ms allowed for itl p99 at 20 ms (5% of it)" in cause
    assert "client loop CPU 97%" in cause and "set workers = 2" in cause
    late_sends = ClientHealth(loop_lag_p99=0.0001, probes=400, send_lag_p99=0.009, sends=100, cpu_share=0.5)
    assert "send lag P99 9 ms > 7.5 ms allowed" in str(invalid_cause(ttft, late_sends))
    assert invalid_cause(itl, ClientHealth(loop_lag_p99=0.0009, probes=400)) is None


def _run(health: ClientHealth | None, ttft_s: float = 0.05) -> RunResult:
    recs = []
    for i in range(1000):
        r = RequestRecord(index=i, sent_ns=10**9 * i, chunk_ns=[10**9 * i + int(ttft_s * 1e9), 10**9 * i + int(ttft_s * 1e9) + 10**6])
        r.end_ns, r.output_tokens = r.chunk_ns[-1], 2
        recs.append(r)
    return RunResult(records=recs, health=health)


def test_an_invalid_verdict_is_never_pass_or_fail(gates: Any) -> None:
    g = gates().gate("ttft_p99")
    lagging = ClientHealth(loop_lag_p99=0.04, probes=400, cpu_share=1.0)
    late_sends = ClientHealth(loop_lag_p99=0.0001, probes=400, send_lag_p99=0.04, sends=1000, cpu_share=1.0)
    for ttft_s, starved in ((0.5, lagging), (0.05, late_sends), (0.5, late_sends)):  # raw fail, pass, fail
        run = _run(starved, ttft_s)
        raw = evaluate(g, run)
        v = apply(raw, g, run)
        assert raw.outcome in ("pass", "fail") and v.outcome == "invalid"
        assert v.observed == raw.observed and v.n == raw.n  # the numbers stay, not gated
        assert f"raw verdict {raw.outcome.upper()}" in v.note and not v.passed and not v.triggered
        assert v.summary().startswith("gate ttft_p99: INVALID: client did not keep up: ")
        assert "P99 40 ms > 7.5 ms allowed for ttft p99 at 150 ms" in v.summary()
        assert headline(v).startswith("gate ttft_p99: invalid: client did not keep up") and "raw verdict" not in headline(v)
        assert v.details["client_allowed_s"] == pytest.approx(0.0075)
        assert Verdict.from_dict(v.to_dict()).outcome == "invalid"
        off = apply(raw, g, run, on=False)  # --perfgate-no-validity: the raw verdict, with the figure noted
        assert off.outcome == raw.outcome and "validity off" in off.note
    # a late read only lengthens a TTFT: a pass against a max stands whatever the loop lag
    raw = evaluate(g, _run(lagging, 0.05))
    assert raw.outcome == "pass" and apply(raw, g, _run(lagging, 0.05)) == raw
    healthy = _run(ClientHealth(loop_lag_p99=0.0002, probes=400))
    assert apply(evaluate(g, healthy), g, healthy) == evaluate(g, healthy)
    assert apply(evaluate(g, _run(None)), g, _run(None)) == evaluate(g, _run(None))  # not measured: as before


def test_health_round_trips_with_the_run() -> None:
    h = ClientHealth.of([100_000, 200_000, 5_000_000], [1_000], 0.5, 2.0)
    assert h.loop_lag_p99 == pytest.approx(0.005) and h.cpu_share == pytest.approx(0.25) and h.probes == 3
    back = RunResult.from_dict(_run(h).to_dict()).health
    assert back == h
    assert math.isnan(ClientHealth.worst([h, ClientHealth(loop_lag_p99=0.001)]).send_lag_max) is False


class Hogging:
    """An engine wrapper that starves its own event loop by design: a task that busy-waits
    ``busy_s`` every ``idle_s`` (pure Python: holds the loop and the GIL), started on the first request."""

    def __init__(self, engine: Any, busy_s: float, idle_s: float) -> None:
        self.engine, self.busy_s, self.idle_s = engine, busy_s, idle_s
        self.task: asyncio.Task[None] | None = None
        self.name, self.kind = engine.name, engine.kind

    async def _hog(self) -> None:
        while True:
            await asyncio.sleep(self.idle_s)
            end = time.perf_counter() + self.busy_s
            while time.perf_counter() < end:
                pass

    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        if self.task is None and not record.warmup:
            self.task = asyncio.get_running_loop().create_task(self._hog())
        await self.engine.generate(request, record, clock)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with scripted_server_process() as url:
        yield url


def _requests(n: int) -> list[Request]:
    return [Request(prompt="a b c", max_tokens=8, extra={"perfgate": {"ttft": 0.01, "itl": 0.005}}) for _ in range(n)]


@pytest.mark.skipif(sys.platform != "linux", reason="the scripted server's process and ours share CLOCK_MONOTONIC on Linux")
def test_a_starved_client_is_invalid_and_a_healthy_one_is_not(server_url: str, gates: Any) -> None:
    g = gates(itl="10 s").gate("itl_p99")  # 500 ms allowed client error
    cfg = LoadConfig(mode="poisson", rate=20.0, num_requests=30, seed=1)
    with calibration_engine(server_url) as eng:
        healthy = run_load(eng, _requests(30), cfg)
        hog = Hogging(eng, busy_s=1.2, idle_s=0.1)
        try:
            starved = run_load(hog, _requests(30), cfg)  # type: ignore[arg-type]
        finally:
            if hog.task is not None:
                hog.task.get_loop().call_soon_threadsafe(hog.task.cancel)
    assert healthy.health is not None and starved.health is not None
    print(f"healthy: {healthy.health.text()}\nstarved: {starved.health.text()}")
    assert starved.health.probes > 0 and starved.health.loop_lag_p99 > 0.5  # a 1.2 s hog: ~1.2 s
    v = apply(evaluate(g, starved), g, starved)
    assert v.outcome == "invalid" and "loop lag " in v.note and "(mean of its worst" in v.note and "500 ms allowed for itl p99 at 10 s" in v.note
    assert healthy.health.probes > 0 and apply(evaluate(g, healthy), g, healthy).outcome != "invalid"
    assert replace(healthy.health, workers=1).sends == 30  # the open loop measured every send's lateness


def test_the_lag_is_also_weighed_over_the_runs_events() -> None:
    """Chunks cluster where the loop is busiest (a burst of streams opening at once): a stall that is
    1 probe in 100 over time but holds most of the run's chunks sets the lag P99."""
    from pytest_perfgate.load.health import event_weighted

    read = [k * 5_000_000 for k in range(100)]
    lags = [100_000] * 100
    lags[50] = 30_000_000
    burst = [read[50] - 1000 * j for j in range(1, 1000)]  # read during the stall, before its probe
    calm = [read[k] - 10 for k in range(100)]
    assert event_weighted(read, lags, calm) == pytest.approx(0.0001)
    assert event_weighted(read, lags, calm + burst) == pytest.approx(0.03)
    h = ClientHealth.of(lags, [], 0.1, 0.5, over_events=event_weighted(read, lags, calm + burst))
    assert h.loop_lag_p99 == pytest.approx(0.03) and h.loop_lag_p50 == pytest.approx(0.0001)
    assert ClientHealth.of(lags, [], 0.1, 0.5).loop_lag_p99 == pytest.approx(0.0001)  # over time alone


def test_many_short_runs_pool_their_lags() -> None:
    """Sequential sampling draws one request per run: their lags pool (histograms, a bin's upper
    edge), so one 10 ms stall among 1,000 probes is no P99, as it would be if each run's P99 (its
    max, at 50 probes) were taken at its worst."""
    calm = [100_000] * 50
    draws = [ClientHealth.of(calm[:-1] + [10_000_000] if k == 0 else calm, [], 0.01, 0.25) for k in range(20)]
    assert draws[0].loop_lag_p99 == pytest.approx(0.01)  # alone: its max
    pooled = ClientHealth.worst(draws)
    assert pooled.loop_lag_p99 == pytest.approx(0.0001, rel=0.08) and pooled.probes == 1000
    assert pooled.loop_lag_max == pytest.approx(0.01) and pooled.workers == 1
    back = ClientHealth.from_dict(pooled.to_dict())
    assert back == pooled
    stalled = [ClientHealth.of(calm[:-2] + [10_000_000] * 2, [], 0.01, 0.25) for _ in range(20)]  # 4% stalled
    assert ClientHealth.worst(stalled).loop_lag_p99 == pytest.approx(0.01, rel=0.08)


def test_a_decision_farther_from_its_threshold_than_the_worst_lag_stands(gates: Any) -> None:
    """A decision whose bound is farther from the threshold than every timestamp can be late was not
    made by the client (busy CI: ITL P90 10.9 ms, bound 11.7 ms, against 200 ms with a 17 ms lag P99
    was invalid); near the threshold, or without a measured worst lag, the run stays invalid."""
    g = gates().gate("ttft_p99")  # max 150 ms; a TTFT fail is judged by the loop lag (a pass is not)
    busy = ClientHealth(loop_lag_p99=0.017, loop_lag_max=0.030, probes=400, cpu_share=0.01)
    far, near = _run(busy, 0.5), _run(busy, 0.16)
    v_far, v_near = apply(evaluate(g, far), g, far), apply(evaluate(g, near), g, near)
    assert evaluate(g, far).outcome == "fail" and v_far.outcome == "fail"  # 500 ms - 30 ms > 150 ms
    assert evaluate(g, near).outcome == "fail" and v_near.outcome == "invalid"  # 160 - 30 <= 150 ms
    # a loop that used 1% CPU waited for the machine: more workers would not help, and it says so
    assert "other processes starved the client" in v_near.note and "set workers" not in v_near.note
    no_max = ClientHealth(loop_lag_p99=0.017, probes=400, cpu_share=0.01)
    run = _run(no_max, 0.5)
    assert apply(evaluate(g, run), g, run).outcome == "invalid"
