"""A memory probe around any workload: ``with MemoryProbe() as p: work(); p.report``.

It reads the allocator's statistics at entry, at exit, at every ``p.sample()`` the workload calls
(precise points, e.g. after each step) and every ``interval_s`` from a background thread (the
allocator's statistics are host-side counters: reading them doesn't synchronise the device).
``torch.cuda.memory_snapshot()`` walks every block, so it is taken only where cheap: at exit
(``snapshot="end"``, the default), at explicit samples that set a new reserved high-water mark
(``"peaks"``), or never.

Sources: :class:`TorchCudaSource` (``torch.cuda.memory_stats()``, imported lazily) and
:class:`MallocSource` (glibc ``mallinfo2()``: the CPU heap seen through the same definitions, used
where no GPU is present).
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

from .stats import (
    ALLOCATED,
    DEFAULT_DEFINITION,
    INACTIVE_SPLIT,
    PEAK_ALLOCATED,
    PEAK_RESERVED,
    RESERVED,
    MemoryReport,
    MemorySample,
    check_definition,
)

SNAPSHOT_MODES = ("never", "end", "peaks")


class ProbeUnavailable(RuntimeError):
    """The probe's source can't be read here (no CUDA device, no glibc)."""


def cuda_unavailable() -> str | None:
    """Why the CUDA memory gates can't run here (no torch, no CUDA device), None when they can."""
    try:
        import torch
    except ImportError:
        return "the CUDA memory gates need torch (not installed)"
    if not torch.cuda.is_available():
        return ("no CUDA device (torch.cuda.is_available() is False): the memory gates read "
                "torch.cuda.memory_stats(); the CPU machinery is tested in tests/memory")
    return None


class MemorySource(Protocol):
    name: str

    def stats(self) -> Mapping[str, Any]: ...

    def segments(self) -> Sequence[Mapping[str, Any]] | None: ...

    def reset_peak(self) -> None: ...


class TorchCudaSource:
    """``torch.cuda.memory_stats(device)`` and ``memory_snapshot()`` segments of that device."""

    def __init__(self, device: int | None = None) -> None:
        import torch

        if not torch.cuda.is_available():
            raise ProbeUnavailable("no CUDA device (torch.cuda.is_available() is False): the memory probe "
                                   "reads torch.cuda.memory_stats()")
        self._torch = torch
        self.device = torch.cuda.current_device() if device is None else device
        self.name = f"cuda:{self.device} {torch.cuda.get_device_name(self.device)}"

    def stats(self) -> Mapping[str, Any]:
        return dict(self._torch.cuda.memory_stats(self.device))

    def segments(self) -> Sequence[Mapping[str, Any]] | None:
        segs: list[Mapping[str, Any]] = self._torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
        return [s for s in segs if s.get("device", self.device) == self.device]

    def reset_peak(self) -> None:
        self._torch.cuda.reset_peak_memory_stats(self.device)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


class MallocSource:
    """The process's glibc heap as a memory_stats()-shaped mapping: reserved = heap arenas +
    mmapped chunks, allocated = chunks in use + mmapped chunks, inactive split = free chunks inside
    the arenas (memory the allocator holds in pieces). No snapshot, no OOM counter."""

    name = "cpu glibc malloc"

    def __init__(self) -> None:
        try:
            libc = ctypes.CDLL(None)
            fn = libc.mallinfo2
        except (OSError, AttributeError) as e:
            raise ProbeUnavailable(f"no glibc mallinfo2() here ({e})") from None
        fn.restype = _Mallinfo2
        self._fn: Callable[[], _Mallinfo2] = fn
        self._peak_a = self._peak_r = 0

    def stats(self) -> Mapping[str, Any]:
        mi = self._fn()
        reserved = int(mi.arena + mi.hblkhd)
        allocated = min(int(mi.uordblks + mi.hblkhd), reserved)
        self._peak_a, self._peak_r = max(self._peak_a, allocated), max(self._peak_r, reserved)
        return {ALLOCATED: allocated, RESERVED: reserved, INACTIVE_SPLIT: int(mi.fordblks),
                PEAK_ALLOCATED: self._peak_a, PEAK_RESERVED: self._peak_r}

    def segments(self) -> Sequence[Mapping[str, Any]] | None:
        return None

    def reset_peak(self) -> None:
        self._peak_a = self._peak_r = 0


def default_source() -> MemorySource:
    """The CUDA device's allocator; :class:`ProbeUnavailable` when there is none."""
    return TorchCudaSource()


class MemoryProbe:
    """Context manager; ``report`` (a :class:`MemoryReport`) is set on exit."""

    def __init__(
        self,
        source: MemorySource | None = None,
        *,
        interval_s: float | None = 0.01,
        snapshot: str = "end",
        definition: str = DEFAULT_DEFINITION,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if snapshot not in SNAPSHOT_MODES:
            raise ValueError(f"MemoryProbe(snapshot={snapshot!r}): use one of {', '.join(SNAPSHOT_MODES)}")
        if interval_s is not None and not interval_s > 0:
            raise ValueError(f"MemoryProbe(interval_s={interval_s!r}): must be > 0 seconds, or None for no thread")
        self.definition = check_definition(definition, "MemoryProbe(definition=...)")
        self.source = source if source is not None else default_source()
        self.interval_s = interval_s
        self.snapshot = snapshot
        self._clock = clock
        self._t0 = 0.0
        self._samples: list[MemorySample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._high = -1
        self.report: MemoryReport | None = None

    @property
    def count(self) -> int:
        """Samples taken so far."""
        with self._lock:
            return len(self._samples)

    def sample(self, snapshot: bool | None = None) -> MemorySample:
        """Read the allocator now; a snapshot too when ``snapshot`` (default: per the probe's mode)."""
        st = self.source.stats()
        t = self._clock() - self._t0
        take = snapshot if snapshot is not None else (
            self.snapshot == "peaks" and int(st.get(RESERVED, 0)) > self._high)
        segs = self.source.segments() if take else None
        s = MemorySample.from_stats(st, t, segs, source=self.source.name)
        with self._lock:
            self._samples.append(s)
            if segs is not None:
                self._high = max(self._high, s.reserved)
        return s

    def _poll(self) -> None:
        assert self.interval_s is not None
        while not self._stop.wait(self.interval_s):
            self.sample(snapshot=False)

    def __enter__(self) -> MemoryProbe:
        self.source.reset_peak()
        self._t0 = self._clock()
        self.sample(snapshot=False)
        if self.interval_s is not None:
            self._thread = threading.Thread(target=self._poll, name="perfgate-memory-probe", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        self.sample(snapshot=self.snapshot != "never")
        with self._lock:
            samples = tuple(sorted(self._samples, key=lambda s: s.t))
        self.report = MemoryReport(samples, self.definition, self.source.name)
