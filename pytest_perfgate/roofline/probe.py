"""Measured peaks of this machine: a short GEMM and a memory-copy probe, cached per machine.

On a CPU there is no datasheet figure that the embedded default engine can be held to, so floors
use what this machine measurably reaches: the best of several fp32 matrix products (FLOP/s) and
the best of several reads of a buffer twice the size of a typical L3 (bytes/s). Best-of, not mean: other
processes on a shared runner only ever slow a repetition down. The result is cached in
``$PERFGATE_CACHE/../floors`` (default ``~/.cache/pytest-perfgate/floors``) under a key of CPU model,
core count, thread count and torch version, so it is measured once per machine (~5 s).

On CUDA, :func:`gpu_peaks` measures the same on the device (for ``scripts/gpu-check.sh``).
:func:`detect` says what this machine is: known CUDA devices, else the CPU's measured peak.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .hardware import TERA, Hardware, from_accelerator, lookup

PROBE_VERSION = 2


def cache_dir() -> Path:
    env = os.environ.get("PERFGATE_CACHE")
    base = Path(env).parent if env else Path.home() / ".cache" / "pytest-perfgate"
    return base / "floors"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key() -> str:
    """Host, CPU model, cores usable, torch version (no torch import: the header checks the cache)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "none"
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    parts = [platform.node(), _cpu_model(), str(os.cpu_count()), str(usable), torch_version, str(PROBE_VERSION)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _best(fn: Any, span_s: float, burst_s: float = 0.05, gap_s: float = 0.1, *, warm_s: float = 0.3,
          clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep) -> float:
    """Shortest wall time of ``fn`` over bursts of ``burst_s`` spread, ``gap_s`` apart, over ``span_s``.

    On a shared or virtual machine the core itself changes speed for seconds at a time (a busy
    hyper-thread sibling, a neighbour's load): measured here, the median 256x256 product went from
    82 to 53 GFLOP/s between two back-to-back 0.6 s windows, with thread CPU time tracking wall
    time (so not time slicing, which best-of alone would absorb). A best over one contiguous window
    inherits that window's state (6 probes: 78-90 GFLOP/s); bursts spread over 3 s catch the core
    at its own speed (6 probes: 87.9-89.9). ``warm_s`` of calls first are not counted (a cold first
    burst reads ~5% low: caches, clocks). ``clock`` and ``sleep`` are the real ones; a test passes a
    scripted machine's (tests/floors/test_floors_probe.py)."""
    warm_end = clock() + warm_s
    while clock() < warm_end:
        fn()
    best = float("inf")
    end = clock() + span_s
    while True:
        burst_end = clock() + burst_s
        while True:
            t = clock()
            fn()
            now = clock()
            best = min(best, now - t)
            if now >= burst_end:
                break
        if now >= end:
            return best
        sleep(gap_s)


def measure_cpu(sizes: tuple[int, ...] = (256,), read_mib: int = 64, gemm_s: float = 3.0,
                read_s: float = 1.0) -> dict[str, Any]:
    """fp32 GEMM peak and read bandwidth of this CPU.

    GEMM: best FLOP/s of one thread over square sizes ``sizes`` (256: cache-resident, so it measures the
    core, not memory), times the threads torch uses: a two-thread product waits for its slower
    thread, so on a shared runner one thread per core measures the peak far more repeatably. Read:
    best bytes/s of a sum over ``read_mib`` MiB (twice the 32 MiB L3 of a typical runner), all
    threads (or a copy's read + write bytes/s, whichever is higher). Best-of short bursts spread over
    seconds (:func:`_best`): contention only ever slows one down, and a floor must not rest on a
    slowed-down measurement."""
    import torch

    threads = torch.get_num_threads()
    g = torch.Generator().manual_seed(0)
    gemm = 0.0
    torch.set_num_threads(1)
    try:
        for n in sizes:
            a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
            out = torch.empty(n, n)
            gemm = max(gemm, 2 * n**3 / _best(lambda: torch.mm(a, b, out=out), gemm_s))  # noqa: B023
    finally:
        torch.set_num_threads(threads)
    src = torch.ones(read_mib * 2**20 // 4)
    dst = torch.empty_like(src)
    read = max(src.numel() * 4 / _best(lambda: src.sum(), read_s),  # read only
               2 * src.numel() * 4 / _best(lambda: dst.copy_(src), read_s))  # read + write
    return {
        "gemm_fp32_flops": gemm * threads,
        "gemm_fp32_flops_per_thread": gemm,
        "copy_bytes_per_s": read,  # read bandwidth (what decode is bound by)
        "gemm_sizes": list(sizes), "read_mib": read_mib, "threads": threads, "cpu": _cpu_model(),
        "torch": torch.__version__, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip


def cpu_hardware(run: bool = True, cache: Path | None = None, refresh: bool = False) -> Hardware | None:
    """The CPU as :class:`Hardware` from its cached probe; measured now when missing and ``run``
    (``refresh``: measure again and keep the higher of old and new)."""
    path = (cache or cache_dir()) / f"cpu-{machine_key()}.json"
    data: dict[str, Any] | None = None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = None
    if data is None or refresh:
        if not run:
            return None
        fresh = measure_cpu()
        if data is not None:  # keep the best ever measured here: contention only ever lowers a peak
            fresh["gemm_fp32_flops"] = max(fresh["gemm_fp32_flops"], float(data["gemm_fp32_flops"]))
            fresh["copy_bytes_per_s"] = max(fresh["copy_bytes_per_s"], float(data["copy_bytes_per_s"]))
        data = fresh
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, path)
        except OSError:
            pass
    return hardware_from_probe(data, str(path))


def hardware_from_probe(data: dict[str, Any], where: str = "") -> Hardware:
    flops = float(data["gemm_fp32_flops"])
    src = (f"measured on this CPU ({data.get('cpu', '?')}, {data.get('threads', '?')} threads): fp32 GEMM "
           f"{flops / 1e9:.0f} GFLOP/s, read {float(data['copy_bytes_per_s']) / 1e9:.1f} GB/s"
           + (f"; cached in {where}" if where else ""))
    return Hardware("cpu", 1, {"fp32": flops}, float(data["copy_bytes_per_s"]), src, extra=dict(data))


def gpu_peaks(n: int = 8192, copy_gib: int = 2, iters: int = 10) -> dict[str, Any]:
    """GEMM TFLOP/s per dtype (bf16, fp16, tf32) and device copy TB/s (read + write) on cuda:0."""
    import torch

    def bench(fn: Any) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        e = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        s.record()
        for _ in range(iters):
            fn()
        e.record()
        torch.cuda.synchronize()
        return float(s.elapsed_time(e)) / iters / 1e3

    res: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
                           "torch": torch.__version__}
    a = torch.randn(n, n, device="cuda")
    for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("tf32", torch.float32)):
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        x, y = a.to(dt), a.to(dt)
        res[f"gemm_{name}_tflops"] = round(2 * n**3 / bench(lambda: x @ y) / TERA, 1)  # noqa: B023
    torch.backends.cuda.matmul.allow_tf32 = False
    buf = torch.empty(copy_gib * 2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(buf)
    res["copy_tb_per_s_read_plus_write"] = round(2 * buf.numel() / bench(lambda: dst.copy_(buf)) / TERA, 2)
    return res


def detect(probe: bool = True) -> Hardware | None:
    """This machine: the CUDA devices if any (known table, else None when unknown and ``probe`` is
    off), else the CPU's measured peak (cached per machine; ``probe=False`` -> cached only)."""
    cuda = False
    if _nvidia_driver() or _rocm_driver():  # ROCm's torch answers through torch.cuda too (torch.version.hip)
        try:
            import torch

            cuda = bool(torch.cuda.is_available())
        except Exception:
            cuda = False
    if cuda:
        name = str(torch.cuda.get_device_name(0))
        count = int(torch.cuda.device_count())
        acc = lookup(name)
        if acc is None:
            return None
        hip = getattr(torch.version, "hip", None)
        via = f" (ROCm {hip})" if hip else ""
        return from_accelerator(acc, count, f"detected {name!r} x{count}{via}; {acc.source}")
    return cpu_hardware(run=probe)


def _nvidia_driver() -> bool:
    """A CUDA device may be visible (checked without importing torch)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        return gpus.is_dir() and any(gpus.iterdir())
    except OSError:
        return False


def _rocm_driver() -> bool:
    """An AMD GPU may be visible (the amdgpu kernel driver's /dev/kfd; no torch import)."""
    if os.environ.get("HIP_VISIBLE_DEVICES", None) == "" or os.environ.get("ROCR_VISIBLE_DEVICES", None) == "":
        return False
    return os.path.exists("/dev/kfd")
