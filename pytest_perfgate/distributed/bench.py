"""The all-reduce benchmark on ``torch.distributed``: NCCL on GPUs, gloo on CPU, same code.

Runs inside an initialised process group (every rank calls :func:`run_allreduce`). Per message
size: ``warmup`` untimed iterations, then ``iters`` timed ones, every iteration's time kept:
- GPU: a CUDA event pair around each all-reduce, read after one synchronize at the end;
- CPU: a barrier, then ``time.perf_counter_ns`` around the all-reduce.
A collective is finished when its slowest rank is: the time of iteration i is the maximum over
ranks. Times are gathered to rank 0 (``gather_object``); other ranks get ``None``.
algbw = S / t and busbw = algbw * 2(n-1)/n (nccl-tests' all-reduce convention).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .sizes import DTYPE_BYTES

#: environment variables that configure communication; every result records those that are set
COMM_ENV_PREFIXES = ("NCCL_", "GLOO_", "TP_", "TORCH_NCCL_", "TORCH_GLOO_", "OMP_NUM_THREADS", "MASTER_ADDR",
                     "MASTER_PORT", "WORLD_SIZE")


def comm_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The communication settings of this process (NCCL_*, GLOO_*, ...), sorted."""
    env = os.environ if env is None else env
    return {k: env[k] for k in sorted(env) if k.startswith(COMM_ENV_PREFIXES)}


@dataclass(frozen=True)
class BenchSpec:
    sizes: tuple[int, ...]
    iters: int = 200
    warmup: int = 10
    dtype: str = "float32"
    device: str = "auto"  # "cuda", "cpu" or "auto" (cuda when the backend is nccl)

    def __post_init__(self) -> None:
        if not self.sizes or any(s <= 0 for s in self.sizes):
            raise ValueError(f"BenchSpec.sizes: need positive byte sizes, got {self.sizes!r}")
        if self.iters < 1 or self.warmup < 0:
            raise ValueError(f"BenchSpec: iters >= 1 and warmup >= 0, got {self.iters}, {self.warmup}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"BenchSpec.dtype: {self.dtype!r} is not one of {', '.join(sorted(DTYPE_BYTES))}")

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": list(self.sizes), "iters": self.iters, "warmup": self.warmup, "dtype": self.dtype,
                "device": self.device}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchSpec:
        return cls(tuple(int(s) for s in d["sizes"]), int(d.get("iters", 200)), int(d.get("warmup", 10)),
                   str(d.get("dtype", "float32")), str(d.get("device", "auto")))


@dataclass(frozen=True)
class SizeResult:
    """One message size: per-iteration times (seconds, max over ranks) and nccl-tests bandwidths."""

    nbytes: int
    world_size: int
    times_s: tuple[float, ...]
    rank_times_s: tuple[tuple[float, ...], ...] = field(default=(), repr=False)

    def quantile(self, q: float) -> float:
        import numpy as np

        return float(np.quantile(np.asarray(self.times_s), q, method="inverted_cdf"))

    def algbw(self, t: float) -> float:
        """bytes/s at time ``t``."""
        return self.nbytes / t if t > 0 else float("inf")

    def busbw(self, t: float) -> float:
        n = self.world_size
        return self.algbw(t) * 2 * (n - 1) / n

    def to_dict(self) -> dict[str, Any]:
        p50, p99 = self.quantile(0.5), self.quantile(0.99)
        return {
            "bytes": self.nbytes, "world_size": self.world_size, "n": len(self.times_s),
            "p50_us": p50 * 1e6, "p99_us": p99 * 1e6, "mean_us": sum(self.times_s) / len(self.times_s) * 1e6,
            "algbw_GBps_p50": self.algbw(p50) / 1e9, "busbw_GBps_p50": self.busbw(p50) / 1e9,
            "busbw_GBps_p99": self.busbw(p99) / 1e9,
            "times_us": [t * 1e6 for t in self.times_s],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SizeResult:
        return cls(int(d["bytes"]), int(d["world_size"]), tuple(float(t) / 1e6 for t in d["times_us"]))


def run_allreduce(spec: BenchSpec, ranks: Sequence[int] | None = None) -> list[SizeResult] | None:
    """Benchmark every size of ``spec`` on the default process group, or on the sub-group of the
    global ``ranks`` (e.g. the ranks of one node; every rank must call this, members or not).
    The group's first rank gets the results; every other rank gets None."""
    import torch
    import torch.distributed as dist

    group = dist.new_group(ranks=list(ranks)) if ranks is not None else None
    if ranks is not None and dist.get_rank() not in ranks:
        return None

    backend = str(dist.get_backend())
    device = spec.device
    if device == "auto":
        device = "cuda" if backend == "nccl" else "cpu"
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dtype = getattr(torch, spec.dtype if spec.dtype not in ("fp32", "fp16", "bf16", "half", "float")
                    else {"fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16",
                          "bf16": "bfloat16"}[spec.dtype])
    world = dist.get_world_size(group)
    me = dist.get_rank(group)
    dst = min(ranks) if ranks is not None else 0
    out: list[SizeResult] = []
    for nbytes in spec.sizes:
        count = max(1, nbytes // DTYPE_BYTES[spec.dtype])
        t = torch.ones(count, dtype=dtype, device=device)
        times = _time_cuda(t, spec, group) if device == "cuda" else _time_cpu(t, spec, group)
        gathered: list[Any] | None = [None] * world if me == 0 else None
        dist.gather_object(times, gathered, dst=dst, group=group)
        if gathered is not None:
            per_rank = tuple(tuple(float(x) for x in g) for g in gathered)
            worst = tuple(max(col) for col in zip(*per_rank, strict=True))
            out.append(SizeResult(count * DTYPE_BYTES[spec.dtype], world, worst, per_rank))
    return out if me == 0 else None


def _time_cpu(t: Any, spec: BenchSpec, group: Any = None) -> list[float]:
    import torch.distributed as dist

    for _ in range(spec.warmup):
        dist.all_reduce(t, group=group)
    times: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(spec.iters):
        dist.barrier(group=group)
        t0 = clock()
        dist.all_reduce(t, group=group)
        times.append((clock() - t0) / 1e9)
    return times


def _time_cuda(t: Any, spec: BenchSpec, group: Any = None) -> list[float]:
    import torch
    import torch.distributed as dist

    for _ in range(spec.warmup):
        dist.all_reduce(t, group=group)
    torch.cuda.synchronize()
    dist.barrier(group=group)
    event: Any = torch.cuda.Event
    pairs = [(event(enable_timing=True), event(enable_timing=True)) for _ in range(spec.iters)]
    for start, end in pairs:
        start.record()
        dist.all_reduce(t, group=group)
        end.record()
    torch.cuda.synchronize()
    return [float(s.elapsed_time(e)) / 1e3 for s, e in pairs]


def results_doc(results: Sequence[SizeResult], *, backend: str, layout: str, env: Mapping[str, str],
                spec: BenchSpec, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document of one benchmark run (what rank 0 writes)."""
    import torch

    return {
        "backend": backend, "layout": layout, "world_size": results[0].world_size if results else 0,
        "torch": torch.__version__, "timing": "cuda-events" if spec.device == "cuda" or backend == "nccl"
        else "perf_counter_ns after barrier", "comm_env": dict(env), "spec": spec.to_dict(),
        "sizes": [r.to_dict() for r in results], **(extra or {}),
    }
