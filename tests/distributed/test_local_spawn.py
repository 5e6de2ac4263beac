"""Real multi-process gloo all-reduce: N ranks spawned as child processes (env:// over TCP)."""

from __future__ import annotations

import os

import pytest

from pytest_perfgate.distributed.bench import BenchSpec, SizeResult
from pytest_perfgate.distributed.launch import LaunchError, Rank, launch


def test_two_gloo_ranks_every_iteration_kept_and_busbw() -> None:
    spec = BenchSpec((8, 4096), iters=60, warmup=3)
    doc = launch(spec, [Rank(), Rank()], comm={"GLOO_SOCKET_IFNAME": "lo"})
    assert doc["backend"] == "gloo" and doc["world_size"] == 2
    assert doc["timing"] == "perf_counter_ns after barrier"
    assert doc["comm_env"]["GLOO_SOCKET_IFNAME"] == "lo" and doc["comm_env"]["WORLD_SIZE"] == "2"
    assert "GLOO_SOCKET_IFNAME" not in os.environ  # the setting went to the ranks only
    assert [s["bytes"] for s in doc["sizes"]] == [8, 4096]
    for s in doc["sizes"]:
        r = SizeResult.from_dict(s)
        assert len(r.times_s) == 60 and all(t > 0 for t in r.times_s)  # warm-up excluded, all kept
        t50 = r.quantile(0.5)
        assert s["algbw_GBps_p50"] == pytest.approx(s["bytes"] / t50 / 1e9, rel=1e-6)
        assert s["busbw_GBps_p50"] == pytest.approx(s["algbw_GBps_p50"] * 2 * (2 - 1) / 2, rel=1e-9)
        assert s["p99_us"] >= s["p50_us"]


def test_a_failing_rank_fails_the_job_and_no_rank_is_left() -> None:
    with pytest.raises(LaunchError, match=r"rank 1: exit") as e:
        # rank 1 gets a bad backend setting: the job must end with both ranks' status, not hang
        launch(BenchSpec((8,), iters=5, warmup=0), [Rank(), Rank(env={"GLOO_DEVICE_TRANSPORT": "NOPE"})],
               timeout_s=120)
    assert "unsupported gloo device" in str(e.value)
