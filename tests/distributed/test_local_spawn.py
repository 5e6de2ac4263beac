"""A failing rank ends a local job (the successful 2-rank gloo runs are in test_tuning.py)."""

from __future__ import annotations

import pytest

from pytest_perfgate.distributed.bench import BenchSpec
from pytest_perfgate.distributed.launch import LaunchError, Rank, launch


def test_a_failing_rank_fails_the_job_and_no_rank_is_left() -> None:
    with pytest.raises(LaunchError, match=r"rank 1: exit") as e:
        # rank 1 gets a bad backend setting: the job must end with both ranks' status, not hang
        launch(BenchSpec((8,), iters=5, warmup=0), [Rank(), Rank(env={"GLOO_DEVICE_TRANSPORT": "NOPE"})],
               timeout_s=120)
    assert "unsupported gloo device" in str(e.value)
