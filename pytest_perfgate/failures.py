"""The exceptions and warnings a gate raises (light: imported at plugin start)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .verdict import Verdict


class GateFailure(AssertionError):
    """Raised by a failing check; ``.verdict`` carries the numbers."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.message())


class GateInconclusive(GateFailure):
    """Raised for an inconclusive verdict when ``--perfgate-inconclusive=fail``."""


class PerfgateWarning(UserWarning):
    """An inconclusive verdict under ``--perfgate-inconclusive=warn``."""
