"""Load and validate ``thresholds.toml`` into frozen dataclasses.

Validation is strict: every problem raises :class:`ConfigError` naming the file, the table and the
key, e.g. ``thresholds.toml: [gates.ttft] max = "150 parsecs": unknown unit 'parsecs'``.
No pytest, no numpy: this runs at pytest start-up.

- :mod:`.model`: the dataclasses (``Thresholds``, ``Gate``, ...) and ``ConfigError``;
- :mod:`.statistics`: the registry of statistic and comparison kinds (``Statistic``);
- :mod:`.checker`: typed reads of TOML values that name the table and key of a bad one;
- :mod:`.gate`: one ``[gates.NAME]`` table;
- :mod:`.load`: the file and its other tables.
"""

from __future__ import annotations

from .load import load_thresholds, parse_thresholds
from .model import (
    BUILTIN_ENGINES,
    COMPARE_KINDS,
    STATISTICS_HELP,
    ConfigError,
    EngineSpec,
    Fallback,
    Gate,
    Phase,
    Settings,
    Thresholds,
)
from .statistics import Statistic, StatisticKind, register_kind

__all__ = [
    "BUILTIN_ENGINES",
    "COMPARE_KINDS",
    "STATISTICS_HELP",
    "ConfigError",
    "EngineSpec",
    "Fallback",
    "Gate",
    "Phase",
    "Settings",
    "Statistic",
    "StatisticKind",
    "Thresholds",
    "load_thresholds",
    "parse_thresholds",
    "register_kind",
]
