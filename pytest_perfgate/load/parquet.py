"""Per-request records as Arrow columns: the batches client workers stream to their coordinator
(load/workers.py), the coordinator's spool and the Parquet run files of the store (store/runfiles.py).

* **One row per request, one column per** :class:`~pytest_perfgate.contract.RequestRecord` **field**
  (:data:`SCHEMA`); the chunk times and tokens are Arrow list columns (one flat int64 array of every
  chunk with offsets: no Python object per chunk). Integers are int64, a field that may be None is a
  nullable column; the strings (tag, error, finish reason, host) are Arrow strings.
* **A worker sends batches** (:func:`to_batch`, a pickled ``pyarrow.RecordBatch``) and the coordinator
  appends them to a zstd Parquet spool (:class:`Spool`) as they come: its memory holds no Python
  object per request. At the end the spool is read back once, in record order, as one Arrow table.
* **The run's records are then columns** (:func:`run_of`: ``RunResult.from_columns`` with
  load/columns.py's :class:`~pytest_perfgate.load.columns.RequestColumns`, :func:`columns_of`): the
  metrics and verdicts read numpy arrays, ``RunResult.records`` is made from them only when asked.
  A run of at most :data:`LIST_UP_TO` records is a list of RequestRecord, as before.

``pyarrow`` is imported only when these are used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..contract import RequestRecord

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from .columns import RequestColumns
    from .result import RunResult

INTS = ("index", "scheduled_ns", "sent_ns", "connect_ns", "end_ns", "prompt_tokens", "output_tokens",
        "expected_prompt_tokens")
LISTS = ("chunk_ns", "chunk_tokens")
STRINGS = ("tag", "token_count_source", "finish_reason", "error", "host")
BOOLS = ("warmup",)
FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))
LIST_UP_TO = 50_000  # a run of at most this many records is a list of RequestRecord (run_of)
GROUP = 65_536  # rows per row group of the coordinator's spool
_INT64 = (-(2**63), 2**63 - 1)


def schema() -> pa.Schema:
    """The Arrow schema of a record batch: every RequestRecord field, in its order."""
    import pyarrow as pa

    kinds = {**dict.fromkeys(INTS, pa.int64()), **dict.fromkeys(LISTS, pa.list_(pa.int64())),
             **dict.fromkeys(STRINGS, pa.string()), **dict.fromkeys(BOOLS, pa.bool_())}
    return pa.schema([pa.field(name, kinds[name], nullable=name not in ("index", "sent_ns", "warmup"))
                      for name in FIELDS])


def _ints(values: list[Any]) -> list[Any]:
    """Values an int64 column holds: an integer beyond int64 (an implausible usage count a server
    sent; that request already failed, load/plausible.py) is kept as None."""
    lo, hi = _INT64
    return [v if v is None or lo <= v <= hi else None for v in values]


def to_batch(records: Sequence[RequestRecord]) -> pa.RecordBatch:
    """``records`` as one Arrow record batch (:func:`schema`)."""
    import pyarrow as pa

    sch = schema()
    cols = []
    for f in sch:
        values = [getattr(r, f.name) for r in records]
        try:
            cols.append(pa.array(values, type=f.type))
        except (OverflowError, pa.ArrowInvalid):
            cols.append(pa.array([_ints(v) for v in values] if f.name in LISTS else _ints(values), type=f.type))
    return pa.RecordBatch.from_arrays(cols, schema=sch)


def records_of(table: pa.Table | pa.RecordBatch, start: int = 0, stop: int | None = None) -> list[RequestRecord]:
    """Rows ``start:stop`` of ``table`` as RequestRecords (a column's unknown fields are ignored; a
    missing one takes the record's default)."""
    part = table.slice(start, (stop if stop is not None else table.num_rows) - start)
    names = [n for n in part.schema.names if n in FIELDS]
    columns = [part.column(n).to_pylist() for n in names]
    return [RequestRecord(**dict(zip(names, row, strict=True))) for row in zip(*columns, strict=True)]


def shifted(batch: pa.RecordBatch, d: int, host: str) -> pa.RecordBatch:
    """``batch`` (stamped on a host, load/ray_workers.py) with every stamp moved by ``-d`` ns (as
    load/clocks.py's ``to_coordinator``: a sent_ns of 0 stays 0) and its host named."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = {n: batch.column(n) for n in batch.schema.names}
    for n in ("scheduled_ns", "end_ns"):
        cols[n] = pc.subtract(cols[n], d)
    sent = cols["sent_ns"]
    cols["sent_ns"] = pc.if_else(pc.equal(sent, 0), sent, pc.subtract(sent, d))
    chunks = cols["chunk_ns"]
    cols["chunk_ns"] = pa.ListArray.from_arrays(chunks.offsets, pc.subtract(chunks.values, d))
    cols["host"] = pa.array([host] * batch.num_rows, type=pa.string())
    return pa.RecordBatch.from_arrays([cols[n] for n in batch.schema.names], schema=batch.schema)


class Spool:
    """A zstd Parquet file the coordinator appends record batches to as they come (module doc), one
    row group per :data:`GROUP` rows (a worker's batches are small: a row group each would grow the
    file's footer, held in memory until the file is closed, with every batch).

    The file has no name: ``tempfile.TemporaryFile`` (O_TMPFILE, or unlinked as soon as made), so a
    coordinator killed mid-run (SIGKILL, the CI job's timeout) leaves nothing behind in the temporary
    folder; before, one ``perfgate-run-*.parquet`` a killed run stayed there."""

    def __init__(self) -> None:
        import tempfile

        import pyarrow.parquet as pq

        self.rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._held = 0
        self._file = tempfile.TemporaryFile(prefix="perfgate-run-", suffix=".parquet")
        self._writer: Any = pq.ParquetWriter(self._file, schema(), compression="zstd")

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._pending.append(batch)
            self._held += batch.num_rows
            self.rows += batch.num_rows
            if self._held >= GROUP:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._pending:
            self._writer.write_table(pa.Table.from_batches(self._pending).combine_chunks(), row_group_size=GROUP * 2)
            self._pending, self._held = [], 0

    def table(self) -> pa.Table:
        """Close the file and read it back once, in record order (warm-ups first, -1, -2, ..., then
        the measured requests by index), one column at a time (at most one column is held twice);
        the file is removed."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._flush()
        self._writer.close()
        try:
            self._file.seek(0)
            t = pq.read_table(self._file)
        finally:
            self.discard()
        idx = t.column("index").to_numpy()
        order = pa.array(np.lexsort((np.abs(idx), ~t.column("warmup").to_numpy(zero_copy_only=False))))
        del idx
        sch, cols = t.schema, []
        while t.num_columns:
            col = t.column(0)
            t = t.remove_column(0)
            cols.append(col.take(order).combine_chunks())
            del col
        return pa.Table.from_arrays(cols, schema=sch)

    def discard(self) -> None:
        try:
            self._writer.close()
        except Exception:  # already closed, or the write failed
            pass
        self._file.close()


def columns_of(table: pa.Table) -> RequestColumns:
    """``table`` (:func:`schema`'s columns) as :class:`~pytest_perfgate.load.columns.RequestColumns`
    (numpy; a null int is ``columns.NONE``, a text a code into its table)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .columns import NONE, SOURCES, RequestColumns

    t = table.combine_chunks()
    kw: dict[str, Any] = {n: np.asarray(t.column(n).fill_null(NONE).to_numpy(), dtype=np.int64) for n in INTS}
    for name, values, starts in (("chunk_ns", "chunk_ns", "offsets"), ("chunk_tokens", "chunk_tokens", "token_offsets")):
        col = t.column(name).chunk(0) if t.num_rows else pa.array([], pa.list_(pa.int64()))
        off = np.asarray(col.offsets.to_numpy(), dtype=np.int64)
        kw[values] = np.asarray(col.values.fill_null(NONE).to_numpy()[off[0]:off[-1]], dtype=np.int64)
        kw[starts] = off - off[0]
    for name, code, table_name in (("error", "error", "errors"), ("finish_reason", "finish", "finish_reasons"),
                                   ("tag", "tag", "tags"), ("host", "host", "hosts")):
        col = t.column(name)
        if name in ("tag", "host"):  # "" is code -1, as RequestColumns encodes it
            col = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
        enc = pc.dictionary_encode(col).combine_chunks() if t.num_rows else None
        kw[code] = (np.zeros(0, np.int32) if enc is None else
                    np.asarray(enc.indices.fill_null(-1).to_numpy(), dtype=np.int32))
        kw[table_name] = [] if enc is None else enc.dictionary.to_pylist()
    src = t.column("token_count_source").fill_null(SOURCES[0]).to_numpy(zero_copy_only=False)
    kw["count_source"] = np.zeros(t.num_rows, np.int8)
    for k, name in enumerate(SOURCES):
        kw["count_source"][src == name] = k
    kw["warmup"] = np.asarray(t.column("warmup").fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    return RequestColumns(**kw)


def table_of(c: RequestColumns) -> pa.Table:
    """:class:`~pytest_perfgate.load.columns.RequestColumns` as an Arrow table (:func:`schema`). The
    arrays are made from their numpy buffers (``pa.Array.from_buffers``): ``pa.array`` imports pandas
    where it is installed (~0.5 s of a 1M-request ``perfgate gate``), and copies nothing more here."""
    import numpy as np
    import pyarrow as pa

    from .columns import NONE, SOURCES

    def valid(missing: np.ndarray) -> pa.Buffer | None:  # Arrow's validity bitmap (bit set: a value)
        return pa.py_buffer(np.packbits(~missing, bitorder="little")) if missing.any() else None

    def ints(a: np.ndarray, width: Any = None) -> pa.Array:
        a = np.ascontiguousarray(a, dtype=np.int64 if width is None else np.int32)
        return pa.Array.from_buffers(pa.int64() if width is None else pa.int32(), a.size,
                                     [valid(a == NONE) if width is None else None, pa.py_buffer(a)])

    def texts(codes: np.ndarray, table: Sequence[str], absent: str | None) -> pa.Array:
        """Strings by their codes in ``table`` (a negative code: ``absent``, None a null)."""
        words = [t.encode() for t in table]
        ends = np.cumsum([0, *map(len, words)], dtype=np.int32)
        picked = np.asarray(codes, dtype=np.int64)
        missing = picked < 0
        if absent is not None and missing.any():  # the absent text as one more entry of the table
            words.append(absent.encode())
            ends = np.append(ends, ends[-1] + len(words[-1])).astype(np.int32)
            picked, missing = np.where(missing, len(words) - 1, picked), np.zeros_like(missing)
        dictionary = pa.Array.from_buffers(pa.string(), len(words), [None, pa.py_buffer(ends), pa.py_buffer(b"".join(words))])
        idx = np.where(missing, 0, picked)
        return dictionary.take(pa.Array.from_buffers(pa.int64(), idx.size, [valid(missing), pa.py_buffer(idx)]))

    def lists(values: np.ndarray, offsets: np.ndarray) -> pa.Array:
        return pa.ListArray.from_arrays(ints(offsets, np.int32), ints(values))

    cols = {n: ints(getattr(c, n)) for n in INTS}
    warm = np.asarray(c.warmup, dtype=bool)
    cols.update(chunk_ns=lists(c.chunk_ns, c.offsets), chunk_tokens=lists(c.chunk_tokens, c.token_offsets),
                tag=texts(c.tag, c.tags, ""), host=texts(c.host, c.hosts, ""), error=texts(c.error, c.errors, None),
                finish_reason=texts(c.finish, c.finish_reasons, None),
                warmup=pa.Array.from_buffers(pa.bool_(), warm.size, [None, pa.py_buffer(np.packbits(warm, bitorder="little"))]),
                token_count_source=texts(c.count_source, SOURCES, None))
    sch = schema()
    return pa.Table.from_arrays([cols[f.name] for f in sch], schema=sch)


def run_of(table: pa.Table, **kw: Any) -> RunResult:
    """A run whose records are ``table``: a list of RequestRecord up to :data:`LIST_UP_TO` of them,
    the columns beyond (``RunResult.from_columns``: the metrics and verdicts read them)."""
    from .result import RunResult

    if table.num_rows <= LIST_UP_TO:
        return RunResult(records=records_of(table), **kw)
    run: RunResult = RunResult.from_columns(columns_of(table), **kw)
    return run
