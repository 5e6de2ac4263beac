"""Benchmark results from other tools as perfgate runs (``perfgate.load_results``, ``perfgate gate``).

Each reader turns one tool's per-request export into :class:`~pytest_perfgate.contract.RequestRecord`
lists in arrival (send) order, inside an :class:`ImportedRun` that every gate kind, writer and store
takes. The registry (:mod:`.registry`) holds one :class:`Format` per module and the formats of the
``pytest_perfgate.formats`` entry-point group.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ResultsError
from .registry import Format, find, formats, read, register
from .run import ImportedRun, Source

__all__ = ["Format", "ImportedRun", "ResultsError", "Source", "find", "formats", "load_results", "load_runs",
           "register", "drop_warmup"]


def drop_warmup(run: ImportedRun, k: int) -> ImportedRun:
    """The first ``k`` requests (in send order) marked warm-up: kept in the file, out of every verdict."""
    c = run.columnar()
    if c is not None:  # rows in send order, as the records
        c.warmup[:k] = True
        return run
    for r in run.records[:k]:
        r.warmup = True
    return run


def load_runs(path: str | Path, format: str | None = None, *, warmup: int = 0) -> dict[str, ImportedRun]:
    """Every run of ``path`` by level ("" for a file of one run; a sweep's levels by their names)."""
    return {level: drop_warmup(run, warmup) for level, run in read(path, format)}


def load_results(path: str | Path, format: str | None = None, *, warmup: int = 0) -> ImportedRun:
    """The run in ``path`` (a benchmark tool's per-request export; the format detected unless named);
    ``warmup``: the first K requests (by send time) dropped. A sweep of several levels: use :func:`load_runs`."""
    runs = load_runs(path, format, warmup=warmup)
    if len(runs) != 1:
        raise ResultsError(path, f"holds {len(runs)} runs ({', '.join(runs)}): load them with load_runs(path)")
    return next(iter(runs.values()))
