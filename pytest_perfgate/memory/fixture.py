"""What the ``perfgate_memory`` fixture hands a test (no pytest here: the plugin passes ``skip``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ..config import Gate
from .gates import for_gate
from .probe import MemoryProbe, MemorySource, ProbeUnavailable
from .stats import MemoryReport
from .sweep import SweepResult

if TYPE_CHECKING:
    from ..verdicts.verdict import Verdict


class Checks(Protocol):
    """What the memory gates need of the ``perfgate`` fixture (``session.perfgate.Perfgate``)."""

    def gate(self, name: str | None = None) -> Gate: ...

    def check(self, data: Any = None, gate: str | None = None, *, note: str = "", label: str = "") -> Verdict: ...

    def best_of(self, candidates: Mapping[str, Any], gate: str | None = None, *, note: str = "",
                check: bool = True) -> tuple[str, Verdict]: ...


class MemoryGates:
    """``probe(**kw)``: a :class:`MemoryProbe` on the CUDA device (the test is skipped, with the
    reason, where there is none); ``check(perfgate, data, gate)``: evaluate, store and record a
    memory gate through ``perfgate`` on a :class:`MemoryReport` (fragmentation under the gate's
    ``params.definition``) or a :class:`SweepResult` (max-safe-batch ratio of the best setting over
    ``reference``, Bonferroni over the candidate settings)."""

    def __init__(self, skip: Callable[[str], NoReturn]) -> None:
        self._skip = skip

    def probe(self, source: MemorySource | None = None, **kw: Any) -> MemoryProbe:
        try:
            return MemoryProbe(source, **kw)
        except ProbeUnavailable as e:
            self._skip(str(e))

    def check(self, perfgate: Checks, data: MemoryReport | SweepResult, gate: str | None = None,
              reference: str = "default") -> Verdict:
        g = perfgate.gate(gate)
        if isinstance(data, MemoryReport):
            return perfgate.check(for_gate(data, g), g.name)
        from .method import candidates

        described = {s.name: s.describe() for s in data.settings}
        _, v = perfgate.best_of(candidates(data, reference), g.name,
                                note=f"settings: {'; '.join(f'{k} = {d}' for k, d in described.items())}")
        return v
