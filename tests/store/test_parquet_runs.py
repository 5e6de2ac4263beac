"""Run files in Parquet (store/runfiles.py, load/parquet.py): every record field round trips, as
records and as numpy columns (load/columns.py), an old ``runs/*.jsonl.gz`` run file is still read,
and the file is plain Parquet (read here with pyarrow alone)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pytest_perfgate.config import Thresholds
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load import parquet
from pytest_perfgate.load.columns import RequestColumns
from pytest_perfgate.load.parquet import columns_of, records_of, table_of, to_batch
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.store import records, runfiles
from pytest_perfgate.verdicts.verdict import evaluate

HOSTILE = "</script>\x1b[31m é \"'"


def _records() -> list[RequestRecord]:
    out = [RequestRecord(index=-1, warmup=True, sent_ns=5, chunk_ns=[6], chunk_tokens=[1], end_ns=7)]
    for i in range(40):
        t = 1_700_000_000_000_000_000 + i * 1_000_003
        out.append(RequestRecord(index=i, tag=HOSTILE if i == 3 else "plain", scheduled_ns=t - 10, sent_ns=t,
                                 connect_ns=None if i % 2 else 1234, chunk_ns=[t + 5 * k for k in range(1, i % 5 + 1)],
                                 chunk_tokens=[1 + k % 2 for k in range(i % 5)], end_ns=t + 99, prompt_tokens=8,
                                 output_tokens=i % 5, expected_prompt_tokens=None if i % 3 else 8,
                                 token_count_source="chunks" if i == 4 else "server", finish_reason="length",
                                 host="10.0.0.7" if i == 5 else ""))
    out.append(RequestRecord(index=40, error=f"HTTP 500: {HOSTILE}"))  # never sent: defaults everywhere
    return out


def _run(recs: list[RequestRecord]) -> RunResult:
    return RunResult(records=recs, counters_after={"x": 1.0}, engine_info={"name": "e", "nan": float("nan")},
                     config=LoadConfig(num_requests=41), start_ns=1, end_ns=2)


def test_every_field_round_trips_as_records_and_as_columns(tmp_path: Path) -> None:
    recs = _records()
    runfiles.write(tmp_path / "a.parquet", {"engine_info": {"name": "e"}}, recs)
    line, table = runfiles.read(tmp_path / "a.parquet")
    assert line == {"engine_info": {"name": "e"}}
    assert [dataclasses.asdict(r) for r in records_of(table)] == [dataclasses.asdict(r) for r in recs]
    cols = columns_of(table)  # numpy columns, and written again from them
    assert [dataclasses.asdict(r) for r in cols.records()] == [dataclasses.asdict(r) for r in recs]
    assert cols.records() == RequestColumns.from_records(recs).records()
    runfiles.write(tmp_path / "b.parquet", {}, cols)
    assert records_of(runfiles.read(tmp_path / "b.parquet")[1]) == recs
    assert table_of(cols).equals(table)
    assert cols.index.tolist() == [r.index for r in recs] and cols.chunks(3).tolist() == recs[3].chunk_ns
    assert len(columns_of(table.slice(0, 0))) == 0


def test_an_int_past_int64_is_dropped_not_fatal() -> None:
    rec = RequestRecord(index=0, output_tokens=10**30, chunk_ns=[1, 2**70], error="implausible")
    (back,) = records_of(to_batch([rec]))
    assert back.output_tokens is None and back.chunk_ns == [1, None] and back.error == "implausible"


def test_a_stored_run_is_parquet_and_an_old_jsonl_run_file_is_still_read(tmp_path: Path, th: Thresholds,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    g = th.gate("ttft")
    run = _run(_records())
    live = evaluate(g, run, thresholds=th)
    rel = records.write(tmp_path, gate=g, verdict=live, data=run, confidence=0.95, run_id="r1")
    lines = list(records.read_lines(tmp_path / rel))
    new = (tmp_path / rel).parent / lines[1]["path"]
    assert new.suffix == ".parquet" and pq.read_table(new).num_rows == len(run.records)
    assert records.data_files(tmp_path) == sorted([tmp_path / rel, new])
    stored = records.load(tmp_path / rel)
    assert stored.runs[0].records == run.records and stored.runs[0].engine_info == {"name": "e", "nan": None}
    assert records.reevaluate(stored, g, th).record.same(live.record)
    monkeypatch.setattr(parquet, "LIST_UP_TO", 10)  # a long run: read back as columns, the same verdict
    stored = records.load(tmp_path / rel)
    assert stored.runs[0].columnar() is not None and records.reevaluate(stored, g, th).record.same(live.record)
    assert stored.runs[0].records == run.records
    # the same run as an old run file: a run/1 header, the run line, one request line per record
    old = new.with_name("old.jsonl.gz")
    with gzip.open(old, "wt") as f:
        for x in [{"kind": "header", "schema": records.RUN_SCHEMA}, records._finite_json(records._run_line(0, run)),
                  *({"kind": "request", "run": 0, **dataclasses.asdict(r)} for r in run.records)]:
            f.write(json.dumps(x) + "\n")
    lines[1]["path"] = "runs/old.jsonl.gz"
    with gzip.open(tmp_path / rel, "wt") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    stored = records.load(tmp_path / rel)
    assert stored.runs[0].records == run.records and stored.runs[0].config == run.config
    assert records.reevaluate(stored, g, th).record.same(live.record)
