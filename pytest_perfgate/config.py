"""Load and validate ``thresholds.toml`` into frozen dataclasses.

Validation is strict: every problem raises :class:`ConfigError` naming the file, the table and the
key, e.g. ``thresholds.toml: [gates.ttft] max = "150 parsecs": unknown unit 'parsecs'``.
No pytest, no numpy: this runs at pytest start-up.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import metrics as metric_names
from .units import Quantity, UnitError, parse_quantity


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


_STAT = re.compile(r"^p(\d{1,2}(?:\.\d+)?)$")
STATISTICS_HELP = "p50, p90, p99, p99.9 (any pNN), median, mean, value, rate"


@dataclass(frozen=True)
class Statistic:
    """``quantile`` (with ``q``), ``mean`` or ``value`` (a single measurement / a rate)."""

    kind: str
    q: float | None = None
    text: str = ""

    @staticmethod
    def parse(text: str) -> Statistic:
        t = text.strip().lower()
        if t == "median":
            return Statistic("quantile", 0.5, "p50")
        if t in ("mean", "avg", "average"):
            return Statistic("mean", None, "mean")
        if t in ("value", "rate", "ratio"):
            return Statistic("value", None, t)
        m = _STAT.match(t)
        if m:
            q = float(m.group(1)) / 100.0
            if 0.0 < q < 1.0:
                return Statistic("quantile", q, t)
        raise ValueError(f"unknown statistic {text!r} (use {STATISTICS_HELP})")


COMPARE_KINDS = ("ratio", "difference", "reduction")
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
    single: bool = False  # a "value" gate that accepts one measured number (no interval; the verdict says so)

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
    hardware: Mapping[str, Any] = field(default_factory=dict)  # [hardware], validated by floors/config.py
    models: Mapping[str, Any] = field(default_factory=dict)  # [models.NAME], validated by floors/config.py

    def gate(self, name: str) -> Gate:
        try:
            return self.gates[name]
        except KeyError:
            raise KeyError(f"unknown gate {name!r}; gates in {self.path.name}: {', '.join(self.gates) or '(none)'}") from None

    def gates_of(self, phase: str) -> list[Gate]:
        return [g for g in self.gates.values() if g.phase == phase]


_TOP_KEYS = {"perfgate", "phases", "fallbacks", "gates", "engines", "params", "hardware", "models"}
_SETTINGS_KEYS = {"confidence", "inconclusive", "max_samples", "max_seconds", "max_error_rate"}
_PHASE_KEYS = {"title", "depends_on", "description"}
_FALLBACK_KEYS = {"title", "cost", "doc", "description"}
_GATE_KEYS = {
    "phase", "metric", "statistic", "max", "min", "baseline", "fallback", "compare", "runs",
    "confidence", "description", "title", "unit", "bands", "max_samples", "max_seconds", "engine",
    "params", "record_only", "max_error_rate", "regression", "single",
}  # fmt: skip


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def err(self, table: str, key: str | None, msg: str) -> ConfigError:
        return ConfigError(self.path, table, key, msg)

    def table(self, doc: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
        v = doc.get(key, {})
        if not isinstance(v, dict):
            raise self.err(where, key, f"must be a table, got {type(v).__name__}")
        return v

    def keys(self, t: Mapping[str, Any], allowed: set[str], table: str) -> None:
        for k in t:
            if k not in allowed:
                import difflib

                close = difflib.get_close_matches(k, sorted(allowed), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.err(table, k, f"unknown key ({hint}allowed: {', '.join(sorted(allowed))})")

    def string(self, t: Mapping[str, Any], key: str, table: str, default: str = "") -> str:
        v = t.get(key, default)
        if not isinstance(v, str):
            raise self.err(table, key, f"must be a string, got {v!r}")
        return v

    def names(self, t: Mapping[str, Any], key: str, table: str) -> tuple[str, ...]:
        v = t.get(key, [])
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.err(table, key, f"must be a name or a list of names, got {v!r}")
        return tuple(v)

    def confidence(self, v: Any, table: str, key: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.5 <= float(v) < 1.0:
            raise self.err(table, key, f"must be a number in [0.5, 1), got {v!r}")
        return float(v)

    def positive(self, v: Any, table: str, key: str, kind: type = int) -> Any:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
        if kind is int:
            ok = ok and isinstance(v, int)
        if not ok:
            raise self.err(table, key, f"must be a positive {'integer' if kind is int else 'number'}, got {v!r}")
        return kind(v)

    def fraction(self, v: Any, table: str, key: str) -> float:
        """A share written as "5%" or 0.05."""
        q = self.quantity(v, table, key)
        if q.dimension not in ("fraction", "number") or not 0.0 <= q.base <= 1.0:
            raise self.err(table, f"{key} = {v!r}", "must be a share between 0% and 100% (e.g. \"1%\" or 0.01)")
        return q.base

    def quantity(self, v: Any, table: str, key: str) -> Quantity:
        try:
            return parse_quantity(v)
        except UnitError as e:
            raise self.err(table, f"{key} = {v!r}", str(e)) from None


def load_thresholds(path: str | Path, *, confidence: float | None = None) -> Thresholds:
    """Read and validate a thresholds file. Raises :class:`ConfigError` on any problem."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(p, "", None, f"cannot read thresholds file: {e.strerror or e}") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(p, "", None, f"not UTF-8 text: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(p, "", None, f"TOML syntax error: {e}") from None
    return parse_thresholds(doc, p, hashlib.sha256(raw).hexdigest(), confidence=confidence)


