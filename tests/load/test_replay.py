"""Trace replay against the scripted calibration server (a separate process, real loopback sockets).

The schedule is checked exactly (it is computed: arrival x time_scale), the sends causally (never
before their scheduled time; the server never receives a request before it was sent; a turn never
before the previous turn's answer ended). How late a send is on a busy machine is a figure of the
machine: printed (the send-lag P99), bounded only by a generous liveness limit.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import pytest
from scripted_process import calibration_engine, ground_truth, scripted_server_process

from pytest_perfgate.contract import Request
from pytest_perfgate.load.replay import trace_offsets_ns
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig, LoadConfigError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="cross-process perf_counter_ns needs Linux")

LIVENESS_S = 2.0  # a send this late means the replay loop is broken, not that the machine is busy


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with scripted_server_process() as url:
        yield url


def _trace(n: int, tag: str) -> list[Request]:
    rng = np.random.default_rng(7)
    arrivals = np.concatenate([[0.0], np.cumsum(rng.exponential(0.02, n - 1))])
    return [Request(prompt="a b c", max_tokens=4, arrival=float(t),
                    extra={"perfgate": {"id": f"{tag}{k}", "ttft": 0.002, "itl": 0.001}})
            for k, t in enumerate(arrivals)]


@pytest.mark.parametrize("scale", [1.0, 0.5, 2.0])
def test_a_trace_replays_at_its_offsets(server_url: str, scale: float) -> None:
    with calibration_engine(server_url) as eng:
        reqs = _trace(40, f"s{scale}-")
        res = run_load(eng, reqs, LoadConfig(mode="trace", time_scale=scale))
        gt = ground_truth(server_url)
        lags = []
        for rec, req in zip(res.records, reqs, strict=True):
            assert rec.ok, rec.error
            assert rec.scheduled_ns is not None and req.arrival is not None
            # the schedule is the trace's offsets times the scale, exactly (to the rounded ns)
            assert rec.scheduled_ns - res.start_ns == round(req.arrival * scale * 1e9)
            lag = rec.sent_ns - rec.scheduled_ns - (rec.connect_ns or 0)
            assert lag >= 0  # never sent early
            assert rec.sent_ns <= gt[f"s{scale}-{rec.index}"]["received_ns"]
            lags.append(lag)
        p99 = float(np.sort(lags)[int(np.ceil(0.99 * len(lags))) - 1]) / 1e6
        print(f"time_scale {scale}: send lag P50 {np.median(lags) / 1e6:.3f} ms, P99 {p99:.3f} ms, "
              f"max {max(lags) / 1e6:.3f} ms over {len(lags)} requests (loopback, scripted server)")
        assert max(lags) < LIVENESS_S * 1e9


def test_turns_wait_for_the_previous_answer(server_url: str) -> None:
    with calibration_engine(server_url) as eng:
        # turn 1 of each session is due at once, long before turn 0's 30 ms answer ends
        reqs = []
        for s in range(3):
            for t in range(2):
                reqs.append(Request(prompt="x", max_tokens=3, arrival=0.001 * s, session=f"c{s}", turn=t,
                                    extra={"perfgate": {"ttft": 0.03, "itl": 0.001}}))
        for mode in (LoadConfig(mode="trace"), LoadConfig(mode="poisson", rate=500.0),
                     LoadConfig(mode="concurrency", concurrency=6)):
            res = run_load(eng, reqs, mode)
            recs = res.records
            for s in range(3):
                first, second = recs[2 * s], recs[2 * s + 1]
                assert first.ok and second.ok
                assert first.end_ns is not None and second.sent_ns >= first.end_ns, mode.mode
                assert second.scheduled_ns is not None and second.scheduled_ns >= first.end_ns


def test_trace_mode_needs_arrivals_and_keeps_to_the_trace() -> None:
    reqs = [Request(prompt="x", max_tokens=1, arrival=0.0), Request(prompt="y", max_tokens=1)]
    with pytest.raises(LoadConfigError, match="request 1 .* has none .* mode 'poisson'"):
        trace_offsets_ns(reqs, LoadConfig(mode="trace"))
    with pytest.raises(LoadConfigError, match="sends each of the trace's 2 requests once"):
        trace_offsets_ns(reqs, LoadConfig(mode="trace", num_requests=3))
    with pytest.raises(LoadConfigError, match="time_scale must be > 0"):
        LoadConfig(mode="trace", time_scale=0)
    ok = [Request(prompt="x", max_tokens=1, arrival=a) for a in (0.0, 0.25, 1.5)]
    assert trace_offsets_ns(ok, LoadConfig(mode="trace", time_scale=2)).tolist() == [0, 500_000_000, 3_000_000_000]
