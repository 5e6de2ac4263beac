"""Read a thresholds file and check its tables: settings, phases, fallbacks, engines, gates, floors."""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checker import Checker
from .gate import parse_gate
from .model import ConfigError, EngineSpec, Fallback, Gate, Phase, Settings, Thresholds

_TOP_KEYS = {"perfgate", "phases", "fallbacks", "gates", "engines", "params", "hardware", "models"}
_SETTINGS_KEYS = {"confidence", "inconclusive", "max_samples", "max_seconds", "max_error_rate", "validity", "workers",
                  "history"}
_PHASE_KEYS = {"title", "depends_on", "description"}
_FALLBACK_KEYS = {"title", "cost", "doc", "description"}
MAX_DEPTH = 32  # arrays / tables nested deeper than this are refused (a real roadmap nests 3 or 4)
_TOO_DEEP = (f"nested too deeply: arrays or tables nested beyond {MAX_DEPTH} levels are refused "
             "(a thresholds file nests 3 or 4)")


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
    except RecursionError:  # tomllib recurses once per nesting level (~330 levels exhaust the stack)
        raise ConfigError(p, "", None, _TOO_DEEP) from None
    return parse_thresholds(doc, p, hashlib.sha256(raw).hexdigest(), confidence=confidence)


def parse_thresholds(
    doc: Mapping[str, Any], path: Path, sha256: str = "", *, confidence: float | None = None
) -> Thresholds:
    """Validate a parsed thresholds document; any problem (nesting included) is a :class:`ConfigError`."""
    where = _too_deep(doc)
    if where is not None:
        raise ConfigError(path, where[0], where[1], _TOO_DEEP)
    try:
        return _parse(doc, path, sha256, confidence)
    except RecursionError:
        raise ConfigError(path, "", None, _TOO_DEEP) from None


