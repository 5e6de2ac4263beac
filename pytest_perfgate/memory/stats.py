"""Memory samples and the three fragmentation definitions (formulas in docs/metrics.md).

Plain Python, no torch: a sample is read from a ``torch.cuda.memory_stats()``-shaped mapping and,
where taken, the segments of ``torch.cuda.memory_snapshot()``.

- ``reserved``: 1 - allocated / reserved (what the allocator holds but no tensor uses: mostly its cache)
- ``inactive_split``: inactive split bytes / reserved (free pieces of partly used segments: the
  caching allocator can't hand a segment back or use it for a larger block while any piece is live)
- ``external``: 1 - largest free block / total free bytes, from the snapshot (how badly the free
  memory is scattered: a request larger than the largest free block needs new memory or fails)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFINITIONS: dict[str, str] = {
    "reserved": "1 - allocated_bytes / reserved_bytes",
    "inactive_split": "inactive_split_bytes / reserved_bytes",
    "external": "1 - largest free block / total free bytes (memory_snapshot segments)",
}
# The definition gated when the user names none. Evidence (tests/memory/test_memory_stats.py, real H200
# fixtures): across the three allocator settings it orders the measured max safe batch exactly
# (Spearman -1), where 1 - allocated/reserved orders it wrongly (-0.5); see docs/metrics.md.
DEFAULT_DEFINITION = "inactive_split"

ALLOCATED = "allocated_bytes.all.current"
RESERVED = "reserved_bytes.all.current"
INACTIVE_SPLIT = "inactive_split_bytes.all.current"
RETRIES = "num_alloc_retries"
OOMS = "num_ooms"
PEAK_ALLOCATED = "allocated_bytes.all.peak"
PEAK_RESERVED = "reserved_bytes.all.peak"
_REQUIRED = (ALLOCATED, RESERVED, INACTIVE_SPLIT)


class MemoryStatsError(ValueError):
    """A memory_stats() mapping or snapshot that can't be read (missing key, negative bytes)."""


def check_definition(name: str, where: str = "definition") -> str:
    if name not in DEFINITIONS:
        raise MemoryStatsError(f"{where}: unknown fragmentation definition {name!r} (known: {', '.join(DEFINITIONS)})")
    return name


def _int(stats: Mapping[str, Any], key: str, source: str, default: int | None = None) -> int:
    if key not in stats:
        if default is not None:
            return default
        raise MemoryStatsError(f"{source}: no {key!r} (is this a torch.cuda.memory_stats() dictionary?)")
    v = stats[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise MemoryStatsError(f"{source}: {key} = {v!r} is not a non-negative number of bytes")
    return int(v)


@dataclass(frozen=True)
class FreeBlocks:
    """Free (``inactive``) blocks of a memory snapshot."""

    total: int
    largest: int
    count: int

    @property
    def external(self) -> float:
        """1 - largest / total; 0 when nothing is free (no free memory is not scattered memory)."""
        return 1.0 - self.largest / self.total if self.total else 0.0


def free_blocks(segments: Sequence[Mapping[str, Any]], source: str = "memory_snapshot()") -> FreeBlocks:
    """Free blocks of ``torch.cuda.memory_snapshot()`` segments (block ``state == "inactive"``)."""
    total = largest = count = 0
    for i, seg in enumerate(segments):
        blocks = seg.get("blocks") if isinstance(seg, Mapping) else None
        if not isinstance(blocks, Sequence):
            raise MemoryStatsError(f"{source}: segment {i} has no 'blocks' list")
        for b in blocks:
            size = _int(b, "size", f"{source}: segment {i} block")
            if b.get("state") == "inactive":
                total += size
                largest = max(largest, size)
                count += 1
    return FreeBlocks(total, largest, count)


@dataclass(frozen=True)
class MemorySample:
    """One reading of the allocator: bytes, counters, and (when a snapshot was taken) free blocks."""

    t: float
    allocated: int
    reserved: int
    inactive_split: int
    retries: int = 0
    ooms: int = 0
    free: FreeBlocks | None = None
    peak_allocated: int = 0
    peak_reserved: int = 0

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any], t: float = 0.0, segments: Sequence[Mapping[str, Any]] | None = None,
                   source: str = "memory_stats()") -> MemorySample:
        if not isinstance(stats, Mapping):
            raise MemoryStatsError(f"{source}: expected a mapping, got {type(stats).__name__}")
        a = _int(stats, ALLOCATED, source)
        r = _int(stats, RESERVED, source)
        if a > r:
            raise MemoryStatsError(f"{source}: {ALLOCATED} = {a} exceeds {RESERVED} = {r}")
        return cls(
            t=t, allocated=a, reserved=r, inactive_split=_int(stats, INACTIVE_SPLIT, source),
            retries=_int(stats, RETRIES, source, 0), ooms=_int(stats, OOMS, source, 0),
            free=free_blocks(segments, source) if segments is not None else None,
            peak_allocated=_int(stats, PEAK_ALLOCATED, source, a), peak_reserved=_int(stats, PEAK_RESERVED, source, r),
        )

    def fragmentation(self, definition: str) -> float | None:
        """The fraction under ``definition`` (None: ``external`` without a snapshot)."""
        check_definition(definition)
        if definition == "external":
            return self.free.external if self.free is not None else None
        if self.reserved == 0:
            return 0.0
        if definition == "reserved":
            return 1.0 - self.allocated / self.reserved
        return self.inactive_split / self.reserved


