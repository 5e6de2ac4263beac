"""``[params.memory]`` of thresholds.toml as a typed workload: the allocation pattern, the
allocator settings of the sweep, repeats and children side by side (errors name the key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .sweep import CUDA_SETTINGS, Setting, SweepResult
from .workload import Pattern

WHERE = "thresholds.toml [params.memory]"


@dataclass(frozen=True)
class MemoryParams:
    """The memory suite's workload on the CUDA device."""

    pattern: Pattern = field(default_factory=Pattern)
    settings: tuple[Setting, ...] = CUDA_SETTINGS  # the first is the reference ("default")
    repeats: int = 4  # children per setting (the exact ratio bound needs >= 4, 6 for a constant default)
    parallel: int = 1  # children side by side (each has its own budget)
    cuda_fraction: float | None = None  # each child's share of the device: out-of-memory comes early

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> MemoryParams:
        try:
            pattern = Pattern.from_dict(dict(raw.get("pattern", {})))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{WHERE} pattern: {e}") from None
        table = raw.get("settings")
        if table is not None and not isinstance(table, Mapping):
            raise ValueError(f"{WHERE} settings: a table of NAME = \"PYTORCH_CUDA_ALLOC_CONF value\", got {table!r}")
        settings = (tuple(Setting(str(k), {"PYTORCH_CUDA_ALLOC_CONF": str(v)} if v else {}) for k, v in table.items())
                    if table else CUDA_SETTINGS)
        ints = {}
        for key, default in (("repeats", 4), ("parallel", 1)):
            v = raw.get(key, default)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{WHERE} {key}: must be a positive integer, got {v!r}")
            ints[key] = v
        frac = raw.get("cuda_fraction")
        if frac is not None and (isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1):
            raise ValueError(f"{WHERE} cuda_fraction: a fraction of the device in (0, 1], got {frac!r}")
        return cls(pattern, settings, ints["repeats"], ints["parallel"], None if frac is None else float(frac))

    def spec(self) -> dict[str, Any]:
        """The child's spec (:mod:`.child`): the pattern on CUDA, peak snapshots."""
        return {"backend": "cuda", "pattern": self.pattern.to_dict(), "cuda_fraction": self.cuda_fraction,
                "snapshot": "peaks"}

    def sweep(self, progress: Any = None) -> SweepResult:
        """Every setting, ``repeats`` children each, interleaved (:func:`.sweep.sweep`)."""
        from .sweep import sweep

        return sweep(self.spec(), self.settings, repeats=self.repeats, progress=progress, parallel=self.parallel)

    def setting(self, name: str) -> Setting:
        """The setting called ``name`` (KeyError naming the known ones)."""
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(f"{WHERE}: no setting {name!r} (settings: {', '.join(s.name for s in self.settings)})")


@dataclass(frozen=True)
class EngineBatchParams:
    """``[params.memory_batch]``: the engine-level max-safe-batch search (engine_batch.py) on the
    engine's KV cache shrunk to ``kv_blocks`` blocks, probes of ``prompt_tokens``-token requests."""

    kv_blocks: int
    max_model_len: int
    prompt_tokens: int
    max_tokens: int
    rounds: int = 2
    cap: int = 32
    max_seconds: float = 300
