"""inference-perf's ``per_request_lifecycle_metrics.json`` (written with ``report.request_lifecycle.
per_request: true``): a JSON list, one entry a request.

Schema (``inference_perf/reportgen/base.py``, ``inference_perf/apis/base.py``): ``start_time``,
``end_time`` (the client's clock, s), ``request`` (the body sent), ``response``, ``error``
(``{"error_type", "error_msg"}`` or null), ``info.request_metrics`` (``text.input_tokens``),
``info.response_metrics``: ``output_tokens`` (the client's re-tokenisation), ``server_usage``
(``completion_tokens``: the server's count, when sent), ``chunk_times[]`` (absolute arrival of each
content chunk) and ``output_token_times[]`` (one a token; the tokens of one chunk share its time:
inference-perf's own per-token ITL has a median of 0). perfgate takes the chunks (ITL per chunk),
the server's count when present, else the client's. The file has no scheduled send time (no
send-lag check).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import RequestRecord
from ..load import plausible
from ..load.columns import NONE
from . import jsondoc as j
from .errors import ResultsError, bounded
from .registry import Format
from .run import ImportedRun, Source
from .stream import Malformed

NAME = "inference-perf"
TOOL = "inference-perf"
MORE = "inference-perf with a load stage of {n} requests (rate x duration)"


def detect(path: Path, head: str) -> bool:
    text = head.lstrip()
    return path.is_file() and text.startswith("[") and '"start_time"' in text and (
        '"response_metrics"' in text or '"request_metrics"' in text)


def _record(path: Path, e: Any, i: int) -> tuple[RequestRecord, bool]:
    rec = f"entry {i}"
    start = j.number(path, j.need(path, e, "start_time", rec), rec, "start_time") or 0.0
    end = j.number(path, e.get("end_time"), rec, "end_time", optional=True)
    r = RequestRecord(index=i, sent_ns=j.ns(start), end_ns=j.ns(end) if end is not None else None)
    info = e.get("info") if isinstance(e.get("info"), dict) else {}
    text = (info.get("request_metrics") or {}).get("text") if isinstance(info.get("request_metrics"), dict) else None
    if isinstance(text, dict) and isinstance(text.get("input_tokens"), int):
        r.prompt_tokens = text["input_tokens"]
    err = e.get("error")
    if err:
        what = f"{err.get('error_type', 'error')}: {err.get('error_msg', '')}" if isinstance(err, dict) else err
        r.error = "inference-perf error: " + bounded(what)
        return r, True
    resp = j.need(path, info, "response_metrics", rec)
    times = j.numbers(path, j.need(path, resp, "chunk_times", rec, hint="a streamed request's chunk times"), rec,
                      "info.response_metrics.chunk_times")
    r.chunk_ns = [j.ns(t) for t in times]
    usage = resp.get("server_usage") if isinstance(resp.get("server_usage"), dict) else {}
    server = usage.get("completion_tokens")
    if isinstance(server, int) and not isinstance(server, bool):
        r.output_tokens, r.token_count_source = j.count(r, server, "server_usage.completion_tokens"), "server"
    else:
        r.output_tokens = j.tokens(path, r, j.need(path, resp, "output_tokens", rec), rec,
                                   "info.response_metrics.output_tokens")
        r.token_count_source = "tokenizer"
    if not r.chunk_ns:
        r.error = "no content chunk: inference-perf recorded no chunk times"
    if r.ok:  # no more than asked, nor more than the text's bytes (+ special tokens)
        text = e.get("response")
        r.error = plausible.tokens(r.output_tokens, "output tokens", asked=_asked(e.get("request")),
                                   text_bytes=len(text.encode("utf-8", "replace")) if isinstance(text, str) else None)
    return r, isinstance(server, int)


def _asked(body: Any) -> int | None:
    """The request's ``max_tokens`` (or ``max_completion_tokens``) from the body sent (a JSON string)."""
    if isinstance(body, str) and len(body) <= j.SIDE_BYTES:
        try:
            body = json.loads(body)
        except (ValueError, RecursionError):
            return None
    if not isinstance(body, dict):
        return None
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v < plausible.INT64:
            return v
    return None


def read(path: Path) -> list[tuple[str, ImportedRun]]:
    """The file's run: its entries a piece at a time into columns (:mod:`.columnar`); a file that
    path does not take (a piece it cannot cut, an entry to name, an implausible one): as before."""
    from .columnar import Implausible, array_pieces, build

    ok: list[bool] = []

    def records() -> Iterator[RequestRecord]:
        i = 0
        with j.open_regular(path) as f:
            for piece in array_pieces(f, str(path), j.MAX_BYTES):
                for e in piece:
                    r, server = _record(path, e, i)
                    i += 1
                    if r.ok:
                        ok.append(server)
                    yield r

    try:
        cols = build(records())
    except (Malformed, Implausible, ResultsError, ValueError, TypeError, AttributeError, RecursionError):
        return _read_records(path)
    if not len(cols):
        raise ResultsError(path, "no requests")
    src, info = _source(path, ok)
    end = np.where((cols.end_ns == NONE) | (cols.end_ns == 0), cols.sent_ns, cols.end_ns)
    return [("", ImportedRun.from_columns(cols, engine_info=info, start_ns=int(cols.sent_ns[0]),
                                          end_ns=int(end.max()), source=src))]


def _read_records(path: Path) -> list[tuple[str, ImportedRun]]:
    doc = j.load(path)
    if not isinstance(doc, list):
        raise ResultsError(path, f"expected a JSON list of requests, found {type(doc).__name__}")
    got = [_record(path, e, i) for i, e in enumerate(doc)]
    recs = sorted((r for r, _ in got), key=lambda r: r.sent_ns)
    if not recs:
        raise ResultsError(path, "no requests")
    src, info = _source(path, [server for r, server in got if r.ok])
    return [("", ImportedRun(records=recs, engine_info=info, start_ns=recs[0].sent_ns,
                             end_ns=max(r.end_ns or r.sent_ns for r in recs), source=src))]


def _source(path: Path, ok: list[bool]) -> tuple[Source, dict[str, Any]]:
    tokens = "server" if ok and all(ok) else "tokenizer" if not any(ok) else "unknown"
    notes = (f"output tokens: the server's count for {sum(ok)} of {len(ok)} requests, the client's "
             "re-tokenisation for the others",) if tokens == "unknown" else ()
    src = Source(NAME, TOOL, str(path), token_counts=tokens, more=MORE, notes=notes)
    return src, {"name": path.stem, "kind": "import", "format": NAME, "tool": TOOL, "file": str(path)}


FORMAT = Format(NAME, "inference-perf per_request_lifecycle_metrics.json", detect, read)
