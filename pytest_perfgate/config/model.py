"""The frozen dataclasses a thresholds file becomes, and the names they accept."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .statistics import Statistic, compare_kinds, statistics_help
from .units import Quantity


class ConfigError(ValueError):
    """A problem in thresholds.toml; ``str()`` names file, table and key."""

    def __init__(self, path: str | Path, table: str, key: str | None, message: str) -> None:
        self.path, self.table, self.key = str(path), table, key
        where = f"[{table}]" if table else ""
        if key is not None:
            where = f"{where} {key}" if where else key
        super().__init__(f"{Path(path).name}: {where}: {message}" if where else f"{Path(path).name}: {message}")


@dataclass(frozen=True)
class Settings:
    confidence: float = 0.95
    inconclusive: str = "fail"  # "fail" | "warn"
    max_samples: int = 10_000
    max_seconds: float = 600.0
    max_error_rate: float = 0.0  # failed requests a run may have before its gates error out
    validity: bool = True  # a run whose client did not keep up makes its timing gates invalid (load/validity.py)
    workers: int | str = 1  # client worker processes of a load run: N or "auto" (load/workers.py)
    history: str | None = None  # the run history: a postgresql:// URL or a SQLite file (store/backend.py)


@dataclass(frozen=True)
class Phase:
    name: str
    title: str = ""
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fallback:
    name: str
    title: str = ""
    cost: str = ""
    doc: str = ""


STATISTICS_HELP = statistics_help()  # the built-in kinds; a registered Method adds its own


COMPARE_KINDS = compare_kinds()  # the built-in kinds (config/statistics.py is the registry)
# engines that exist without an [engines.NAME] table: the embedded CPU default (engines/manager.py)
BUILTIN_ENGINES = ("baseline", "speculative")


@dataclass(frozen=True)
class Gate:
    name: str
    phase: str
    metric: str  # canonical name
    statistic: Statistic
    direction: str | None  # "max" | "min" | None (recorded only)
    threshold: Quantity | None
    baseline: Quantity | None = None
    fallbacks: tuple[str, ...] = ()
    compare: str | None = None  # "ratio" | "difference" | "reduction" of two runs
    runs: tuple[str, ...] = ()  # labels of the two runs compared (treatment, reference)
    confidence: float | None = None
    description: str = ""
    unit: str | None = None  # display unit
    bands: tuple[tuple[str, Quantity], ...] = ()  # (label, lower edge) for reporting
    max_samples: int | None = None
    max_seconds: float | None = None
    engine: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    max_error_rate: float | None = None
    regression: float | None = None  # tolerated relative change vs --perfgate-baseline before the gate fails
    regression_vs: str | None = None  # regression = { vs = "main", ... }: the branch whose recent runs are the baseline
    single: bool = False  # a "value" gate that accepts one measured number (no interval; the verdict says so)
    # per-request SLO terms (metric, quantile or None, limit in seconds): a capacity gate's
    # "P99 TTFT <= a" terms (statistic = "sustained"), or a goodput gate's per-request limits
    slo: tuple[tuple[str, float | None, float], ...] = ()

    @property
    def recorded_only(self) -> bool:
        return self.direction is None


@dataclass(frozen=True)
class EngineSpec:
    name: str
    kind: str
    args: Mapping[str, Any]
    extends: str | None = None


@dataclass(frozen=True)
class Thresholds:
    path: Path
    sha256: str
    settings: Settings
    phases: Mapping[str, Phase]
    fallbacks: Mapping[str, Fallback]
    gates: Mapping[str, Gate]
    engines: Mapping[str, EngineSpec] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    hardware: Mapping[str, Any] = field(default_factory=dict)  # [hardware], validated by roofline/config.py
    models: Mapping[str, Any] = field(default_factory=dict)  # [models.NAME], validated by roofline/config.py

    def gate(self, name: str) -> Gate:
        try:
            return self.gates[name]
        except KeyError:
            raise KeyError(f"unknown gate {name!r}; gates in {self.path.name}: {', '.join(self.gates) or '(none)'}") from None

    def gates_of(self, phase: str) -> list[Gate]:
        return [g for g in self.gates.values() if g.phase == phase]
