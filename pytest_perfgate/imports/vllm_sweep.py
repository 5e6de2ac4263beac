"""A ``vllm bench sweep serve`` output folder: one run per level.

The sweep writes one folder per parameter combination (``SERVE-...-BENCH-...``, the level) holding
``run=N.json`` (each a ``vllm bench serve`` result; with ``--save-detailed`` in the bench command
they have the per-request lists) and ``summary.json``; ``warmup.json`` is not measured. The level's
run is every ``run=N.json`` of its folder, the repetitions pooled in send order.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from . import jsondoc as j
from . import vllm_bench
from .errors import ResultsError
from .registry import Format
from .run import ImportedRun

NAME = "vllm-sweep"
_RUN = re.compile(r"run=(\d+)\.json$")


def _levels(path: Path) -> list[Path]:
    return sorted(d for d in path.iterdir() if d.is_dir() and any(_RUN.search(f.name) for f in d.iterdir()))


def _load(doc: object) -> tuple[str, float] | None:
    """The level's load from the bench's own keys: ``max_concurrency`` if set, else a finite ``request_rate``."""
    if not isinstance(doc, dict):
        return None
    conc, rate = doc.get("max_concurrency"), doc.get("request_rate")
    if isinstance(conc, int) and not isinstance(conc, bool) and 0 < conc < 1e15:
        return "concurrency", float(conc)
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 < rate < 1e15:  # not inf, NaN, 1e308
        return "rate", float(rate)
    return None


def detect(path: Path, head: str) -> bool:
    return path.is_dir() and bool(_levels(path))


def read(path: Path) -> list[tuple[str, ImportedRun]]:
    out = []
    for d in _levels(path):
        files = sorted((f for f in d.iterdir() if _RUN.search(f.name)), key=lambda f: int(_RUN.search(f.name).group(1)))  # type: ignore[union-attr]
        docs = [j.load(f) for f in files]
        runs = [vllm_bench.run_of(f, doc, level=d.name, consume=True) for f, doc in zip(files, docs, strict=True)]
        recs = sorted((r for run in runs for r in run.records), key=lambda r: r.sent_ns)
        for i, r in enumerate(recs):
            r.index = i
        first = runs[0]
        src = dataclasses.replace(first.source, format=NAME, path=str(d), load=_load(docs[0]),
                                  notes=(f"{len(files)} repetition(s) pooled: {', '.join(f.name for f in files)}",))
        out.append((d.name, ImportedRun(records=recs, engine_info={**first.engine_info, "name": d.name, "format": NAME,
                                                                    "file": str(d)},
                                        start_ns=min(r.start_ns for r in runs), end_ns=max(r.end_ns for r in runs),
                                        source=src)))
    if not out:
        raise ResultsError(path, "no level folder with run=N.json files")
    return out


FORMAT = Format(NAME, "vllm bench sweep serve output folder (one run per level)", detect, read)
