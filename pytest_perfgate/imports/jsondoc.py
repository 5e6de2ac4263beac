"""Reading a tool's JSON or JSON-lines file, with every problem named by file, record and field.

Only regular files are read (a FIFO, a device or a socket would block or never end), each with a
size cap: :data:`MAX_BYTES` for an export read whole, :data:`STREAM_BYTES` for one streamed into
columns, :data:`SIDE_BYTES` for a file read beside it."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..contract import RequestRecord
from ..load import plausible
from ..load.plausible import INT64
from .errors import ResultsError

MAX_BYTES = 2 << 30  # an export (a 1 GB file is decided in ~18 s with ~3.3 GB of memory)
STREAM_BYTES = 16 << 30  # an export read a line or a block at a time into columns: memory grows with the
# requests (~100 bytes each held as columns), not the file, so the cap bounds the time only (a 1M-request
# AIPerf export is 2.6 GB: ~0.4x its size in memory); the whole-tree and record-list fallbacks keep MAX_BYTES
SIDE_BYTES = 16 << 20  # a file beside it (AIPerf's profile_export_aiperf.json: ~20 KB)
PAST = 1 << 64  # a time in ns past int64, saturated: past int64 still when an int64 is added or taken away


def _regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else \
            "not a file"
        raise ResultsError(path, f"not a regular file ({kind}): only regular files are read")


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file (never blocks: a FIFO is refused unopened)."""
    try:
        _regular(path, os.stat(path).st_mode)  # a device is not even opened (opening some has effects)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ResultsError(path, f"cannot be read: {e.strerror or e}") from None
    try:
        _regular(path, os.fstat(fd).st_mode)  # what was opened (the path may have changed since)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``; over ``limit``: a named error, read no further."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(min(size, limit) + 1) if size <= limit else b""  # one read of the file's own size
        if size > limit or len(raw) > limit:
            raise ResultsError(path, f"over {limit >> 20} MiB: not read (the cap on a file perfgate reads)")
        if len(raw) > size:  # it grows while read: on, up to the cap
            parts = [raw]
            while (part := f.read(min(1 << 24, limit + 1 - sum(map(len, parts))))):
                parts.append(part)
            raw = b"".join(parts)
            if len(raw) > limit:
                raise ResultsError(path, f"over {limit >> 20} MiB: not read further (the cap on a file perfgate "
                                   "reads; it grew while read)")
    return raw


def _nested(path: Path, record: str = "") -> ResultsError:
    return ResultsError(path, "JSON nested too deeply (over ~1,000 levels): not a tool's export", record=record)


def load(path: Path, limit: int = MAX_BYTES) -> Any:
    """The JSON document in ``path``; truncated or corrupt: the line and column."""
    import orjson

    raw = read_bytes(path, limit)
    try:
        return orjson.loads(raw)  # 3-4x json's speed and memory on a 50 MB bench file
    except orjson.JSONDecodeError:
        pass  # NaN / Infinity tokens (Python's json writes them), a bad byte, deep nesting: json says where
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ResultsError(path, f"not valid JSON (truncated or corrupt?): {e.msg} at line {e.lineno} column {e.colno}"
                           ) from None
    except UnicodeDecodeError as e:
        raise ResultsError(path, f"not UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise _nested(path) from None


def lines(path: Path, limit: int = MAX_BYTES) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` of a JSON-lines file (blank lines skipped), one line read at a time."""
    read = 0
    with open_regular(path) as f:
        for no, raw in enumerate(f, 1):
            read += len(raw)
            if read > limit:
                raise ResultsError(path, f"over {limit >> 20} MiB: not read further (the cap on a file perfgate "
                                   "reads)", record=f"line {no}")
            if not raw.strip():
                continue
            try:  # json, not orjson: orjson reads an int past 64 bits as a float (an index of 10**30 is named)
                yield no, json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ResultsError(path, f"not valid JSON (truncated or corrupt?): {e}", record=f"line {no}") from None
            except RecursionError:
                raise _nested(path, f"line {no}") from None


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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (isinstance(value, int) or math.isfinite(value)):
        raise ResultsError(path, f"not a finite number: {str(value)[:40]!r}", record=record, field=field)
    if isinstance(value, int) and abs(value) >= INT64:  # past int64 (and past float64: 10**400): saturated,
        return float(PAST) if value > 0 else -float(PAST)  # named as that request's error (load/plausible.py)
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


def count(r: RequestRecord, value: Any, what: str = "output tokens") -> int | None:
    """A token count of ``r``: None when absent or not a number; one no request can have (NaN,
    Infinity, negative, absurd: :func:`~pytest_perfgate.load.plausible.tokens`) fails ``r`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    why = plausible.tokens(value, what)
    if why:
        r.error = r.error or why
        return None
    return int(value)


def tokens(path: Path, r: RequestRecord, value: Any, record: str, field: str) -> int | None:
    """A required token count: not a number is the file's error (named); a number no request can
    have (NaN, Infinity, negative, absurd) is ``r``'s (:func:`count`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        number(path, value, record, field)
    return count(r, value, field)


def ns(seconds: float) -> int:
    """``seconds`` in integer ns; a time past int64 ns (~292 years) saturates at :data:`PAST`, which
    :mod:`~pytest_perfgate.load.plausible` names as that request's error."""
    x = seconds * 1e9
    if not abs(x) < INT64:  # also inf and NaN
        return PAST if x >= 0 or math.isnan(x) else -PAST
    return int(round(x))
