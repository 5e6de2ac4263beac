"""A suite's workload parameters (``[params.PHASE]``) as a typed dataclass the suite declares.

``workload(Phase1, thresholds, "phase1", embedded=True)`` reads ``[params.phase1]``, applies its
``embedded`` sub-table when the suite runs on the embedded CPU engine (same gates, smaller budgets)
and builds ``Phase1`` from the keys it declares (fields with defaults may be left out). No pytest.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from . import ConfigError, Thresholds

T = TypeVar("T")


def workload(cls: type[T], thresholds: Thresholds, phase: str, *, embedded: bool = False) -> T:
    """``cls`` (a dataclass) from ``[params.PHASE]`` (and its ``embedded`` overrides)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"workload: {cls.__name__} is not a dataclass")
    raw: dict[str, Any] = dict(thresholds.params.get(phase, {}))
    overrides = raw.pop("embedded", {})
    if embedded:
        raw.update(overrides)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    missing = [n for n, f in fields.items() if n not in raw and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(thresholds.path, f"params.{phase}", None,
                          f"missing {', '.join(missing)} (needed by {cls.__name__})")
    values = {n: tuple(v) if isinstance(v, list) else v for n, v in raw.items() if n in fields}
    return cls(**values)
