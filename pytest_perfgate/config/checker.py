"""Typed reads of TOML values; every problem becomes a :class:`ConfigError` naming file, table and key."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .model import ConfigError
from .units import Quantity, UnitError, parse_quantity


class Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def err(self, table: str, key: str | None, msg: str) -> ConfigError:
        return ConfigError(self.path, table, key, msg)

    def table(self, doc: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
        v = doc.get(key, {})
        if not isinstance(v, dict):
            raise self.err(where, key, f"must be a table, got {type(v).__name__}")
        return v

    def subtables(self, doc: Mapping[str, Any], key: str, allowed: set[str] | None = None) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(name, "key.name", table) of each ``[key.NAME]``, its keys checked against ``allowed``."""
        for name, t in self.table(doc, key, "").items():
            if not isinstance(t, dict):
                raise self.err(key, name, "must be a table")
            tname = f"{key}.{name}"
            if allowed is not None:
                self.keys(t, allowed, tname)
            yield name, tname, t

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

    def flag(self, t: Mapping[str, Any], key: str, table: str) -> bool:
        v = t.get(key, False)
        if not isinstance(v, bool):
            raise self.err(table, key, f"must be true or false, got {v!r}")
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
