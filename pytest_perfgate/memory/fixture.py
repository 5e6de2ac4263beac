"""What the ``perfgate_memory`` fixture hands a test (no pytest here: the plugin passes ``skip``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from ..verdicts.verdict import Verdict
from .gates import batch_ratio_verdict, for_gate
from .probe import MemoryProbe, MemorySource, ProbeUnavailable
from .stats import MemoryReport
from .sweep import SweepResult


class MemoryGates:
    """``probe(**kw)``: a :class:`MemoryProbe` on the CUDA device (the test is skipped, with the
    reason, where there is none); ``check(perfgate, data, gate)``: evaluate and record a memory gate
    on a :class:`MemoryReport` (fragmentation under the gate's ``params.definition``) or a
    :class:`SweepResult` (max-safe-batch ratio of the best setting over the default)."""

    def __init__(self, skip: Callable[[str], NoReturn]) -> None:
        self._skip = skip

    def probe(self, source: MemorySource | None = None, **kw: Any) -> MemoryProbe:
        try:
            return MemoryProbe(source, **kw)
        except ProbeUnavailable as e:
            self._skip(str(e))

    def check(self, perfgate: Any, data: MemoryReport | SweepResult, gate: str | None = None,
              reference: str = "default") -> Verdict:
        g = perfgate.gate(gate)
        if isinstance(data, MemoryReport):
            v: Verdict = perfgate.check(for_gate(data, g), g.name)
            return v
        v = batch_ratio_verdict(g, data, thresholds=perfgate.thresholds, confidence=perfgate.confidence,
                                reference=reference)
        perfgate.record(v)
        perfgate.raise_for(v)
        return v
