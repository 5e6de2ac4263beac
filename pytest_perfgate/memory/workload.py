"""A transformer-style allocation pattern (the one that fragments) and the max-safe-batch search.

Serving churn: batches of 1..``max_batch`` requests of ``min_len``..``max_len`` tokens; each prefill
allocates per layer a K and a V cache (kept alive) and transient activations and MLP
intermediates (freed after the layer); up to ``live_caches`` requests' caches stay alive and a
random one is evicted when more arrive. Only the allocation pattern matters for fragmentation, so
buffers are allocated, not computed on: the same pattern runs on a CUDA device (torch) or on the
CPU heap (numpy), where the out-of-memory limit is real (``RLIMIT_AS`` in a child process).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

Alloc = Callable[[int], Any]


class OutOfMemory(Exception):
    """An allocation failed: the device (or the process's address space) is out of memory."""


@dataclass(frozen=True)
class Pattern:
    layers: int = 8
    hidden: int = 2048
    kv_width: int = 512          # K (and V) elements per token per layer (kv heads x head dim)
    intermediate: int = 8192
    bytes_per_elem: int = 2      # bf16
    min_len: int = 128
    max_len: int = 4096
    max_batch: int = 8
    steps: int = 60
    live_caches: int = 6
    seed: int = 0
    probe_len: int = 4096        # prompt length of the max-safe-batch prefills
    max_probe_batch: int = 4096  # search cap

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if f.name == "seed" else 1):
                raise ValueError(f"Pattern.{f.name} = {v!r}: must be a positive integer")
        if self.min_len > self.max_len:
            raise ValueError(f"Pattern: min_len {self.min_len} > max_len {self.max_len}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pattern:
        known = {f.name for f in fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"Pattern: unknown keys {bad} (known: {', '.join(sorted(known))})")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prefill(alloc: Alloc, p: Pattern, batch: int, length: int) -> list[Any]:
    """One prefill's allocations; returns the KV cache buffers (the caller keeps them alive)."""
    tokens, b = batch * length, p.bytes_per_elem
    cache: list[Any] = []
    for _ in range(p.layers):
        hidden = alloc(tokens * p.hidden * b)
        cache.append(alloc(tokens * p.kv_width * b))  # K
        cache.append(alloc(tokens * p.kv_width * b))  # V
        mlp = alloc(tokens * p.intermediate * b)
        del hidden, mlp
    return cache


@dataclass
class Churn:
    """The live caches after the churn and what happened during it."""

    live: list[list[Any]]
    ooms: int = 0
    steps: int = 0


def churn(alloc: Alloc, p: Pattern, on_step: Callable[[int], None] | None = None) -> Churn:
    """Serving-like churn; an allocation failure drops every live cache (like a server that
    preempts everything) and is counted."""
    rng = random.Random(p.seed)
    out = Churn(live=[])
    for step in range(p.steps):
        bs = rng.randint(1, p.max_batch)
        ln = rng.randint(p.min_len, p.max_len)
        try:
            out.live.append(prefill(alloc, p, bs, ln))
            if len(out.live) > p.live_caches:
                out.live.pop(rng.randrange(len(out.live)))
        except OutOfMemory:
            out.ooms += 1
            out.live.clear()
        out.steps += 1
        if on_step is not None:
            on_step(step)
    return out


@dataclass(frozen=True)
class Search:
    """Result of :func:`max_safe_batch`: the largest batch that fit, and every probe in order."""

    best: int
    probes: tuple[tuple[int, bool], ...]
    capped: bool = False


def max_safe_batch(fits: Callable[[int], bool], cap: int = 4096) -> Search:
    """Exponential search (1, 2, 4, ...) for the first batch that fails, then binary search between
    the last fit and that failure. ``best`` fit and ``best + 1`` failed in this probe sequence
    (unless ``capped``); 0 when batch 1 fails."""
    if cap < 1:
        raise ValueError(f"max_safe_batch(cap={cap}): must be >= 1")
    probes: list[tuple[int, bool]] = []

    def probe(b: int) -> bool:
        ok = fits(b)
        probes.append((b, ok))
        return ok

    if not probe(1):
        return Search(0, tuple(probes))
    lo = 1
    while True:
        if lo >= cap:
            return Search(cap, tuple(probes), capped=True)
        hi = min(2 * lo, cap)
        if not probe(hi):
            break
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return Search(lo, tuple(probes))


def batch_fits(alloc: Alloc, p: Pattern) -> Callable[[int], bool]:
    """``fits(b)``: a prefill of ``b`` x ``probe_len`` tokens runs without running out of memory."""

    def fits(b: int) -> bool:
        try:
            cache = prefill(alloc, p, b, p.probe_len)
        except OutOfMemory:
            return False
        del cache
        return True

    return fits


def torch_alloc(device: str) -> Alloc:
    """Byte buffers on a torch device; ``torch.OutOfMemoryError`` becomes :class:`OutOfMemory`."""
    import torch

    def alloc(n: int) -> Any:
        try:
            return torch.empty(n, dtype=torch.uint8, device=device)
        except torch.OutOfMemoryError as e:
            raise OutOfMemory(str(e).splitlines()[0]) from None

    return alloc


def numpy_alloc() -> Alloc:
    """Byte buffers on the CPU heap (glibc malloc); ``MemoryError`` becomes :class:`OutOfMemory`."""
    import numpy as np

    def alloc(n: int) -> Any:
        try:
            return np.empty(n, dtype=np.uint8)
        except MemoryError as e:
            raise OutOfMemory(str(e)) from None

    return alloc
