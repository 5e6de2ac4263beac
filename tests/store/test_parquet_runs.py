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


DOC_PATH = "samples/<run_id>/runs/<engine>-<id>.parquet"


def _documented_one_liners() -> list[str]:
    """The read-it-in-one-line lines of docs/reports.md's Parquet section, as written there."""
    doc = (Path(__file__).parents[2] / "docs" / "reports.md").read_text()
    lines = [ln.split("  #")[0].strip() for ln in doc.splitlines() if DOC_PATH in ln and ln.strip().endswith(
        ("# pandas (with pyarrow)", "# polars", "# DuckDB", "# pyarrow (a perfgate dependency)"))]
    assert len(lines) == 4, lines
    return lines


def test_the_documented_one_liners_read_a_runs_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: the per-request samples that `perfgate gate` stores are read by the one-liners of
    docs/reports.md (and README.md) with pandas, polars and DuckDB, every row and column."""
    import duckdb
    import pandas
    import polars
    import pyarrow

    from pytest_perfgate.cli import main

    export = Path(__file__).parents[1] / "imports" / "data" / "vllm-bench-serve.json"
    (tmp_path / "thresholds.toml").write_text('[phases.p]\n[gates.ttft_p50]\nphase = "p"\nmetric = "ttft"\n'
                                              'statistic = "p50"\nmax = "10 s"\n')
    assert main(["gate", str(export), "--thresholds", str(tmp_path / "thresholds.toml"), "--out",
                 str(tmp_path / "out")]) == 0
    (stored,) = (tmp_path / "out").glob("samples/*/runs/*.parquet")
    rel = str(stored.relative_to(tmp_path / "out"))
    monkeypatch.chdir(tmp_path / "out")
    _, table = runfiles.read(stored)
    want = table.to_pylist()
    assert len(want) == len(json.loads(export.read_text())["ttfts"]) > 0
    names = {"pandas": pandas, "polars": polars, "duckdb": duckdb, "pyarrow": pyarrow}
    for line in _documented_one_liners():
        got = eval(line.replace(DOC_PATH, rel), names)  # noqa: S307 - the documentation's own line
        if isinstance(got, pandas.DataFrame):
            rows = got.to_dict("records")
            rows = [{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in r.items()} for r in rows]
        elif isinstance(got, polars.DataFrame):
            rows = got.to_dicts()
        elif isinstance(got, pyarrow.Table):
            rows = got.to_pylist()
        else:  # a DuckDB relation
            rows = [dict(zip(got.columns, r, strict=True)) for r in got.fetchall()]
        assert list(rows[0]) == list(want[0]) == list(parquet.FIELDS), line
        assert len(rows) == len(want), line
        for col in ("index", "sent_ns", "chunk_ns", "output_tokens"):
            assert [r[col] for r in rows] == [w[col] for w in want], (line, col)
    readme = (Path(__file__).parents[2] / "README.md").read_text()  # README's short forms, path a variable
    for line in ('pandas.read_parquet(path)', 'polars.read_parquet(path)', '''duckdb.sql("SELECT * FROM 'path'")'''):
        assert f"`{line}`" in readme
        got = eval(line.replace("'path'", f"'{rel}'"), {**names, "path": rel})  # noqa: S307
        assert (len(got.fetchall()) if hasattr(got, "fetchall") else len(got)) == len(want), line
    run = json.loads(pyarrow.parquet.read_schema(rel).metadata[b"perfgate.run"])  # the run, as documented
    assert isinstance(run, dict) and run
