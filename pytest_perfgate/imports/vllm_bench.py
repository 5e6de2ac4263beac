"""``vllm bench serve --save-result --save-detailed`` JSON: one run.

Per request, parallel lists: ``start_times`` (the client's ``time.perf_counter()`` at send, s),
``ttfts`` (s from send), ``itls`` (the gaps between consecutive chunks, s), ``latencies`` (send to
the last chunk, s), ``input_lens``, ``output_lens`` (the server's usage count), ``errors`` ("" for
success), ``queue_times`` (the wait for a ``--max-concurrency`` slot, s: send - arrival). Each chunk's
arrival is rebuilt as ``start + ttft + cumsum(itls)``, so perfgate's TTFT, ITL (per chunk), TPOT and
E2E are the bench's own. A failed request (``errors[i]`` non-empty) is a failed request here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..contract import RequestRecord
from ..load import plausible
from ..load.columns import NONE
from ..runtime.redaction import printable
from . import jsondoc as j
from .errors import ResultsError, bounded
from .registry import Format
from .run import ImportedRun, Source

TOOL = "vllm bench serve"
NAME = "vllm-bench"
DETAILED = ("start_times", "ttfts", "itls", "latencies", "errors")
LENGTHS = ("input_lens", "output_lens")
MORE = "vllm bench serve --num-prompts {n}"
HINT = "run vllm bench serve with --save-result --save-detailed"


def detect(path: Path, head: str) -> bool:
    return path.is_file() and head.lstrip().startswith("{") and '"burstiness"' in head and '"endpoint_type"' in head


def records(path: Path, doc: Any, where: str = "", consume: bool = False) -> list[RequestRecord]:
    """The requests of one bench result document, in send order (``index``: the position in the file).
    ``consume``: the document was read for this alone; its ``itls`` lists are emptied once read."""
    cols = {k: j.need(path, doc, k, where, hint=HINT) for k in (*DETAILED, *LENGTHS)}
    n = len(cols["start_times"]) if isinstance(cols["start_times"], list) else -1
    for k, v in cols.items():
        if not isinstance(v, list):
            raise ResultsError(path, "not a list", record=where, field=k)
        if len(v) != n:
            raise ResultsError(path, f"{len(v)} entries, start_times has {n}", record=where, field=k)
    queue = doc.get("queue_times") if isinstance(doc.get("queue_times"), list) else None
    out = _fast(cols, queue, n, consume)
    if out is None:  # something to name (a bad entry): one record at a time
        out = [_record(path, cols, queue, i, where) for i in range(n)]
    texts = doc.get("generated_texts")
    if isinstance(texts, list) and len(texts) == n:  # no more tokens than the text's bytes (+ special tokens)
        slack = plausible.SPECIAL_SLACK
        for r in out:  # (a character is at least a byte: the text is encoded only when that does not settle it)
            text, got = texts[r.index], r.output_tokens
            if r.ok and isinstance(text, str) and got is not None and got > len(text) + slack:
                r.error = plausible.tokens(got, "output_lens", text_bytes=len(text.encode("utf-8", "replace")))
    out.sort(key=lambda r: r.sent_ns)
    return out


def _record(path: Path, c: dict[str, list[Any]], queue: list[Any] | None, i: int, where: str) -> RequestRecord:
    rec = f"{where + ' ' if where else ''}request {i}"
    start = j.number(path, c["start_times"][i], rec, "start_times") or 0.0
    err = c["errors"][i]
    sent = j.ns(start)
    r = RequestRecord(index=i, sent_ns=sent, token_count_source="server")
    r.prompt_tokens = j.tokens(path, r, c["input_lens"][i], rec, "input_lens")
    q = j.number(path, queue[i], rec, "queue_times", optional=True) if queue is not None and i < len(queue) else None
    r.scheduled_ns = sent - j.ns(q) if q is not None else None
    if err:
        r.error = "bench error: " + bounded(err)
        return r
    ttft = j.number(path, c["ttfts"][i], rec, "ttfts") or 0.0
    gaps = j.numbers(path, c["itls"][i], rec, "itls")
    latency = j.number(path, c["latencies"][i], rec, "latencies") or 0.0
    times = start + ttft + np.concatenate(([0.0], np.cumsum(gaps)))
    r.chunk_ns = [j.ns(float(t)) for t in times]  # past int64 saturated: load/plausible.py names it
    r.end_ns = sent + j.ns(latency)
    r.output_tokens = j.tokens(path, r, c["output_lens"][i], rec, "output_lens")
    r.finish_reason = "length"
    return r


SECONDS_LIMIT = 4e9  # s: past it a time (or a sum of two) in ns may leave int64 (the slow path names the request)
INT64_FLOAT = 9.2e18  # ns: under int64's 9.22e18 as a float64


def _column(values: list[Any], limit: float = SECONDS_LIMIT) -> Any:
    """``values`` as float64 when every entry is an int or float of magnitude under ``limit`` (else
    None: named later, one request at a time)."""
    if not all(type(v) is float or type(v) is int for v in values):
        return None
    try:
        a = np.asarray(values, dtype=np.float64)
    except OverflowError:  # an int past float64
        return None
    return a if (np.abs(a) < limit).all() else None


def _fast(c: dict[str, list[Any]], queue: list[Any] | None, n: int, consume: bool = False) -> list[RequestRecord] | None:
    """:func:`_record` for every request at once (numpy, rows of one length together): the same
    numbers bit for bit, 100k requests in about a second; None when an entry is not a plain number.
    ``consume``: empty the document's ``itls`` once they are read (a document read for this alone)."""
    cols = {k: _column(c[k]) for k in ("start_times", "ttfts", "latencies")}
    cols |= {k: _column(c[k], plausible.MAX_TOKENS + 1) for k in ("input_lens", "output_lens")}
    q = _column(queue[:n]) if queue is not None and len(queue) >= n else None
    if any(v is None for v in cols.values()) or (queue is not None and q is None):
        return None
    errs = c["errors"]
    failed = [bool(e) for e in errs]
    rows = c["itls"]
    by_len: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        if not failed[i]:
            if type(row) is not list:
                return None
            by_len.setdefault(len(row), []).append(i)
    if not all(type(v) is float or type(v) is int for i in range(n) if not failed[i] for v in rows[i]):
        return None
    sent = np.rint(cols["start_times"] * 1e9).astype(np.int64).tolist()
    sched = None if q is None else (np.asarray(sent, dtype=np.int64) - np.rint(q * 1e9).astype(np.int64)).tolist()
    end = (np.asarray(sent, dtype=np.int64) + np.rint(cols["latencies"] * 1e9).astype(np.int64)).tolist()
    base = cols["start_times"] + cols["ttfts"]
    groups = [(idx, np.asarray([rows[i] for i in idx], dtype=np.float64).reshape(len(idx), length))
              for length, idx in by_len.items()]
    if not all((np.abs(gaps) < SECONDS_LIMIT).all() for _, gaps in groups):
        return None
    if consume:  # the document's own lists of gaps (a 100k-request file: ~110 MB of floats) are no longer needed
        rows.clear()
    chunks: dict[int, list[int]] = {}
    for idx, gaps in groups:
        times = base[idx][:, None] + np.concatenate((np.zeros((len(idx), 1)), np.cumsum(gaps, axis=1)), axis=1)
        ns = np.rint(times * 1e9)
        ints = ns.astype(np.int64) if (np.abs(ns) < INT64_FLOAT).all() else np.full(ns.shape, j.PAST, object)
        chunks.update(zip(idx, ints.tolist(), strict=True))  # past int64 (sums of huge gaps): load/plausible.py names it
    prompt = cols["input_lens"].astype(np.int64).tolist()
    output = cols["output_lens"].astype(np.int64).tolist()
    out = []
    for i in range(n):
        r = RequestRecord(index=i, sent_ns=sent[i], token_count_source="server", prompt_tokens=prompt[i],
                          scheduled_ns=None if sched is None else sched[i])
        if failed[i]:
            r.error = "bench error: " + bounded(errs[i])
        else:
            r.chunk_ns, r.end_ns, r.output_tokens, r.finish_reason = chunks[i], end[i], output[i], "length"
        out.append(r)
    return out


