"""The NCCL path (CUDA events per iteration). Skips without CUDA; scripts/gpu-check.sh runs the
same path (pytest_perfgate.distributed.gpu_check) on a CUDA machine."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (NCCL all-reduce)")


def test_nccl_world1_cuda_event_timing() -> None:
    from pytest_perfgate.distributed.bench import BenchSpec
    from pytest_perfgate.distributed.launch import Rank, launch

    doc = launch(BenchSpec((1024, 1 << 20), iters=50, warmup=5, dtype="float16"), [Rank()], backend="nccl")
    assert doc["backend"] == "nccl" and doc["timing"] == "cuda-events"
    assert all(len(s["times_us"]) == 50 and s["p50_us"] > 0 for s in doc["sizes"])