@dataclass(frozen=True)
class MemoryReport:
    """What a probe saw during a workload. Implements ``perfgate_data`` for gates
    (``fragmentation`` under ``definition``, ``memory`` = peak reserved bytes)."""

    samples: tuple[MemorySample, ...]
    definition: str = DEFAULT_DEFINITION
    device: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_definition(self.definition)
        if not self.samples:
            raise MemoryStatsError("memory report: no samples (the probe read nothing)")

    @property
    def peak_reserved(self) -> int:
        return max(max(s.reserved, s.peak_reserved) for s in self.samples)

    @property
    def peak_allocated(self) -> int:
        return max(max(s.allocated, s.peak_allocated) for s in self.samples)

    @property
    def alloc_retries(self) -> int:
        """cudaMalloc retries (the allocator freed its cache and tried again) during the workload."""
        return self.samples[-1].retries - self.samples[0].retries

    @property
    def ooms(self) -> int:
        return self.samples[-1].ooms - self.samples[0].ooms

    def fragmentation(self, definition: str | None = None, at: str = "max") -> float | None:
        """``at="max"``: the worst sample (OOMs happen at the worst moment); ``at="peak"``: the
        sample at peak reserved memory (METRICS.md's "at the workload's peak"). None: ``external``
        and no sample had a snapshot."""
        d = check_definition(definition or self.definition)
        if at == "peak":
            top = max(s.reserved for s in self.samples)
            cands = [s for s in self.samples if s.reserved == top and s.fragmentation(d) is not None]
            return cands[-1].fragmentation(d) if cands else None
        if at != "max":
            raise MemoryStatsError(f"fragmentation(at={at!r}): use 'max' or 'peak'")
        vals = [v for v in (s.fragmentation(d) for s in self.samples) if v is not None]
        return max(vals) if vals else None

    def perfgate_data(self, metric: str) -> Any:
        from ..config.metrics import lookup
        from ..verdicts.samples import SampleError, make_samples

        m = lookup(metric)
        name = m.name if m else metric
        if name == "fragmentation":
            v = self.fragmentation()
            if v is None:
                raise SampleError(f"fragmentation ({self.definition}): no memory_snapshot() was taken; "
                                  "probe with snapshot=True or pick another definition")
            return make_samples([100.0 * v], "%", label=f"fragmentation ({self.definition})")
        if name == "memory":
            return make_samples([float(self.peak_reserved)], "B", label="peak reserved")
        raise SampleError(f"{metric}: a memory probe measures fragmentation and memory (peak reserved bytes)")

    def to_dict(self) -> dict[str, Any]:
        frag = {d: {"max": self.fragmentation(d), "peak": self.fragmentation(d, at="peak")} for d in DEFINITIONS}
        return {
            "device": self.device, "definition": self.definition, "formulas": dict(DEFINITIONS),
            "peak_reserved_bytes": self.peak_reserved, "peak_allocated_bytes": self.peak_allocated,
            "fragmentation": frag, "alloc_retries": self.alloc_retries, "ooms": self.ooms,
            "samples": len(self.samples), "snapshots": sum(s.free is not None for s in self.samples),
            **dict(self.extra),
        }


WHY_GATED = {
    "inactive_split": "it orders the measured max safe batch of the allocator settings exactly (Spearman -1 on "
                      "the H200 fixtures; 1 - allocated/reserved: -0.5)",
    "reserved": "chosen in thresholds.toml: it counts the allocator's whole cache, not only split segments",
    "external": "chosen in thresholds.toml: how scattered the free memory is (memory_snapshot)",
}


def definitions_note(fragmentation: Mapping[str, Mapping[str, float | None]], gated: str,
                     setting: str = "") -> str:
    """One line with every definition's worst value (``MemoryReport.to_dict()["fragmentation"]``),
    which one the gate reads and why; under ``expandable_segments`` the split share is 0 by
    construction (segments grow in place, nothing is split), so the line says so."""
    parts = []
    for d in DEFINITIONS:
        v = (fragmentation.get(d) or {}).get("max")
        parts.append(f"{d} ({DEFINITIONS[d]}) " + (f"{100 * v:.1f}%" if v is not None else "not measured")
                     + (" [gated]" if d == gated else ""))
    line = f"fragmentation: {'; '.join(parts)}. The gate reads {gated}: {WHY_GATED.get(gated, '')}"
    if "expandable_segments:true" in setting.replace(" ", "").lower() and gated == "inactive_split":
        line += (". Under expandable_segments inactive_split reads 0% whatever the workload (no split segments), "
                 "so its gate says nothing about that setting: compare reserved")
    return line

