"""A load run's per-request records on disk: ``samples/<run_id>/runs/<name>.parquet`` (store/records.py).

* **Parquet, zstd, one row per request** (load/parquet.py's schema: every ``RequestRecord`` field a
  column; the chunk times and tokens int64 list columns). The run itself (engine info, load config,
  counters, gauges, health, ...: store/records.py's ``run`` line) is JSON in the file's key-value
  metadata under ``perfgate.run``, beside ``perfgate.schema`` = :data:`SCHEMA`.
* **Readable anywhere in one line** (docs/reports.md): ``pandas.read_parquet(path)``,
  ``polars.read_parquet(path)``, ``duckdb.sql("SELECT * FROM 'path'")``, ``pyarrow.parquet.read_table(path)``.
* Run files written before (``runs/<name>.jsonl.gz``, schema ``pytest-perfgate/run/1``) are still
  read, by store/records.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..contract import RequestRecord
from ..load.columns import RequestColumns
from ..load.parquet import schema, table_of, to_batch
from ..runtime.links import open_nofollow

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = "pytest-perfgate/run/2"
SUFFIX = ".parquet"
ROWS = 65_536  # records per row group (and per batch converted at a time)
# the chunk times and tokens: delta-encoded integers (sorted within a request), no dictionary (a
# 1M-request run's 31M distinct times: 2.3 s with the default dictionary try, 1.2 s and 17% smaller so)
ENCODING = {"chunk_ns.list.element": "DELTA_BINARY_PACKED", "chunk_tokens.list.element": "DELTA_BINARY_PACKED"}
ENCODED = ("chunk_ns", "chunk_tokens")


def write(tmp: Path, run_line: dict[str, Any], records: Sequence[RequestRecord] | RequestColumns) -> None:
    """The run file at ``tmp`` (opened ``O_NOFOLLOW``): ``records`` as rows, ``run_line`` (JSON,
    finite numbers only) in the metadata. A run held as columns is written from them."""
    import pyarrow.parquet as pq

    meta = {b"perfgate.schema": SCHEMA.encode(),
            b"perfgate.run": json.dumps(run_line, allow_nan=False, default=str, separators=(",", ":")).encode()}
    sch = schema().with_metadata(meta)
    dictionary = [f.name for f in sch if f.name not in ENCODED]  # the other columns: the default dictionary
    with os.fdopen(open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as raw, \
            pq.ParquetWriter(raw, sch, compression="zstd", use_dictionary=dictionary, column_encoding=ENCODING) as w:
        if isinstance(records, RequestColumns):
            w.write_table(table_of(records).replace_schema_metadata(meta), row_group_size=ROWS)
        else:
            for start in range(0, len(records), ROWS):
                w.write_batch(to_batch(records[start:start + ROWS]))
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # the table's and pages' buffers (~150 MB at 1M requests)


def read(path: Path) -> tuple[dict[str, Any], pa.Table]:
    """The run line and the records (one row each) of run file ``path``; ValueError when it is no
    perfgate run file, OSError when it cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(str(path))
    except pa.ArrowException as e:
        raise ValueError(f"not a Parquet file ({str(e)[:200]})") from None
    meta = table.schema.metadata or {}
    if meta.get(b"perfgate.schema") != SCHEMA.encode():
        raise ValueError(f"not a perfgate run file (no {SCHEMA} schema in its metadata)")
    try:
        line = json.loads(meta[b"perfgate.run"])
    except (KeyError, ValueError):
        raise ValueError("no run in its metadata") from None
    if not isinstance(line, dict):
        raise ValueError("its run metadata is not a JSON object")
    return line, table.replace_schema_metadata(None)
