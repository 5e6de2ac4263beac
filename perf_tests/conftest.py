"""Shared fixtures of the roadmap's gate suite. Phase 1 keeps its runs with the framework
(``perfgate_engines.run(..., keep_as=NAME)``, ``perfgate.runs[NAME]``); phase 2 keeps its vision
set-up here (``phase2``, ``vision``: used by its gate and fallback tests).
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def runs() -> dict[str, Any]:
    """Phase 2's objects by name (its vision set-up), built once per session."""
    return {}


def _params(th: Any) -> dict[str, Any]:
    from pytest_perfgate.vision import suite

    return suite.params(th.params.get("phase2", {}), suite.device())


@pytest.fixture
def phase2(perfgate_thresholds: Any) -> dict[str, Any]:
    return _params(perfgate_thresholds)


@pytest.fixture
def vision(phase2: dict[str, Any], runs: dict[str, Any]) -> Any:
    return _vision(phase2, runs)


def _vision(phase2: dict[str, Any], runs: dict[str, Any]) -> Any:
    """Encoder, images and reference embeddings, built once per session (kept in ``runs``)."""
    if "phase2_vision" not in runs:
        from pytest_perfgate.vision import suite

        s = suite.setup(phase2)
        suite.reference_result(s, phase2["timing_batches"])
        runs["phase2_vision"] = s
    return runs["phase2_vision"]
