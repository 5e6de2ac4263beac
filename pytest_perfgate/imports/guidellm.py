"""guidellm's ``benchmarks.json`` (``GenerativeBenchmarksReport``, metadata ``version`` 2): each
benchmark of a sweep is a level.

Schema (``src/guidellm/benchmark/schemas/report.py``, ``benchmark.py``, ``schemas/request_stats.py``,
``schemas/info.py``): ``metadata.version`` (2), ``metadata.guidellm_version``; ``benchmarks[]``,
each with ``config.strategy`` (``type_``, rate / streams), ``config.sample_size``,
``scheduler_metrics.requests_made`` (successful / incomplete / errored / total: what ran) and
``requests`` (``successful`` / ``errored`` / ``incomplete`` lists: what was *kept*, a sample when
``sample_size`` is set). Per request: ``info.timings`` (``request_start``, ``first_token_iteration``,
``last_token_iteration``, ``request_end``; Unix seconds), ``info.error``, ``output_tokens`` /
``prompt_tokens`` (computed fields; else ``output_metrics`` / ``input_metrics`` ``total_tokens``).

No per-chunk times: a request becomes two "chunks", its first and last token, so TTFT, E2E (to
the last token) and TPOT = (last - first) / (n - 1) are exact, and ITL is refused (guidellm's own
ITL is that per-request mean, perfgate's is per chunk). An incomplete request (cancelled at the
end of the benchmark) is not a failure of the server: it is left out, and the note says how many.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import RequestRecord
from ..load import plausible
from ..load.columns import NONE, RequestColumns
from . import jsondoc as j
from .columnar import marker
from .errors import ResultsError, bounded
from .registry import Format
from .run import ImportedRun, Source

NAME = "guidellm"
TOOL = "guidellm run"
VERSIONS = (1, 2)
MORE = "guidellm run --constraint kind=max_requests,count={n} (with no sample size, or one of at least {n}, to keep them all)"


def detect(path: Path, head: str) -> bool:
    return path.is_file() and '"benchmarks"' in head and ('"guidellm_version"' in head or '"generative_benchmark"' in head)


def _t(path: Path, timings: Any, key: str, rec: str, optional: bool = False) -> float | None:
    return j.number(path, timings.get(key) if isinstance(timings, dict) else None, rec, f"info.timings.{key}",
                    optional=optional)


def _obj(v: Any) -> dict[str, Any]:
    """``v`` if it is a JSON object, else {} (an optional part of the report of the wrong type)."""
    return v if isinstance(v, dict) else {}


def _tokens(r: RequestRecord, req: Any, computed: str, metrics: str) -> int | None:
    v = req.get(computed)
    if v is None and isinstance(req.get(metrics), dict):
        v = req[metrics].get("total_tokens", req[metrics].get("text_tokens"))
    return j.count(r, v, computed)


def _record(path: Path, req: Any, i: int, rec: str, failed: bool) -> RequestRecord:
    info = j.need(path, req, "info", rec)
    timings = j.need(path, info, "timings", rec)
    start = _t(path, timings, "request_start", rec, optional=failed)
    r = RequestRecord(index=i, sent_ns=j.ns(start or 0.0), token_count_source="server")
    r.prompt_tokens = _tokens(r, req, "prompt_tokens", "input_metrics")
    if failed:
        r.error = "guidellm error: " + bounded(info.get("error") or "errored")
        return r
    first = _t(path, timings, "first_token_iteration", rec)
    last = _t(path, timings, "last_token_iteration", rec)
    end = _t(path, timings, "request_end", rec, optional=True)
    r.chunk_ns = [j.ns(first or 0.0)] + ([j.ns(last or 0.0)] if last is not None and last != first else [])
    r.end_ns = j.ns(end) if end is not None else r.chunk_ns[-1]
    r.output_tokens = _tokens(r, req, "output_tokens", "output_metrics")
    if r.output_tokens is None and r.ok:
        raise ResultsError(path, "missing", record=rec, field="output_tokens")
    text = req.get("output")
    if r.ok and isinstance(text, str):  # more tokens than the text has bytes (+ special tokens): no tokenizer's
        r.error = plausible.tokens(r.output_tokens, "output_tokens", text_bytes=len(text.encode("utf-8", "replace")))
    return r


def _load_value(v: Any) -> float | None:
    """A rate or a stream count as a float: a number of sane size (not a bool, NaN, 1e308), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not -1e15 < v < 1e15:
        return None
    return float(v)


