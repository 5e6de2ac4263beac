"""One allocator setting in its own process: ``python -m pytest_perfgate.memory.child SPEC_JSON``.

The parent (:mod:`.sweep`) sets the allocator's environment (``PYTORCH_CUDA_ALLOC_CONF``, glibc
tunables) before this process starts, so it is in place before CUDA (or malloc) initialises. The
child runs the churn under a :class:`MemoryProbe`, then the max-safe-batch search with the churn's
caches still alive (a server under load), and prints one line ``PERFGATE-MEMORY {json}``.

SPEC keys: ``backend`` ("cuda" or "cpu"), ``pattern`` (:class:`Pattern` fields),
``cuda_fraction`` (``torch.cuda.set_per_process_memory_fraction``: a memory budget so that OOM comes
early), ``address_space_bytes`` (cpu: ``RLIMIT_AS`` = the address space in use after start-up + this),
``snapshot`` (probe snapshot mode), ``interval_s`` (probe thread; cuda only).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

from .probe import MallocSource, MemoryProbe, MemorySource, TorchCudaSource
from .workload import Alloc, Pattern, batch_fits, churn, max_safe_batch, numpy_alloc, torch_alloc

MARK = "PERFGATE-MEMORY "
ALLOCATOR_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX",
                 "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def vm_size() -> int:
    """Bytes of address space this process uses now (``VmSize`` of /proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmSize")


def limit_address_space(extra: int) -> int:
    """``RLIMIT_AS`` = address space in use now + ``extra``: allocations past it fail for real."""
    limit = vm_size() + extra
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit


def run(spec: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    backend = spec.get("backend", "cuda")
    p = Pattern.from_dict(dict(spec.get("pattern", {})))
    out: dict[str, Any] = {"backend": backend, "pattern": p.to_dict(), "pid": os.getpid(),
                           "env": {k: os.environ[k] for k in ALLOCATOR_ENV if k in os.environ}}
    source: MemorySource
    alloc: Alloc
    interval: float | None = None
    if backend == "cuda":
        import torch

        out["cuda_initialized_at_start"] = bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]
        if spec.get("cuda_fraction"):
            torch.cuda.set_per_process_memory_fraction(float(spec["cuda_fraction"]))
        source, alloc = TorchCudaSource(), torch_alloc("cuda")
        interval = spec.get("interval_s", 0.005)
        out["max_split_size"] = torch.cuda.memory_stats().get("max_split_size")
    elif backend == "cpu":
        source, alloc = MallocSource(), numpy_alloc()
        if spec.get("address_space_bytes"):
            out["rlimit_as"] = limit_address_space(int(spec["address_space_bytes"]))
    else:
        raise ValueError(f"backend {backend!r}: use 'cuda' or 'cpu'")
    with MemoryProbe(source, interval_s=interval, snapshot=spec.get("snapshot", "end")) as probe:

        def step(_i: int) -> None:
            probe.sample()

        ch = churn(alloc, p, on_step=step)
    assert probe.report is not None
    t1 = time.perf_counter()
    search = max_safe_batch(batch_fits(alloc, p), cap=p.max_probe_batch)
    ch.live.clear()
    out.update(
        memory=probe.report.to_dict(), churn_ooms=ch.ooms, max_safe_batch=search.best, capped=search.capped,
        probes=[list(x) for x in search.probes], churn_s=round(t1 - t0, 3),
        search_s=round(time.perf_counter() - t1, 3),
    )
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(MARK + json.dumps(run(json.loads(argv[1]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