def _too_deep(doc: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(table, key) of the first value nested beyond MAX_DEPTH levels, without recursing (a file's
    nesting never reaches Python's stack)."""
    todo: list[tuple[Any, int, str]] = [(doc, 0, "")]
    while todo:
        value, depth, top = todo.pop()
        if depth > MAX_DEPTH:
            table, _, key = top.rpartition(".")
            return (table, key or None)
        if isinstance(value, Mapping):
            todo.extend((v, depth + 1, top if depth > 2 else f"{top}.{k}".lstrip(".")) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            todo.extend((v, depth + 1, top) for v in value)
    return None


def _parse(doc: Mapping[str, Any], path: Path, sha256: str, confidence: float | None) -> Thresholds:
    c = Checker(path)
    c.keys(doc, _TOP_KEYS, "")
    settings = _settings(c, c.table(doc, "perfgate", ""), confidence)
    phases = {name: Phase(name, c.string(t, "title", tn), c.names(t, "depends_on", tn))
              for name, tn, t in c.subtables(doc, "phases", _PHASE_KEYS)}
    _check_phases(c, phases)
    fallbacks = {name: Fallback(name, c.string(t, "title", tn), c.string(t, "cost", tn), c.string(t, "doc", tn))
                 for name, tn, t in c.subtables(doc, "fallbacks", _FALLBACK_KEYS)}
    engines = _parse_engines(c, {name: t for name, _, t in c.subtables(doc, "engines")})
    gates: dict[str, Gate] = {}
    for name, _, t in c.subtables(doc, "gates"):
        gates[name] = parse_gate(c, name, t, phases, fallbacks, engines, settings)
    params = c.table(doc, "params", "")
    hardware, models = c.table(doc, "hardware", ""), c.table(doc, "models", "")
    _check_floors(c, hardware, models)
    return Thresholds(path, sha256, settings, phases, fallbacks, gates, engines, params, hardware, models)


def _settings(c: Checker, st: Mapping[str, Any], confidence: float | None) -> Settings:
    """[perfgate]; ``confidence`` (--perfgate-confidence) overrides the file's."""
    c.keys(st, _SETTINGS_KEYS, "perfgate")
    inconclusive = st.get("inconclusive", "fail")
    level = c.confidence(st.get("confidence", 0.95), "perfgate", "confidence")
    max_samples = c.positive(st.get("max_samples", 10_000), "perfgate", "max_samples")
    max_seconds = c.positive(st.get("max_seconds", 600.0), "perfgate", "max_seconds", float)
    max_error_rate = c.fraction(st.get("max_error_rate", 0), "perfgate", "max_error_rate")
    if inconclusive not in ("fail", "warn"):
        raise c.err("perfgate", "inconclusive", f"must be \"fail\" or \"warn\", got {inconclusive!r}")
    if confidence is not None:
        level = c.confidence(confidence, "perfgate", "confidence (--perfgate-confidence)")
    validity = c.flag(st, "validity", "perfgate") if "validity" in st else True
    return Settings(level, inconclusive, max_samples, max_seconds, max_error_rate, validity, _workers(c, st),
                    _history(c, st))


def _history(c: Checker, st: Mapping[str, Any]) -> str | None:
    """[perfgate] history: a ``postgresql://`` URL or a SQLite file path (store/backend.py checks
    the URL when the session opens it; here only its shape)."""
    h = st.get("history")
    if h is None:
        return None
    if not isinstance(h, str) or not h.strip():
        raise c.err("perfgate", "history", f"must be a postgresql:// URL or a SQLite file path, got {h!r}")
    h = h.strip()
    if "://" in h and h.split("://", 1)[0].lower() not in ("postgresql", "postgres"):
        raise c.err("perfgate", "history", f"{h.split('://', 1)[0]}:// is not a history location "
                    "(a postgresql:// URL or a SQLite file path)")
    return h


_RAY_ADDR = re.compile(r"auto|[A-Za-z0-9_.-]+:[0-9]{1,5}")  # fullmatch: "$" would admit a trailing newline
MAX_WORKERS = 1024  # client worker processes on one machine (per node of a Ray cluster): more than any machine's cores


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` fit for a one-line error: control characters escaped, bounded (a 5,000-digit value)."""
    from ..runtime.redaction import clean

    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit conversion limit
        return "an integer too long to show"
    return clean(text, limit) + (f" ({len(text)} characters)" if len(text) > limit else "")


def _workers(c: Checker, st: Mapping[str, Any]) -> int | str:
    """[perfgate] workers: a positive integer, "auto" (usable cores - 1, at least 1), a Ray cluster
    (``{ ray = "auto" | "HOST:PORT", per_node = N }``, or ``"ray://HOST:PORT"``): that one as
    ``ray://ADDRESS?per_node=N`` (load/schedule.py's ``parse_ray``)."""
    w = st.get("workers", 1)
    if w == "auto":
        return "auto"
    if isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= MAX_WORKERS:
        return int(w)
    if isinstance(w, str) and w.startswith("ray://"):
        url, _, n_text = w[len("ray://"):].partition("?per_node=")
        w = {"ray": url, **({"per_node": n_text} if n_text else {})}
    if isinstance(w, Mapping):
        extra = sorted(set(w) - {"ray", "per_node"})
        if extra:
            raise c.err("perfgate", f"workers.{extra[0]}", 'unknown key (a Ray cluster: workers = { ray = "auto", per_node = N })')
        addr: Any = w.get("ray")
        n = w.get("per_node", 1)
        if not isinstance(addr, str) or not _RAY_ADDR.fullmatch(addr) or (addr != "auto" and not 0 < int(addr.rsplit(":", 1)[1]) < 65536):
            raise c.err("perfgate", "workers.ray", f'must be "auto" or "HOST:PORT" (the Ray cluster), got {shown(addr)}')
        digits = isinstance(n, str) and n.isascii() and n.isdigit()
        big = digits and len(n.lstrip("0")) > 6  # no int() of a 5,000-digit value
        if digits and not big:
            n = int(n)
        if big or (isinstance(n, int) and not isinstance(n, bool) and n > MAX_WORKERS):
            raise c.err("perfgate", "workers.per_node", f"at most {MAX_WORKERS} worker processes per node, got {shown(n)}")
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            raise c.err("perfgate", "workers.per_node", f"must be a positive integer, got {shown(n)}")
        return f"ray://{addr}?per_node={n}"
    if isinstance(w, int) and not isinstance(w, bool) and w > MAX_WORKERS:
        raise c.err("perfgate", "workers", f"at most {MAX_WORKERS} client worker processes, got {shown(w)}")
    raise c.err("perfgate", "workers", f'must be a positive integer, "auto" or a Ray cluster ({{ ray = "auto", per_node = N }}), got {shown(w)}')


def _check_phases(c: Checker, phases: Mapping[str, Phase]) -> None:
    """Every depends_on names a phase, and they form no cycle."""
    for ph in phases.values():
        for d in ph.depends_on:
            if d not in phases:
                raise c.err(f"phases.{ph.name}", "depends_on", f"unknown phase {d!r} (phases: {', '.join(phases)})")
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


def _parse_engines(c: Checker, raw: Mapping[str, dict[str, Any]]) -> dict[str, EngineSpec]:
    """[engines.NAME] tables, ``extends`` resolved (the parent's kind and args, then the child's)."""
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


def _check_floors(c: Checker, hardware: Mapping[str, Any], models: Mapping[str, Any]) -> None:
    """[hardware] and [models.NAME] (physical floors): errors name the table and key."""
    if not hardware and not models:
        return
    from ..roofline.config import FloorsConfigError, parse

    try:
        parse(hardware, models)
    except FloorsConfigError as e:
        raise c.err(e.table, e.key, e.message) from None
