"""The feature packages' own Methods (:mod:`pytest_perfgate.verdicts.methods`), registered before
any gate is evaluated: by the ``perfgate`` fixture and by the ``perfgate`` command (whose
``evaluate`` re-evaluates stored data). A gate names such a Method in ``params.estimator``; a
thresholds file loads without them (plain Python needs none of this until it evaluates one of those
gates: ``import pytest_perfgate.memory.method`` first, or call :func:`register_features`)."""

from __future__ import annotations


def register_features() -> None:
    """Import every feature Method module (each registers its Methods once, at import)."""
    from ..memory import method  # noqa: F401  memory's max-safe-batch ratio (hodges_lehmann)
