"""The memory gates' views of their data (no verdict is built here: every one goes through
``Perfgate.check`` / ``Perfgate.best_of``).

The fragmentation gate needs nothing special: a :class:`MemoryReport` implements
``perfgate_data("fragmentation")`` under the definition the gate's ``params.definition`` names. The
max-safe-batch ratio is the ``hodges_lehmann`` estimator (:mod:`.method`) on the pair of a setting's
batches and the default's (:func:`.method.candidates`).
"""

from __future__ import annotations

from dataclasses import replace

from ..config import Gate
from .stats import DEFAULT_DEFINITION, MemoryReport, check_definition


def gate_definition(gate: Gate) -> str:
    """The fragmentation definition a gate names in ``params = { definition = "..." }``."""
    d = gate.params.get("definition", DEFAULT_DEFINITION)
    return check_definition(str(d), f"[gates.{gate.name}] params.definition")


def for_gate(report: MemoryReport, gate: Gate) -> MemoryReport:
    """The report seen through the gate's fragmentation definition."""
    return replace(report, definition=gate_definition(gate))