def run_of(path: Path, doc: Any, level: str = "", where: str = "", consume: bool = False) -> ImportedRun:
    recs = records(path, doc, where, consume)
    src = Source(NAME, TOOL, str(path), level=level, more=MORE)
    info = {"name": level or path.stem, "kind": "import", "format": NAME, "tool": TOOL, "file": str(path),
            "model": printable(str(doc.get("model_id", "")))[:200], "backend": printable(str(doc.get("backend", "")))[:40]}
    return ImportedRun(records=recs, engine_info=info, start_ns=min((r.sent_ns for r in recs), default=0),
                       end_ns=max((r.end_ns or r.sent_ns for r in recs), default=0), source=src)


def read(path: Path) -> list[tuple[str, ImportedRun]]:
    """The file's run: streamed into columns (:mod:`.vllm_columns`), else (a file that path does not
    take: an entry to name, NaN tokens, ...) the whole document as before."""
    from .vllm_columns import read as read_columns

    got = read_columns(path)
    if got is None:
        return [("", run_of(path, j.load(path), consume=True))]
    doc, cols = got
    src = Source(NAME, TOOL, str(path), more=MORE)
    info = {"name": path.stem, "kind": "import", "format": NAME, "tool": TOOL, "file": str(path),
            "model": printable(str(doc.get("model_id", "")))[:200], "backend": printable(str(doc.get("backend", "")))[:40]}
    end = np.where((cols.end_ns == NONE) | (cols.end_ns == 0), cols.sent_ns, cols.end_ns) if len(cols) else None
    return [("", ImportedRun.from_columns(cols, engine_info=info, start_ns=int(cols.sent_ns.min()) if len(cols) else 0,
                                          end_ns=int(end.max()) if end is not None else 0, source=src))]


FORMAT = Format(NAME, "vllm bench serve --save-result --save-detailed JSON", detect, read)
