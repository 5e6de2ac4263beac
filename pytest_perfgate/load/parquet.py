"""Per-request records as Arrow columns: the batches client workers stream to their coordinator
(load/workers.py), the coordinator's spool and the Parquet run files of the store (store/runfiles.py).

* **One row per request, one column per** :class:`~pytest_perfgate.contract.RequestRecord` **field**
  (:data:`SCHEMA`); the chunk times and tokens are Arrow list columns (one flat int64 array of every
  chunk with offsets: no Python object per chunk). Integers are int64, a field that may be None is a
  nullable column; the strings (tag, error, finish reason, host) are Arrow strings.
* **A worker sends batches** (:func:`to_batch`, a pickled ``pyarrow.RecordBatch``) and the coordinator
  appends them to a zstd Parquet spool (:class:`Spool`) as they come: its memory holds no Python
  object per request. At the end the spool is read back once, in record order, as one Arrow table.
* **The run's records are then a view** (:class:`RecordView`): a ``Sequence[RequestRecord]`` that
  builds a record only when asked (iteration goes a slice of columns at a time); :meth:`RecordView.numpy`
  and :meth:`RecordView.chunks` give the numpy columns. A run of at most :data:`LIST_UP_TO` records
  is a plain list again (:func:`as_records`): code that indexes records at random stays as fast.

``pyarrow`` is imported only when these are used.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from ..contract import RequestRecord

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

INTS = ("index", "scheduled_ns", "sent_ns", "connect_ns", "end_ns", "prompt_tokens", "output_tokens",
        "expected_prompt_tokens")
LISTS = ("chunk_ns", "chunk_tokens")
STRINGS = ("tag", "token_count_source", "finish_reason", "error", "host")
BOOLS = ("warmup",)
FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))
LIST_UP_TO = 50_000  # a run of at most this many records is a list of RequestRecord (as_records)
SLICE = 4096  # rows turned into records at a time when a view is iterated
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
    file's footer, held in memory until the file is closed, with every batch)."""

    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        self.path = path
        self.rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._held = 0
        self._writer: Any = pq.ParquetWriter(str(path), schema(), compression="zstd")

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
            t = pq.read_table(str(self.path))
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
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class RecordView(Sequence[RequestRecord]):
    """The records of a run held as one Arrow table; a RequestRecord is built only when asked."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table if all(c.num_chunks == 1 for c in table.columns) else table.combine_chunks()

    def __len__(self) -> int:
        return int(self.table.num_rows)

    @overload
    def __getitem__(self, i: int) -> RequestRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[RequestRecord]: ...

    def __getitem__(self, i: int | slice) -> RequestRecord | list[RequestRecord]:
        n = len(self)
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            got = records_of(self.table, start, max(start, stop)) if step == 1 else [self[j] for j in range(start, stop, step)]
            return got
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError("record index out of range")
        return records_of(self.table, j, j + 1)[0]

    def __iter__(self) -> Iterator[RequestRecord]:
        for start in range(0, len(self), SLICE):
            yield from records_of(self.table, start, min(start + SLICE, len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def numpy(self, name: str) -> np.ndarray:
        """Scalar column ``name`` as numpy (int64, or float64 with NaN where it is None)."""
        import numpy as np

        col = self.table.column(name)
        if col.null_count:
            return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
        return np.asarray(col.to_numpy())

    def chunks(self, name: str = "chunk_ns") -> tuple[np.ndarray, np.ndarray]:
        """List column ``name`` as (every value, flat int64; offsets: row i's values are
        ``values[offsets[i]:offsets[i + 1]]``)."""
        import numpy as np

        col = self.table.column(name).chunk(0) if self.table.num_rows else None
        if col is None:
            return np.zeros(0, np.int64), np.zeros(1, np.int64)
        offsets = col.offsets.to_numpy()
        return col.values.to_numpy(), offsets


def as_records(table: pa.Table) -> Sequence[RequestRecord]:
    """A run's records: a list up to :data:`LIST_UP_TO` of them, a :class:`RecordView` beyond."""
    return records_of(table) if table.num_rows <= LIST_UP_TO else RecordView(table)
