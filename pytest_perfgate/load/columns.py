"""Per-request data as columns: one numpy row per request, every chunk time in one flat array.

A run of 1M requests with ~31 chunks each is ~31M chunk times: as Python ints in per-request lists
(:class:`~pytest_perfgate.contract.RequestRecord`) that is ~2.5 GB of objects; here it is one int64
array (248 MB) with per-request offsets. :class:`RequestColumns` is the layout the imports, the
metrics and the gate path read; :meth:`RequestColumns.record` gives today's ``RequestRecord`` for
code that wants one request, :meth:`RequestColumns.from_records` builds the columns from records.

Layout (``n`` requests, row ``i`` is request ``i`` in the order given, usually send order):

* int64 scalars: ``index``, ``sent_ns``, ``scheduled_ns``, ``connect_ns``, ``end_ns``,
  ``prompt_tokens``, ``output_tokens``, ``expected_prompt_tokens``; :data:`NONE` (int64's minimum)
  where the record has ``None``.
* ``chunk_ns``: every chunk arrival, flat (int64, ns); request ``i``'s chunks are
  ``chunk_ns[offsets[i]:offsets[i + 1]]`` (``offsets``: ``n + 1`` int64). ``chunk_tokens`` the same
  with its own ``token_offsets`` (a record may carry chunk times without per-chunk token counts).
* Text as small tables with an int32 code a row (-1: ``None``): ``error`` into ``errors`` (the
  cleaned cause, as ``RequestRecord.error`` holds it), ``finish`` into ``finish_reasons``, ``tag``
  into ``tags``, ``host`` into ``hosts``; ``count_source`` indexes :data:`SOURCES`; ``warmup`` bool.

Every number must fit int64 (a record past it, e.g. a saturated import time, is failed first by
:mod:`~pytest_perfgate.load.plausible`): :meth:`from_records` raises ``OverflowError`` otherwise.
The arrays are not copied on access; treat the columns as read-only once built.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, cast

import numpy as np

from ..contract import RequestRecord

NONE = int(np.iinfo(np.int64).min)  # an absent int (None in a RequestRecord)
SOURCES: tuple[Literal["server", "tokenizer", "chunks"], ...] = ("server", "tokenizer", "chunks")
_INTS = ("index", "sent_ns", "scheduled_ns", "connect_ns", "end_ns", "prompt_tokens", "output_tokens",
         "expected_prompt_tokens")
_OPTIONAL = frozenset(_INTS[2:])  # may be None in a record
_CODES = (("error", "errors"), ("finish", "finish_reasons"), ("tag", "tags"), ("host", "hosts"))


def _i64(n: int = 0) -> np.ndarray:
    return np.zeros(n, dtype=np.int64)


def _i32(n: int = 0) -> np.ndarray:
    return np.full(n, -1, dtype=np.int32)


def _starts(n: int = 0) -> np.ndarray:
    return np.zeros(n + 1, dtype=np.int64)


@dataclass(eq=False)
class RequestColumns:
    """Per-request columns (see the module docstring for the layout)."""

    index: np.ndarray = field(default_factory=_i64)
    sent_ns: np.ndarray = field(default_factory=_i64)
    scheduled_ns: np.ndarray = field(default_factory=_i64)
    connect_ns: np.ndarray = field(default_factory=_i64)
    end_ns: np.ndarray = field(default_factory=_i64)
    prompt_tokens: np.ndarray = field(default_factory=_i64)
    output_tokens: np.ndarray = field(default_factory=_i64)
    expected_prompt_tokens: np.ndarray = field(default_factory=_i64)
    chunk_ns: np.ndarray = field(default_factory=_i64)
    offsets: np.ndarray = field(default_factory=_starts)
    chunk_tokens: np.ndarray = field(default_factory=_i64)
    token_offsets: np.ndarray = field(default_factory=_starts)
    error: np.ndarray = field(default_factory=_i32)
    errors: list[str] = field(default_factory=list)
    finish: np.ndarray = field(default_factory=_i32)
    finish_reasons: list[str] = field(default_factory=list)
    tag: np.ndarray = field(default_factory=_i32)
    tags: list[str] = field(default_factory=list)
    host: np.ndarray = field(default_factory=_i32)
    hosts: list[str] = field(default_factory=list)
    count_source: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    warmup: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def __len__(self) -> int:
        return int(self.sent_ns.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (the text tables not counted)."""
        return sum(int(getattr(self, f.name).nbytes) for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray))

    # -- one request -------------------------------------------------------------------------------
    def chunks(self, i: int) -> np.ndarray:
        """Request ``i``'s chunk times (a view, int64 ns)."""
        return self.chunk_ns[self.offsets[i]:self.offsets[i + 1]]

    def record(self, i: int) -> RequestRecord:
        """Request ``i`` as a :class:`RequestRecord` (a new object: changing it leaves the columns)."""
        def opt(name: str) -> int | None:
            v = int(getattr(self, name)[i])
            return None if v == NONE else v

        r = RequestRecord(
            index=int(self.index[i]), tag=self.tags[self.tag[i]] if self.tag[i] >= 0 else "",
            scheduled_ns=opt("scheduled_ns"), sent_ns=int(self.sent_ns[i]), connect_ns=opt("connect_ns"),
            chunk_ns=self.chunks(i).tolist(),
            chunk_tokens=self.chunk_tokens[self.token_offsets[i]:self.token_offsets[i + 1]].tolist(),
            end_ns=opt("end_ns"), prompt_tokens=opt("prompt_tokens"), output_tokens=opt("output_tokens"),
            expected_prompt_tokens=opt("expected_prompt_tokens"), token_count_source=SOURCES[self.count_source[i]],
            finish_reason=self.finish_reasons[self.finish[i]] if self.finish[i] >= 0 else None,
            warmup=bool(self.warmup[i]), host=self.hosts[self.host[i]] if self.host[i] >= 0 else "")
        if self.error[i] >= 0:
            r.__dict__["error"] = self.errors[self.error[i]]  # cleaned once, as the table was built
        return r

    def dicts(self, block: int = 1 << 16) -> Iterator[dict[str, Any]]:
        """``vars(self.record(i))`` of every row, in order (a store's request lines), made a block
        of rows at a time from lists (~10x :meth:`record`'s speed; no RequestRecord is built)."""
        names = [f.name for f in fields(RequestRecord)]
        for lo in range(0, len(self), block):
            hi = min(len(self), lo + block)
            cols: dict[str, list[Any]] = {}
            for name in _INTS:
                v = getattr(self, name)[lo:hi].tolist()
                cols[name] = [None if x == NONE else x for x in v] if name in _OPTIONAL else v
            for code, table in _CODES:
                empty = "" if code in ("tag", "host") else None
                texts = [*getattr(self, table), empty]  # -1: the last
                cols["finish_reason" if code == "finish" else code] = [texts[k] for k in getattr(self, code)[lo:hi].tolist()]
            cols["token_count_source"] = [SOURCES[k] for k in self.count_source[lo:hi].tolist()]
            cols["warmup"] = self.warmup[lo:hi].tolist()
            off, toff = self.offsets[lo:hi + 1].tolist(), self.token_offsets[lo:hi + 1].tolist()
            flat = self.chunk_ns[off[0]:off[-1]]
            tflat = self.chunk_tokens[toff[0]:toff[-1]]
            o0, t0 = off[0], toff[0]
            chunks = (flat[a - o0:b - o0].tolist() for a, b in zip(off[:-1], off[1:], strict=True))
            tokens = (tflat[a - t0:b - t0].tolist() for a, b in zip(toff[:-1], toff[1:], strict=True))
            cols["chunk_ns"], cols["chunk_tokens"] = chunks, tokens  # type: ignore[assignment]
            yield from (dict(zip(names, row, strict=True)) for row in zip(*(cols[name] for name in names), strict=True))

    def records(self) -> list[RequestRecord]:
        """Every request as a :class:`RequestRecord`, in row order."""
        return [self.record(i) for i in range(len(self))]

    # -- whole columns -----------------------------------------------------------------------------
    @property
    def n_chunks(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def ok(self) -> np.ndarray:
        """Requests that did not fail (bool)."""
        return cast(np.ndarray, self.error < 0)

    @property
    def measured(self) -> np.ndarray:
        """Requests that count (warm-up excluded), failed ones included (bool): ``metrics.measured``."""
        return ~self.warmup

    @property
    def successful(self) -> np.ndarray:
        """Measured requests that succeeded with at least one chunk (bool): ``metrics.successful``."""
        return cast(np.ndarray, ~self.warmup & (self.error < 0) & (self.n_chunks > 0))

    def first_chunk_ns(self, rows: np.ndarray) -> np.ndarray:
        """First chunk time of each of ``rows`` (each must have a chunk)."""
        return cast(np.ndarray, self.chunk_ns[self.offsets[rows]])

    def last_chunk_ns(self, rows: np.ndarray) -> np.ndarray:
        """Last chunk time of each of ``rows`` (each must have a chunk)."""
        return cast(np.ndarray, self.chunk_ns[self.offsets[rows + 1] - 1])

    def out_tokens(self, rows: np.ndarray) -> np.ndarray:
        """N_out of each of ``rows``: the server's count, else the sum of its per-chunk tokens
        (``metrics.output_tokens``)."""
        got = self.output_tokens[rows]
        missing = got == NONE
        if missing.any():
            sums = np.add.reduceat(np.append(self.chunk_tokens, 0), self.token_offsets[:-1])  # an empty row: the next one's
            sums[np.diff(self.token_offsets) == 0] = 0
            got = np.where(missing, sums[rows], got)
        return cast(np.ndarray, got)

    def itl_gaps_and_ends(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The gaps between consecutive chunks of ``rows`` (in row order, each request's in chunk
        order) and the chunk time each gap ended at: ``metrics.itl_gaps_and_ends`` (int64 ns)."""
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        flat = self.chunk_ns
        if rows.size < 2 or (np.diff(rows) > 0).all():  # rows in order: a mask over the flat chunks
            chosen = np.zeros(len(self), dtype=bool)
            chosen[rows] = True
            inside = np.repeat(chosen, self.n_chunks)  # a chunk of a chosen request ...
            heads = self.offsets[:-1][self.n_chunks > 0]
            inside[heads] = False  # ... that is not its first: a gap ends there
            gaps = np.diff(flat)[inside[1:]]  # (one temporary of every gap)
            return gaps, flat[inside]
        take = _ranges(starts + 1, ends)  # every chunk but each request's first
        return flat[take] - flat[take - 1], flat[take]

    def take(self, rows: np.ndarray) -> RequestColumns:
        """The requests ``rows`` (int positions or a bool mask), in that order, as new columns."""
        rows = np.flatnonzero(rows) if rows.dtype == bool else rows
        chunk = _ranges(self.offsets[rows], self.offsets[rows + 1])
        toks = _ranges(self.token_offsets[rows], self.token_offsets[rows + 1])
        scalars: dict[str, Any] = {f.name: getattr(self, f.name)[rows] for f in fields(self)
                   if f.name not in ("chunk_ns", "offsets", "chunk_tokens", "token_offsets")
                   and isinstance(getattr(self, f.name), np.ndarray)}
        tables: dict[str, Any] = {t: list(getattr(self, t)) for _, t in _CODES}
        return RequestColumns(**scalars, **tables, chunk_ns=self.chunk_ns[chunk],
                              offsets=_offsets(np.diff(self.offsets)[rows]), chunk_tokens=self.chunk_tokens[toks],
                              token_offsets=_offsets(np.diff(self.token_offsets)[rows]))

    def sorted_by_sent(self) -> RequestColumns:
        """The rows in send order (stable: equal send times keep their order), as ``list.sort`` would."""
        order = np.argsort(self.sent_ns, kind="stable")
        return self if (order == np.arange(len(self))).all() else self.take(order)

    # -- building ----------------------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Sequence[RequestRecord]) -> RequestColumns:
        """Columns of ``records`` (in their order); ``OverflowError`` when a number is past int64."""
        n = len(records)
        ints: dict[str, Any] = {name: np.fromiter(((NONE if v is None else v) for r in records
                                   for v in (getattr(r, name),)), np.int64, n) for name in _INTS}
        tables: dict[str, Any] = {}
        for code, table in _CODES:
            attr = "finish_reason" if code == "finish" else code
            empty = "" if code in ("tag", "host") else None
            tables[code], tables[table] = _encode((getattr(r, attr) for r in records), n, empty)
        tables["errors"] = list(tables["errors"])  # already cleaned: RequestRecord.error cleans as set
        return cls(**ints, **tables,
                   chunk_ns=np.fromiter(itertools.chain.from_iterable(r.chunk_ns for r in records), np.int64),
                   offsets=_offsets(np.fromiter((len(r.chunk_ns) for r in records), np.int64, n)),
                   chunk_tokens=np.fromiter(itertools.chain.from_iterable(r.chunk_tokens for r in records), np.int64),
                   token_offsets=_offsets(np.fromiter((len(r.chunk_tokens) for r in records), np.int64, n)),
                   count_source=np.fromiter((SOURCES.index(r.token_count_source) for r in records), np.int8, n),
                   warmup=np.fromiter((r.warmup for r in records), bool, n))

    @classmethod
    def concat(cls, parts: Iterable[RequestColumns]) -> RequestColumns:
        """The rows of ``parts`` one after another (each part's text codes re-mapped)."""
        ps = list(parts)
        if not ps:
            return cls()
        out: dict[str, Any] = {}
        for code, table in _CODES:
            merged: dict[str, int] = {}
            arrays = []
            for p in ps:
                remap = np.asarray([merged.setdefault(t, len(merged)) for t in getattr(p, table)] + [-1], np.int32)
                arrays.append(remap[getattr(p, code)])  # -1 indexes the appended -1
            out[code], out[table] = np.concatenate(arrays), list(merged)
        for f in fields(cls):
            if f.name not in out and f.name not in ("offsets", "token_offsets"):
                out[f.name] = np.concatenate([getattr(p, f.name) for p in ps])
        out["offsets"] = _offsets(np.concatenate([np.diff(p.offsets) for p in ps]))
        out["token_offsets"] = _offsets(np.concatenate([np.diff(p.token_offsets) for p in ps]))
        return cls(**out)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Every position in ``[starts[k], ends[k])``, k in order, as one int64 array."""
    lens = np.maximum(ends - starts, 0)
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    keep = lens > 0
    s, ln = starts[keep], lens[keep]
    step = np.ones(total, dtype=np.int64)
    heads = np.zeros(s.size, dtype=np.int64)
    np.cumsum(ln[:-1], out=heads[1:])
    step[heads] = s - np.concatenate(([0], s[:-1] + ln[:-1] - 1))
    step[0] = s[0]
    return np.cumsum(step)


def _encode(values: Iterable[str | None], n: int, empty: str | None) -> tuple[np.ndarray, list[str]]:
    """int32 codes into a table of the distinct texts; ``empty`` (None or "") is code -1."""
    table: dict[str, int] = {}
    codes = np.fromiter((-1 if v is None or v == empty else table.setdefault(v, len(table)) for v in values),
                        np.int32, n)
    return codes, list(table)
