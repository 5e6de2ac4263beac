"""Shared fixtures of the roadmap's gate suite. Phase 1 keeps its runs with the framework
(``perfgate_engines.run(..., keep_as=NAME)``, ``perfgate.runs[NAME]``); phase 2 keeps its vision
set-up here.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def runs() -> dict[str, Any]:
    """Phase 2's objects by name (its vision set-up), built once per session."""
    return {}