def _load(b: Any) -> tuple[str, float] | None:
    """The level's load: a constant / poisson rate (req/s) or concurrent streams."""
    strat = _obj(_obj(_obj(b).get("config")).get("strategy"))
    rate, streams = _load_value(strat.get("rate")), _load_value(strat.get("streams"))
    if rate is not None and strat.get("type_") in ("constant", "poisson", "async"):
        return "rate", rate
    if streams is not None and isinstance(strat.get("streams"), int):
        return "concurrency", streams
    return None


def _level(b: Any, k: int) -> str:
    strat = _obj(_obj(_obj(b).get("config")).get("strategy"))
    kind = str(strat.get("type_", f"benchmark-{k}"))[:40]
    for key in ("rate", "streams", "max_concurrency"):
        v = _load_value(strat.get(key))
        if v is not None:
            return f"{k}-{kind}@{v:g}"
    return f"{k}-{kind}"


def _run(path: Path, b: Any, k: int, version: str) -> tuple[str, ImportedRun]:
    where = f"benchmarks[{k}]"
    reqs = j.need(path, b, "requests", where)
    recs: list[RequestRecord] = []
    for status, failed in (("successful", False), ("errored", True)):
        items = j.need(path, reqs, status, f"{where}.requests")
        if not isinstance(items, list):
            raise ResultsError(path, "not a list", record=f"{where}.requests", field=status)
        recs += [_record(path, q, len(recs) + i, f"{where}.requests.{status}[{i}]", failed) for i, q in enumerate(items)]
    incomplete = reqs.get("incomplete") if isinstance(reqs.get("incomplete"), list) else []
    recs.sort(key=lambda r: r.sent_ns)
    level, src, info = _source(path, b, k, version, len(recs), len(incomplete))
    return level, ImportedRun(records=recs, engine_info=info, start_ns=min((r.sent_ns for r in recs), default=0),
                              end_ns=max((r.end_ns or r.sent_ns for r in recs), default=0), source=src)


def _source(path: Path, b: Any, k: int, version: str, kept: int, incomplete: int) -> tuple[str, Source, dict[str, Any]]:
    """The level's name, its :class:`Source` and engine info (``kept`` requests read, ``incomplete`` left out)."""
    made = _obj(_obj(b.get("scheduler_metrics")).get("requests_made") or _obj(b.get("metrics")).get("requests_made"))
    total: Any = made.get("total")
    left: Any = made.get("incomplete") or 0
    fits = all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < plausible.INT64 for v in (total, left))
    ran = int(total) - int(left) if fits and total >= left else None
    level = _level(b, k)
    notes = (f"{incomplete} incomplete request(s) kept in the file (cancelled at the benchmark's end) left out",
             ) if incomplete else ()
    src = Source(NAME, TOOL, str(path), version=version, level=level, per_chunk=False,
                 total=ran if ran is not None and ran != kept else None, more=MORE, notes=notes, load=_load(b))
    return level, src, {"name": level, "kind": "import", "format": NAME, "tool": TOOL, "file": str(path)}


def read(path: Path) -> list[tuple[str, ImportedRun]]:
    """Each benchmark's run: streamed into columns (:func:`_streamed`); a file it does not read (a bad
    request, a value orjson does not read, a request the old path would fail as implausible): the
    whole tree, as before (:func:`_read_tree`), whose errors name the file, key and request."""
    return _streamed(path) or _read_tree(path)


