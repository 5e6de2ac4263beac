"""Shared fixtures of the roadmap's gate suite: workload parameters and the runs of each mode.

Runs are kept per session so that later gates (comparisons, fallbacks) reuse what earlier tests
measured instead of measuring again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest


class Workload(dict[str, Any]):
    """``[params.PHASE]`` of thresholds.toml; the ``embedded`` sub-table overrides budgets when
    the suite runs on the embedded CPU engine (same gates, smaller budgets)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"thresholds.toml [params] has no {key!r}") from None


def workload(thresholds: Any, phase: str, embedded: bool) -> Workload:
    raw: Mapping[str, Any] = thresholds.params.get(phase, {})
    out = Workload({k: v for k, v in raw.items() if k != "embedded"})
    if embedded:
        out.update(raw.get("embedded", {}))
    return out


@pytest.fixture(scope="session")
def phase1(perfgate_thresholds: Any, perfgate_engines: Any) -> Workload:
    return workload(perfgate_thresholds, "phase1", perfgate_engines.is_embedded("speculative"))


@pytest.fixture(scope="session")
def runs() -> dict[str, Any]:
    """RunResults by name ("baseline", "speculative", ...), filled as the suite goes."""
    return {}
