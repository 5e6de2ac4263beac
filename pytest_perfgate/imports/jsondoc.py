"""Reading a tool's JSON or JSON-lines file, with every problem named by file, record and field."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ResultsError


def load(path: Path) -> Any:
    """The JSON document in ``path``; truncated or corrupt: the line and column."""
    import orjson

    raw = path.read_bytes()
    try:
        return orjson.loads(raw)  # 3-4x json's speed and memory on a 50 MB bench file
    except orjson.JSONDecodeError:
        pass  # NaN / Infinity tokens (Python's json writes them), a bad byte: json says where
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ResultsError(path, f"not valid JSON (truncated or corrupt?): {e.msg} at line {e.lineno} column {e.colno}"
                           ) from None
    except UnicodeDecodeError as e:
        raise ResultsError(path, f"not UTF-8 text (byte {e.start})") from None


def lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` of a JSON-lines file (blank lines skipped)."""
    with path.open("rb") as f:
        for no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield no, json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ResultsError(path, f"not valid JSON (truncated or corrupt?): {e}", record=f"line {no}") from None


def need(path: Path, doc: Any, key: str, record: str = "", *, hint: str = "") -> Any:
    """``doc[key]``; a missing key (or a doc that is not an object) named."""
    if not isinstance(doc, Mapping):
        raise ResultsError(path, f"expected a JSON object, found {type(doc).__name__}", record=record)
    if key not in doc:
        raise ResultsError(path, "missing" + (f" ({hint})" if hint else ""), record=record, field=key)
    return doc[key]


def number(path: Path, value: Any, record: str, field: str, *, optional: bool = False) -> float | None:
    """A finite number (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ResultsError(path, f"not a finite number: {str(value)[:40]!r}", record=record, field=field)
    return float(value)


def numbers(path: Path, value: Any, record: str, field: str) -> list[float]:
    """A list of finite numbers; the first bad entry named by its index."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise ResultsError(path, f"not a list: {str(value)[:40]!r}", record=record, field=field)
    if all(type(v) is float or type(v) is int for v in value):  # the common case, checked at C speed below
        arr = np.asarray(value, dtype=np.float64)
        if np.isfinite(arr).all():
            return arr.tolist()  # type: ignore[no-any-return]
    return [float(number(path, v, f"{record}[{i}]" if record else f"[{i}]", field) or 0.0) for i, v in enumerate(value)]


def ns(seconds: float) -> int:
    return int(round(seconds * 1e9))
