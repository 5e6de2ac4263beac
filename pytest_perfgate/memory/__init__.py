"""Memory gates: a probe around any workload (fragmentation under three definitions, peaks, alloc
retries, OOMs), an allocator-setting sweep in child processes, max-safe-batch search. The KV-cache
pressure of engine runs is a load metric (load/kv.py). Formulas in docs/metrics.md; torch and numpy
are imported lazily.

The public face (``from pytest_perfgate import memory``; names load lazily): :class:`MemoryParams`
(``[params.memory]``), :func:`cuda_unavailable`, :class:`Pattern`, :func:`churn`,
:func:`torch_alloc`, :func:`run_child`, :class:`SweepResult`, :class:`Setting`,
:class:`MemoryReport`, :func:`definitions_note`, :func:`gate_definition`, :class:`MemoryGates` (the
``perfgate_memory`` fixture's type); the engine's max safe concurrency: :func:`search`
(engine_batch.py) with :class:`EngineBatchParams` (``[params.memory_batch]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..runtime.lazy import lazy_face

__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "params": ("MemoryParams", "EngineBatchParams"),
    "engine_batch": ("search",),
    "probe": ("cuda_unavailable",),
    "workload": ("Pattern", "churn", "torch_alloc"),
    "sweep": ("run_child", "SweepResult", "Setting"),
    "stats": ("MemoryReport", "definitions_note"),
    "gates": ("gate_definition",),
    "fixture": ("MemoryGates",),
})

if TYPE_CHECKING:  # pragma: no cover
    from .engine_batch import search as search
    from .fixture import MemoryGates as MemoryGates
    from .gates import gate_definition as gate_definition
    from .params import EngineBatchParams as EngineBatchParams
    from .params import MemoryParams as MemoryParams
    from .probe import cuda_unavailable as cuda_unavailable
    from .stats import MemoryReport as MemoryReport
    from .stats import definitions_note as definitions_note
    from .sweep import Setting as Setting
    from .sweep import SweepResult as SweepResult
    from .sweep import run_child as run_child
    from .workload import Pattern as Pattern
    from .workload import churn as churn
    from .workload import torch_alloc as torch_alloc
