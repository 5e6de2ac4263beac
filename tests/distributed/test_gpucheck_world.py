"""The GPU check's NCCL world size (issue 26 item 8): one rank measures call latency only, so the
settings sweep runs on two GPUs or not at all, and the report says which."""

from __future__ import annotations

from pytest_perfgate.distributed.gpu_check import world


def test_one_gpu_skips_the_nccl_settings_sweep_and_says_why() -> None:
    n, said = world("nccl", 1)
    assert n == 1 and "busbw is 0" in said and "settings sweep is skipped (needs >= 2 GPUs)" in said


def test_two_gpus_run_two_ranks() -> None:
    assert world("nccl", 8) == (2, "NCCL, 2 ranks on 2 of 8 GPUs: latency, busbw and the settings sweep are measured")
    assert world("gloo", 0)[0] == 2