def parse_thresholds(
    doc: Mapping[str, Any], path: Path, sha256: str = "", *, confidence: float | None = None
) -> Thresholds:
    c = _Checker(path)
    c.keys(doc, _TOP_KEYS, "")
    st = c.table(doc, "perfgate", "")
    c.keys(st, _SETTINGS_KEYS, "perfgate")
    settings = Settings(
        confidence=c.confidence(st.get("confidence", 0.95), "perfgate", "confidence"),
        inconclusive=st.get("inconclusive", "fail"),
        max_samples=c.positive(st.get("max_samples", 10_000), "perfgate", "max_samples"),
        max_seconds=c.positive(st.get("max_seconds", 600.0), "perfgate", "max_seconds", float),
        max_error_rate=c.fraction(st.get("max_error_rate", 0), "perfgate", "max_error_rate"),
    )
    if settings.inconclusive not in ("fail", "warn"):
        raise c.err("perfgate", "inconclusive", f"must be \"fail\" or \"warn\", got {settings.inconclusive!r}")
    if confidence is not None:
        settings = Settings(
            c.confidence(confidence, "perfgate", "confidence (--perfgate-confidence)"),
            settings.inconclusive,
            settings.max_samples,
            settings.max_seconds,
            settings.max_error_rate,
        )

    phases: dict[str, Phase] = {}
    for name, t in c.table(doc, "phases", "").items():
        tname = f"phases.{name}"
        if not isinstance(t, dict):
            raise c.err("phases", name, "must be a table")
        c.keys(t, _PHASE_KEYS, tname)
        phases[name] = Phase(name, c.string(t, "title", tname), c.names(t, "depends_on", tname))
    for ph in phases.values():
        for d in ph.depends_on:
            if d not in phases:
                raise c.err(f"phases.{ph.name}", "depends_on", f"unknown phase {d!r} (phases: {', '.join(phases)})")
    _check_cycles(c, phases)

    fallbacks: dict[str, Fallback] = {}
    for name, t in c.table(doc, "fallbacks", "").items():
        tname = f"fallbacks.{name}"
        if not isinstance(t, dict):
            raise c.err("fallbacks", name, "must be a table")
        c.keys(t, _FALLBACK_KEYS, tname)
        fallbacks[name] = Fallback(name, c.string(t, "title", tname), c.string(t, "cost", tname), c.string(t, "doc", tname))

    engines = _parse_engines(c, c.table(doc, "engines", ""))

    gates: dict[str, Gate] = {}
    for name, t in c.table(doc, "gates", "").items():
        if not isinstance(t, dict):
            raise c.err("gates", name, "must be a table")
        gates[name] = _parse_gate(c, name, t, phases, fallbacks, engines, settings)

    params = c.table(doc, "params", "")
    hardware, models = c.table(doc, "hardware", ""), c.table(doc, "models", "")
    _check_floors(c, hardware, models)
    return Thresholds(path, sha256, settings, phases, fallbacks, gates, engines, params, hardware, models)


def _check_floors(c: _Checker, hardware: Mapping[str, Any], models: Mapping[str, Any]) -> None:
    """[hardware] and [models.NAME] (physical floors): errors name the table and key."""
    if not hardware and not models:
        return
    from .floors.config import FloorsConfigError, parse

    try:
        parse(hardware, models)
    except FloorsConfigError as e:
        raise c.err(e.table, e.key, e.message) from None


