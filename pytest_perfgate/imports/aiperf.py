"""AIPerf's ``profile_export.jsonl``: one record a line.

Schema (``aiperf/common/models/record_models.py``, ``MetricRecordInfo``): ``metadata`` with
``request_start_ns`` / ``request_end_ns`` (wall clock, ``time.time_ns()``), ``benchmark_phase``
("warmup" | "profiling"), ``session_num``; ``metrics``: tag -> ``{"value", "unit"}`` in display
units ("ns", "us", "ms", "sec", "tokens"), among them ``time_to_first_token``,
``inter_chunk_latency`` (a list: the gaps between consecutive chunks), ``request_latency``,
``output_sequence_length``, ``input_sequence_length``; ``error``: ``{"code", "type", "message"}`` or
null. Chunks are rebuilt as ``start + TTFT + cumsum(inter_chunk_latency)``. AIPerf counts output
tokens by re-tokenising the text unless it ran with ``--use-server-token-count``: the file does not
say which; ``profile_export_aiperf.json`` beside it (its input config) does, when present.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import RequestRecord
from ..load.columns import NONE
from . import jsondoc as j
from .errors import ResultsError, bounded
from .registry import Format
from .run import ImportedRun, Source

NAME = "aiperf"
TOOL = "aiperf profile"
MORE = "aiperf profile --request-count {n}"
_SCALE = {"ns": 1.0, "us": 1e3, "ms": 1e6, "sec": 1e9, "s": 1e9}


def detect(path: Path, head: str) -> bool:
    first = head.lstrip().split("\n", 1)[0]
    return path.is_file() and first.startswith("{") and '"request_start_ns"' in first and '"metrics"' in first


def _time_ns(path: Path, m: Any, tag: str, rec: str, *, many: bool = False) -> Any:
    entry = j.need(path, m, tag, rec)
    unit = j.need(path, entry, "unit", f"{rec} {tag}")
    if unit not in _SCALE:
        raise ResultsError(path, f"unknown time unit {str(unit)[:20]!r} (known: {', '.join(_SCALE)})", record=rec,
                           field=f"{tag}.unit")
    value = j.need(path, entry, "value", f"{rec} {tag}")
    if many:
        return [v * _SCALE[unit] for v in j.numbers(path, value, rec, f"{tag}.value")]
    return (j.number(path, value, rec, f"{tag}.value") or 0.0) * _SCALE[unit]


def _count(r: RequestRecord, m: Any, tag: str) -> int | None:
    entry = m.get(tag) if isinstance(m, dict) else None
    return j.count(r, entry.get("value") if isinstance(entry, dict) else None, f"metrics.{tag}")


def _record(path: Path, no: int, doc: Any, tokens: str) -> RequestRecord:
    rec = f"line {no}"
    meta = j.need(path, doc, "metadata", rec)
    start = int(j.number(path, j.need(path, meta, "request_start_ns", rec), rec, "metadata.request_start_ns") or 0)
    end = int(j.number(path, j.need(path, meta, "request_end_ns", rec), rec, "metadata.request_end_ns") or 0)
    m = j.need(path, doc, "metrics", rec)
    r = RequestRecord(index=int(meta.get("session_num", no - 1)) if isinstance(meta.get("session_num"), int) else no - 1,
                      sent_ns=start, end_ns=end, warmup=meta.get("benchmark_phase") == "warmup",
                      token_count_source="server" if tokens == "server" else "tokenizer")
    r.prompt_tokens = _count(r, m, "input_sequence_length")
    err = doc.get("error")
    if err:
        what = err.get("message", err) if isinstance(err, dict) else err
        code = err.get("code") if isinstance(err, dict) else None
        r.error = (f"HTTP {code}: " if isinstance(code, int) else "aiperf error: ") + bounded(what)
        return r
    if meta.get("was_cancelled"):
        r.error = "cancelled: aiperf cancelled the request"
        return r
    ttft = _time_ns(path, m, "time_to_first_token", rec)
    gaps = _time_ns(path, m, "inter_chunk_latency", rec, many=True) if "inter_chunk_latency" in m else []
    offsets = ttft + np.concatenate(([0.0], np.cumsum(gaps)))  # ns from the start, added as integers (float64
    ints = (np.rint(offsets).astype(np.int64).tolist() if (np.abs(offsets) < 9.2e18).all()  # of 1.8e18 ns is
            else [j.PAST] * len(offsets))  # 256 ns coarse); past int64: named as the request's error (load/plausible)
    r.chunk_ns = [start + int(t) for t in ints]
    r.output_tokens = _count(r, m, "output_sequence_length")
    if r.output_tokens is None and r.ok:
        raise ResultsError(path, "missing", record=rec, field="metrics.output_sequence_length")
    return r


def token_counts(path: Path) -> str:
    """"server" / "tokenizer" from the aggregate JSON beside the file (its input config), else "unknown"."""
    agg = path.with_name("profile_export_aiperf.json")
    try:  # a regular file, capped (a FIFO, /dev/zero: refused, never read)
        doc = json.loads(j.read_bytes(agg, j.SIDE_BYTES))
    except (ResultsError, ValueError, RecursionError):  # absent, not a file, too big, binary, not JSON, too deep
        return "unknown"
    found = _find(doc, "use_server_token_count")
    return "unknown" if found is None else "server" if found is True else "tokenizer"


def _find(doc: Any, key: str, depth: int = 0) -> Any:
    if depth > 6:
        return None
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        items: list[Any] = list(doc.values())
    elif isinstance(doc, list):
        items = doc
    else:
        return None
    for v in items:
        got = _find(v, key, depth + 1)
        if got is not None:
            return got
    return None


def read(path: Path) -> list[tuple[str, ImportedRun]]:
    """The file's run: line by line into columns (:mod:`.columnar`: a block of records at a time);
    a record the old path would fail as implausible: the whole list of records, as before."""
    from .columnar import Implausible, build

    tokens = token_counts(path)
    try:
        cols = build(_record(path, no, doc, tokens) for no, doc in j.lines(path, j.STREAM_BYTES))
    except Implausible:
        return _read_records(path, tokens)
    if not len(cols):
        raise ResultsError(path, "no records")
    src, info = _source(path, tokens)
    end = np.where((cols.end_ns == NONE) | (cols.end_ns == 0), cols.sent_ns, cols.end_ns)
    return [("", ImportedRun.from_columns(cols, engine_info=info, start_ns=int(cols.sent_ns[0]),
                                          end_ns=int(end.max()), source=src))]


def _source(path: Path, tokens: str) -> tuple[Source, dict[str, Any]]:
    notes = () if tokens != "unknown" else (
        "output token counts: the file does not say whether aiperf used the server's counts "
        "(--use-server-token-count) or re-tokenised the text; profile_export_aiperf.json beside it would",)
    src = Source(NAME, TOOL, str(path), per_chunk=True, token_counts=tokens, more=MORE, notes=notes)
    return src, {"name": path.stem, "kind": "import", "format": NAME, "tool": TOOL, "file": str(path)}


def _read_records(path: Path, tokens: str) -> list[tuple[str, ImportedRun]]:
    recs = [_record(path, no, doc, tokens) for no, doc in j.lines(path, j.MAX_BYTES)]
    if not recs:
        raise ResultsError(path, "no records")
    recs.sort(key=lambda r: r.sent_ns)
    src, info = _source(path, tokens)
    return [("", ImportedRun(records=recs, engine_info=info, start_ns=recs[0].sent_ns,
                             end_ns=max(r.end_ns or r.sent_ns for r in recs), source=src))]


FORMAT = Format(NAME, "AIPerf profile_export.jsonl (per-record metrics)", detect, read)
