"""The export formats perfgate reads: one :class:`Format` per module, one registry.

A format says whether a path is its own (``detect``: from the path and the first bytes of the file,
or the folder's listing), and reads it into runs (``read``: one ``(level, ImportedRun)`` per run; a
sweep gives one per level, a single run the level ""). Built in: ``vllm-bench`` (``vllm bench serve
--save-result --save-detailed``), ``vllm-sweep`` (a ``vllm bench sweep serve`` output folder),
``aiperf`` (``profile_export.jsonl``), ``guidellm`` (``benchmarks.json``), ``inference-perf``
(``per_request_lifecycle_metrics.json``). A package adds one with the ``pytest_perfgate.formats``
entry-point group (a :class:`Format`); a ``conftest.py`` with :func:`register`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import ResultsError
from .jsondoc import open_regular
from .run import ImportedRun

HEAD_BYTES = 64 * 1024  # what detection reads of a file
BUILTIN = ("vllm_bench", "vllm_sweep", "aiperf", "guidellm", "inference_perf")  # modules, each with FORMAT
ENTRY_POINTS = "pytest_perfgate.formats"

Read = Callable[[Path], list[tuple[str, ImportedRun]]]


@dataclass(frozen=True)
class Format:
    name: str
    title: str  # what the user has, e.g. "vllm bench serve --save-result --save-detailed JSON"
    detect: Callable[[Path, str], bool]  # (path, first HEAD_BYTES of a file as text; "" for a folder)
    read: Read


_FORMATS: dict[str, Format] = {}
_loaded = False


def register(fmt: Format) -> Format:
    """Add (or replace) a format; returns it."""
    _FORMATS[fmt.name] = fmt
    return fmt


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in BUILTIN:
        fmt = getattr(importlib.import_module(f"{__package__}.{mod}"), "FORMAT", None)
        if isinstance(fmt, Format):
            _FORMATS.setdefault(fmt.name, fmt)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        try:
            obj = ep.load()
        except Exception as e:  # a broken plug-in names itself, never hides the built-in formats
            raise ResultsError(f"entry point {ep.name} ({ep.value})", f"could not be loaded: {e}") from None
        if not isinstance(obj, Format):
            raise ResultsError(f"entry point {ep.name} ({ep.value})", "is not a pytest_perfgate.imports.Format")
        _FORMATS.setdefault(obj.name, obj)


def formats() -> dict[str, Format]:
    """Every known format by name (built in, entry points, registered)."""
    _load()
    return dict(_FORMATS)


def head(path: Path) -> str:
    if path.is_dir():
        return ""
    with open_regular(path) as f:  # a FIFO or a device is refused, never opened to wait
        return f.read(HEAD_BYTES).decode("utf-8", errors="replace")


def find(path: Path, name: str | None = None) -> Format:
    """The format named ``name``, or the one that recognises ``path``."""
    known = formats()
    if name is not None:
        if name not in known:
            raise ResultsError(path, f"unknown format {name!r} (known: {', '.join(sorted(known))})")
        return known[name]
    if not path.exists():
        raise ResultsError(path, "no such file or folder")
    try:
        text = head(path)
    except OSError as e:
        raise ResultsError(path, f"cannot be read: {e.strerror or e}") from None
    hits = [f for f in known.values() if f.detect(path, text)]
    if len(hits) != 1:
        what = "matches no known format" if not hits else f"matches several formats ({', '.join(f.name for f in hits)})"
        raise ResultsError(path, f"{what}; name one with --format ({', '.join(sorted(known))})")
    return hits[0]


def read(path: str | Path, name: str | None = None) -> list[tuple[str, ImportedRun]]:
    """Every run in ``path`` (a sweep: one a level)."""
    p = Path(path)
    fmt = find(p, name)
    try:
        return [(level, run.drop_implausible()) for level, run in fmt.read(p)]
    except ResultsError:
        raise
    except OSError as e:
        raise ResultsError(p, f"cannot be read: {e.strerror or e}") from None