def _check_cycles(c: _Checker, phases: Mapping[str, Phase]) -> None:
    state: dict[str, int] = {}

    def visit(n: str, trail: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cycle = " -> ".join([*trail[trail.index(n) :], n])
            raise c.err(f"phases.{n}", "depends_on", f"dependency cycle: {cycle}")
        state[n] = 1
        for d in phases[n].depends_on:
            visit(d, [*trail, n])
        state[n] = 2

    for n in phases:
        visit(n, [])


def _parse_engines(c: _Checker, t: Mapping[str, Any]) -> dict[str, EngineSpec]:
    raw: dict[str, dict[str, Any]] = {}
    for name, e in t.items():
        if not isinstance(e, dict):
            raise c.err("engines", name, "must be a table")
        raw[name] = e
    out: dict[str, EngineSpec] = {}

    def resolve(name: str, trail: tuple[str, ...]) -> EngineSpec:
        if name in out:
            return out[name]
        e = dict(raw[name])
        tname = f"engines.{name}"
        parent = e.pop("extends", None)
        base_kind: str | None = None
        args: dict[str, Any] = {}
        if parent is not None:
            if not isinstance(parent, str) or parent not in raw:
                raise c.err(tname, "extends", f"unknown engine {parent!r} (engines: {', '.join(raw)})")
            if parent in trail:
                raise c.err(tname, "extends", f"cycle: {' -> '.join([*trail, name, parent])}")
            p = resolve(parent, (*trail, name))
            base_kind, args = p.kind, dict(p.args)
        kind = e.pop("kind", base_kind)
        if not isinstance(kind, str):
            raise c.err(tname, "kind", "missing: say which engine kind (vllm, openai, vllm-server)")
        args.update(e)
        spec = EngineSpec(name, kind, args, parent)
        out[name] = spec
        return spec

    for name in raw:
        resolve(name, ())
    return out


_COMPARE_DIMS = {"ratio": ("number", "fraction"), "reduction": ("number", "fraction")}


def _parse_gate(
    c: _Checker,
    name: str,
    t: Mapping[str, Any],
    phases: Mapping[str, Phase],
    fallbacks: Mapping[str, Fallback],
    engines: Mapping[str, EngineSpec],
    settings: Settings | None = None,
) -> Gate:
    tn = f"gates.{name}"
    c.keys(t, _GATE_KEYS, tn)
    phase = c.string(t, "phase", tn)
    if not phase:
        raise c.err(tn, "phase", "missing: every gate belongs to a phase")
    if phase not in phases:
        raise c.err(tn, "phase", f"unknown phase {phase!r} (phases: {', '.join(phases) or '(none defined)'})")
    mname = c.string(t, "metric", tn)
    if not mname:
        raise c.err(tn, "metric", "missing")
    metric = metric_names.lookup(mname)
    if metric is None:
        raise c.err(tn, "metric", f"unknown metric {mname!r} (known: {', '.join(metric_names.known_names())})")
    stext = c.string(t, "statistic", tn, "rate" if metric.dimension == "fraction" else "")
    if not stext:
        raise c.err(tn, "statistic", f"missing (use {STATISTICS_HELP})")
    try:
        statistic = Statistic.parse(stext)
    except ValueError as e:
        raise c.err(tn, "statistic", str(e)) from None
    compare = t.get("compare")
    if compare is not None and compare not in COMPARE_KINDS:
        raise c.err(tn, "compare", f"must be one of {', '.join(COMPARE_KINDS)}, got {compare!r}")
    runs = c.names(t, "runs", tn)
    if compare and runs and len(runs) != 2:
        raise c.err(tn, "runs", f"a {compare} gate compares exactly two runs (treatment, reference), got {list(runs)}")
    record_only = t.get("record_only", False)
    if not isinstance(record_only, bool):
        raise c.err(tn, "record_only", f"must be true or false, got {record_only!r}")
    has_max, has_min = "max" in t, "min" in t
    if has_max and has_min:
        raise c.err(tn, "max", "both min and max given: a gate has one direction")
    if not has_max and not has_min and not record_only:
        raise c.err(tn, "max", "neither min nor max given (set record_only = true for a reported-only metric)")
    if record_only and (has_max or has_min):
        raise c.err(tn, "record_only", "a record_only gate has no min or max")
    direction = "max" if has_max else "min" if has_min else None
    want_dims = _COMPARE_DIMS.get(compare or "", (metric.dimension,))
    if metric.dimension == "fraction" and compare is None:
        want_dims = ("fraction", "number")  # 0.7 or "70%"
    threshold = None
    if direction is not None:
        threshold = c.quantity(t[direction], tn, direction)
        _check_dim(c, tn, direction, t[direction], threshold, want_dims, metric.name, compare)
    baseline = None
    if "baseline" in t:
        baseline = c.quantity(t["baseline"], tn, "baseline")
        _check_dim(c, tn, "baseline", t["baseline"], baseline, want_dims, metric.name, compare)
    fb = c.names(t, "fallback", tn)
    for f in fb:
        if f not in fallbacks:
            raise c.err(tn, "fallback", f"unknown fallback {f!r} (fallbacks: {', '.join(fallbacks) or '(none defined)'})")
    conf = t.get("confidence")
    if conf is not None:
        conf = c.confidence(conf, tn, "confidence")
    unit_name = t.get("unit")
    if unit_name is not None:
        q = c.quantity(f"1 {unit_name}", tn, "unit")
        _check_dim(c, tn, "unit", unit_name, q, want_dims, metric.name, compare)
    bands: list[tuple[str, Quantity]] = []
    braw = t.get("bands", {})
    if not isinstance(braw, dict):
        raise c.err(tn, "bands", "must be a table of label = lower edge, e.g. { \"large gain\" = \"80%\" }")
    for label, edge in braw.items():
        q = c.quantity(edge, tn, f"bands.{label}")
        _check_dim(c, tn, f"bands.{label}", edge, q, want_dims, metric.name, compare)
        bands.append((label, q))
    bands.sort(key=lambda b: -b[1].base)
    eng = t.get("engine")
    if eng is not None and (not isinstance(eng, str) or (eng not in engines and eng not in BUILTIN_ENGINES)):
        known = ", ".join([*engines, *(b for b in BUILTIN_ENGINES if b not in engines)])
        raise c.err(tn, "engine", f"unknown engine {eng!r} (engines: {known})")
    params = t.get("params", {})
    if not isinstance(params, dict):
        raise c.err(tn, "params", "must be a table")
    single = t.get("single", False)
    if not isinstance(single, bool):
        raise c.err(tn, "single", f"must be true or false, got {single!r}")
    if single and statistic.kind != "value":
        raise c.err(tn, "single", f"only a statistic = \"value\" gate takes one measured number, not {statistic.text!r}")
    if direction is not None and compare is None:
        _check_reachable(c, tn, name, statistic, direction, conf, t, settings or Settings())
    return Gate(
        name=name,
        phase=phase,
        metric=metric.name,
        statistic=statistic,
        direction=direction,
        threshold=threshold,
        baseline=baseline,
        fallbacks=fb,
        compare=compare,
        runs=runs,
        confidence=conf,
        description=c.string(t, "description", tn) or c.string(t, "title", tn),
        unit=unit_name,
        bands=tuple(bands),
        max_samples=c.positive(t["max_samples"], tn, "max_samples") if "max_samples" in t else None,
        max_seconds=c.positive(t["max_seconds"], tn, "max_seconds", float) if "max_seconds" in t else None,
        engine=eng,
        params=params,
        max_error_rate=c.fraction(t["max_error_rate"], tn, "max_error_rate") if "max_error_rate" in t else None,
        regression=c.fraction(t["regression"], tn, "regression") if "regression" in t else None,
        single=single,
    )


def _check_reachable(
    c: _Checker, tn: str, name: str, st: Statistic, direction: str, conf: float | None,
    t: Mapping[str, Any], settings: Settings,
) -> None:
    """A sequential gate whose budget can never give a pass is a usage error, named here."""
    from .looks import pass_plan, unreachable_message

    if st.kind != "quantile":
        return
    budget = t.get("max_samples", settings.max_samples)
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        return  # reported by the max_samples check
    level = conf if conf is not None else settings.confidence
    if pass_plan(st.kind, st.q, direction, level, budget) is None:
        key = "max_samples" if "max_samples" in t else None
        raise c.err(tn, key, unreachable_message(name, st.kind, st.q, direction, level, budget))


def _check_dim(
    c: _Checker, table: str, key: str, raw: Any, q: Quantity, want: tuple[str, ...], metric: str, compare: str | None
) -> None:
    if q.dimension in want:
        return
    # a plain number for a time/rate metric is ambiguous: demand a unit
    what = f"a {compare} of {metric}" if compare else metric
    got = f"{q.unit.name!r} ({q.dimension})" if q.unit.name else "a plain number"
    need = " or ".join(want)
    raise c.err(table, f"{key} = {raw!r}", f"unit mismatch: {what} is {need}, got {got}")
