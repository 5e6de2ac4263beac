"""Physical units of gate thresholds and samples.

Every quantity is stored in the base unit of its dimension (seconds, tokens/s, requests/s,
bytes/s, a fraction 0-1 for percentages, plain numbers) and displayed in the unit the user wrote.
No pytest, no numpy: this module is imported at plugin start.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


class UnitError(ValueError):
    """A quantity string or unit name that cannot be understood."""


@dataclass(frozen=True)
class Unit:
    name: str  # canonical spelling, e.g. "ms"
    dimension: str  # "time", "token_rate", "request_rate", "bandwidth", "fraction", "number"
    factor: float  # base units per one of this unit


_UNITS: dict[str, Unit] = {}


def _add(names: tuple[str, ...], dimension: str, factor: float) -> None:
    unit = Unit(names[0], dimension, factor)
    for n in names:
        _UNITS[n.lower()] = unit


_add(("ns",), "time", 1e-9)
_add(("us", "µs", "μs"), "time", 1e-6)
_add(("ms",), "time", 1e-3)
_add(("s", "sec", "seconds"), "time", 1.0)
_add(("tok/s", "tokens/s", "token/s", "tps"), "token_rate", 1.0)
_add(("req/s", "requests/s", "rps"), "request_rate", 1.0)
_add(("B/s",), "bandwidth", 1.0)
_add(("KB/s",), "bandwidth", 1e3)
_add(("MB/s",), "bandwidth", 1e6)
_add(("GB/s",), "bandwidth", 1e9)
_add(("%", "percent"), "fraction", 0.01)
_add(("", "x"), "number", 1.0)
_add(("B", "bytes"), "bytes", 1.0)
_add(("KiB",), "bytes", 1024.0)
_add(("MiB",), "bytes", 1024.0**2)
_add(("GiB",), "bytes", 1024.0**3)

BASE_UNIT = {
    "time": "s",
    "token_rate": "tok/s",
    "request_rate": "req/s",
    "bandwidth": "B/s",
    "fraction": "fraction",  # 1.0 = 100%
    "number": "",
    "bytes": "B",
}
"""The unit numbers are stored in (decisions.json's ``observed``, ``lower``, ``threshold``, ...)."""

DIMENSION_DEFAULT_UNIT = {
    "time": "ms",
    "token_rate": "tok/s",
    "request_rate": "req/s",
    "bandwidth": "GB/s",
    "fraction": "%",
    "number": "",
    "bytes": "MiB",
}


def unit(name: str) -> Unit:
    """Look up a unit by any accepted spelling (case-insensitive)."""
    u = _UNITS.get(name.strip().lower())
    if u is None:
        known = ", ".join(sorted({u.name or "(plain number)" for u in _UNITS.values()}))
        raise UnitError(f"unknown unit {name!r} (known: {known})")
    return u


_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


@dataclass(frozen=True)
class Quantity:
    """A number in the base unit of its dimension, remembering how the user wrote it."""

    base: float
    unit: Unit

    @property
    def dimension(self) -> str:
        return self.unit.dimension

    def display(self) -> str:
        return format_value(self.base, self.unit)


def parse_quantity(value: object) -> Quantity:
    """Parse ``"150 ms"``, ``"70%"``, ``"30 tok/s"``, ``0.8`` into a :class:`Quantity`."""
    if isinstance(value, bool):
        raise UnitError(f"expected a number with a unit, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise UnitError(f"not a finite number: {value!r}")
        return Quantity(float(value), _UNITS[""])
    if not isinstance(value, str):
        raise UnitError(f"expected a number with a unit, got {type(value).__name__} {value!r}")
    m = _QUANTITY.match(value)
    if not m:
        raise UnitError(f"cannot read {value!r} as a number with a unit (example: \"150 ms\")")
    u = unit(m.group(2))
    number = float(m.group(1))
    if not math.isfinite(number) or not math.isfinite(to_base(number, u)):
        raise UnitError(f"not a finite number: {value!r}")
    return Quantity(to_base(number, u), u)


def to_base(number: float, u: Unit) -> float:
    """``number`` in unit ``u`` expressed in base units (exact for percentages: 70% == 0.7)."""
    return number / 100.0 if u.name == "%" else number * u.factor


def format_value(base: float, u: Unit, digits: int = 3) -> str:
    """Format a base-unit value in unit ``u`` with ``digits`` significant digits."""
    if base is None or (isinstance(base, float) and math.isnan(base)):
        return "n/a"
    if math.isinf(base):
        return "unbounded"  # a bound that does not exist (too few samples), never "inf ms"
    v = base * 100.0 if u.name == "%" else base / u.factor
    if not math.isfinite(v):
        return "unbounded"
    if v == 0:
        text = "0"
    else:
        mag = math.floor(math.log10(abs(v)))
        decimals = max(0, digits - 1 - mag)
        text = f"{v:.{decimals}f}"
    if u.name == "%":
        return text + "%"
    return f"{text} {u.name}" if u.name else text


def change_text(observed: float, baseline: float) -> str | None:
    """How ``observed`` compares with ``baseline``, without judging it (a failing gate is never
    "better"): ``"34% lower"``, ``"12% higher"``, or ``"14.8x the baseline"`` from twice up."""
    if not (math.isfinite(observed) and math.isfinite(baseline)) or baseline == 0:
        return None
    ratio = observed / baseline
    if not math.isfinite(ratio):  # a baseline so near 0 that the ratio overflows
        return None
    if ratio >= 2:
        return f"{ratio:.3g}x the baseline"
    pct = abs(ratio - 1) * 100
    if round(pct) == 0:
        return "same as the baseline"
    return f"{pct:.0f}% {'lower' if ratio < 1 else 'higher'}"


def base_unit(display: str) -> str:
    """The base unit of the dimension of display unit ``display`` (``"ms"`` -> ``"s"``)."""
    return BASE_UNIT[unit(display).dimension]


def note_unit(u: Unit) -> Unit:
    """The unit to show a dimension's numbers in inside notes: the same one a verdict's rows use by
    default (ms for times), so a note never says ``0.0191 s`` beside ``150 ms``."""
    return unit(DIMENSION_DEFAULT_UNIT.get(u.dimension, u.name))