def _read_tree(path: Path) -> list[tuple[str, ImportedRun]]:
    doc = j.load(path)
    meta = j.need(path, doc, "metadata")
    version = meta.get("version") if isinstance(meta, dict) else None
    if version not in VERSIONS:
        raise ResultsError(path, f"unknown format version {str(version)[:20]!r} (read: {', '.join(map(str, VERSIONS))})",
                           record="metadata", field="version")
    tool_version = str(meta.get("guidellm_version", ""))[:40]
    benchmarks = j.need(path, doc, "benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise ResultsError(path, "no benchmarks", field="benchmarks")
    runs = [_run(path, b, k, tool_version) for k, b in enumerate(benchmarks)]
    return [("", runs[0][1])] if len(runs) == 1 else runs


STATUSES = ("successful", "errored", "incomplete")


def _items(events: Iterator[tuple[str, int, Any]]) -> Iterator[Any]:
    """The elements of the list that just began, up to its end."""
    from .columnar import END

    for kind, _, value in events:
        if kind == END:
            return
        yield value


def _streamed(path: Path) -> list[tuple[str, ImportedRun]] | None:
    """The per-request lists (``benchmarks[k].requests.successful`` / ``errored`` / ``incomplete``)
    read an element at a time (:func:`.columnar.keyed_lists`) into columns by the old path's
    :func:`_record`, the rest of the document (its skeleton) decoded whole; None where the old path
    must read it: anything it would word, or lists that do not stand where they should."""
    import orjson

    from .columnar import DOC, START, Implausible, build, keyed_lists
    from .stream import Malformed

    lists: dict[str, RequestColumns | int] = {}
    skeleton = b""
    try:
        with j.open_regular(path) as f:
            events = keyed_lists(f, str(path), j.MAX_BYTES, STATUSES)
            for kind, n, value in events:
                if kind == START and value == "incomplete":
                    lists[marker(n)] = sum(1 for _ in _items(events))
                elif kind == START:
                    failed = value == "errored"
                    lists[marker(n)] = build(_record(path, q, i, "", failed) for i, q in enumerate(_items(events)))
                elif kind == DOC:
                    skeleton = value
        doc = orjson.loads(skeleton)
    except (ResultsError, Malformed, Implausible, orjson.JSONDecodeError, OverflowError):
        return None
    del skeleton
    meta = _obj(_obj(doc).get("metadata"))
    benchmarks = _obj(doc).get("benchmarks")
    if meta.get("version") not in VERSIONS or not isinstance(benchmarks, list) or not benchmarks:
        return None
    tool_version = str(meta.get("guidellm_version", ""))[:40]
    used: list[str] = []
    runs = []
    for k, b in enumerate(benchmarks):
        reqs = _obj(b).get("requests")
        if not isinstance(b, dict) or not isinstance(reqs, dict):
            return None
        ok, errored, inc = (reqs.get(s) for s in STATUSES)
        for m in (ok, errored, inc):
            if isinstance(m, str) and m in lists:
                used.append(m)
        succ = lists.get(ok) if isinstance(ok, str) else None
        err = lists.get(errored) if isinstance(errored, str) else None
        incomplete = lists.get(inc, 0) if isinstance(inc, str) else 0
        if not isinstance(succ, RequestColumns) or not isinstance(err, RequestColumns) or \
                not isinstance(incomplete, int) or isinstance(inc, list):
            return None
        err.index = err.index + len(succ)  # the old path numbers the errored after the successful
        cols = RequestColumns.concat([succ, err]).sorted_by_sent()
        level, src, info = _source(path, b, k, tool_version, len(cols), incomplete)
        end = np.where((cols.end_ns == NONE) | (cols.end_ns == 0), cols.sent_ns, cols.end_ns)
        runs.append((level, ImportedRun.from_columns(
            cols, engine_info=info, start_ns=int(cols.sent_ns[0]) if len(cols) else 0,
            end_ns=int(end.max()) if len(cols) else 0, source=src)))
    if sorted(used) != sorted(lists) or len(set(used)) != len(used):
        return None  # a list where the old path reads none, or a marker twice: the old path's to read
    return [("", runs[0][1])] if len(runs) == 1 else runs


FORMAT = Format(NAME, "guidellm benchmarks.json (each benchmark of a sweep a level)", detect, read)
