"""The probe on a real allocator (glibc malloc of this process): explicit and threaded samples,
peaks, snapshot modes; the CUDA source refuses clearly without a GPU."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pytest_perfgate.memory.probe import MallocSource, MemoryProbe, ProbeUnavailable, TorchCudaSource
from pytest_perfgate.memory.workload import Pattern, churn, numpy_alloc
from pytest_perfgate.runtime.timeouts import scaled

MiB = 2**20


def test_probe_sees_a_real_allocation_peak() -> None:
    with MemoryProbe(MallocSource(), interval_s=None) as p:
        before = p.sample()
        keep = [np.ones(4 * MiB, dtype=np.uint8) for _ in range(8)]  # 32 MiB touched
        during = p.sample()
        del keep
    r = p.report
    assert r is not None
    assert during.allocated - before.allocated >= 32 * MiB
    assert r.peak_allocated >= during.allocated and r.peak_reserved >= r.peak_allocated
    assert len(r.samples) == 4  # entry, two explicit, exit
    assert r.alloc_retries == 0 and r.ooms == 0
    assert r.fragmentation("external") is None  # malloc has no snapshot


def test_background_thread_samples_during_the_workload() -> None:
    with MemoryProbe(MallocSource(), interval_s=0.005) as p:
        # liveness only: a busy machine may run the thread late, never not at all
        deadline = time.monotonic() + scaled(120)
        while p.count < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert p.count >= 6, "the sampling thread never ran"
    assert p.report is not None and len(p.report.samples) >= 5
    ts = [s.t for s in p.report.samples]
    assert ts == sorted(ts)


def test_probe_around_the_transformer_pattern_on_the_cpu_heap() -> None:
    pat = Pattern(layers=2, hidden=128, kv_width=32, intermediate=512, bytes_per_elem=4, min_len=16, max_len=256, steps=20)
    with MemoryProbe(MallocSource(), interval_s=None) as p:
        ch = churn(numpy_alloc(), pat, on_step=lambda _i: None)
        p.sample()
        live = sum(b.nbytes for cache in ch.live for b in cache)
        ch.live.clear()
    assert p.report is not None and ch.ooms == 0 and ch.steps == 20
    assert p.report.peak_allocated >= live > 0
    d = p.report.to_dict()
    assert d["device"] == "cpu glibc malloc" and d["definition"] == "inactive_split"


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="snapshot='always'"):
        MemoryProbe(MallocSource(), snapshot="always")
    with pytest.raises(ValueError, match="interval_s=0"):
        MemoryProbe(MallocSource(), interval_s=0)
    with pytest.raises(ValueError, match="unknown fragmentation definition"):
        MemoryProbe(MallocSource(), definition="rss")


def test_cuda_source_refuses_without_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the refusal is for machines without one")
    with pytest.raises(ProbeUnavailable, match="no CUDA device"):
        TorchCudaSource()
    with pytest.raises(ProbeUnavailable, match="no CUDA device"):
        MemoryProbe()
