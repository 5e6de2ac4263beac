"""Data files: real runs stored and read back; re-evaluation gives the live verdict bit for bit."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from pytest_perfgate.calib import ScriptedServer
from pytest_perfgate.config import Thresholds
from pytest_perfgate.contract import Request
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.store import records, runfiles
from pytest_perfgate.verdicts.samples import Proportion, make_samples
from pytest_perfgate.verdicts.verdict import evaluate

HOSTILE = "</script><b>x</b> & \"'\x1b[31m"


def _requests(n: int, ttft: float | None = None, fault_every: int = 0) -> list[Request]:
    out = []
    for i in range(n):
        over: dict[str, object] = {"id": f"r{i}"}
        if ttft is not None:
            over["ttft"] = ttft
        if fault_every and i % fault_every == fault_every - 1:
            over.update(fault="status", status=500, body=HOSTILE)
        out.append(Request(prompt=tuple(range(1, 9)), max_tokens=8, tag=f"tag {HOSTILE}" if i == 0 else "plain",
                           extra={"perfgate": over}))
    return out


@pytest.fixture(scope="module")
def run(engine: OpenAIEngine, server: ScriptedServer) -> RunResult:
    return run_load(engine, _requests(24), LoadConfig(num_requests=24, warmup=2))


def _same(a: object, b: object) -> None:
    da, db = a.to_dict(), b.to_dict()  # type: ignore[attr-defined]
    for k in ("outcome", "observed", "lower", "upper", "n", "method", "summary"):
        assert da[k] == db[k], k


@pytest.mark.parametrize("gate", ["ttft", "itl", "acc"])
def test_real_run_round_trip_reevaluates_to_the_live_verdict(tmp_path: Path, th: Thresholds, run: RunResult,
                                                             gate: str) -> None:
    g = th.gate(gate)
    live = evaluate(g, run, thresholds=th)
    rel = records.write(tmp_path, gate=g, verdict=live, data=run, confidence=0.95, run_id="r1", test="t::x", seq=3)
    assert rel.as_posix() == f"samples/r1/0003-{gate}.jsonl.gz"
    stored = records.load(tmp_path / rel)
    assert stored.header["gate"] == gate and stored.header["verdict"]["outcome"] == live.outcome
    (back,) = stored.runs
    assert [dataclasses.asdict(r) for r in back.records] == [dataclasses.asdict(r) for r in run.records]
    assert back.counters_after == run.counters_after and back.engine_info == run.engine_info
    assert back.config == run.config
    _same(records.reevaluate(stored, g, th), live)


def test_every_request_field_is_kept_with_its_schema(tmp_path: Path, th: Thresholds, run: RunResult) -> None:
    g = th.gate("ttft")
    rel = records.write(tmp_path, gate=g, verdict=evaluate(g, run, thresholds=th), data=run, confidence=0.95,
                        run_id="r1")
    with gzip.open(tmp_path / rel, "rt") as f:
        top = [json.loads(x) for x in f]
    assert [x["kind"] for x in top] == ["header", "run_file", "data"]
    assert top[1]["path"].startswith("runs/") and top[1]["path"].endswith(".parquet")
    table = pq.read_table((tmp_path / rel).parent / top[1]["path"])  # the run file: Parquet, one row a request
    meta = table.schema.metadata
    assert meta[b"perfgate.schema"] == runfiles.SCHEMA.encode()
    line = json.loads(meta[b"perfgate.run"])
    assert table.num_rows == len(run.records) == 26
    for key in ("index", "tag", "sent_ns", "chunk_ns", "chunk_tokens", "end_ns", "prompt_tokens", "output_tokens",
                "error", "warmup", "finish_reason"):
        assert key in table.column_names, key
    assert line["engine_info"]["name"] == "scripted"
    assert top[-1] == {"kind": "data", "part": 0, "type": "run", "run": 0}


def test_failed_requests_and_hostile_text_survive(tmp_path: Path, th: Thresholds, engine: OpenAIEngine) -> None:
    res = run_load(engine, _requests(6, fault_every=3), LoadConfig(num_requests=6))
    g = th.gate("ttft")
    live = evaluate(g, res, thresholds=th)
    assert live.outcome == "error"  # 2 of 6 failed, error budget 0
    rel = records.write(tmp_path, gate=g, verdict=live, data=res, confidence=0.95, run_id="r2")
    stored = records.load(tmp_path / rel)
    errors = [r.error for r in stored.runs[0].records if r.error]
    assert len(errors) == 2 and all("HTTP 500" in e for e in errors)
    assert stored.runs[0].records[0].tag == f"tag {HOSTILE}"
    _same(records.reevaluate(stored, g, th), live)


def test_a_comparison_of_two_real_runs(tmp_path: Path, th: Thresholds, engine: OpenAIEngine) -> None:
    fast = run_load(engine, _requests(12, ttft=0.002), LoadConfig(num_requests=12))
    slow = run_load(engine, _requests(12, ttft=0.006), LoadConfig(num_requests=12))
    g = th.gate("speedup")
    live = evaluate(g, (fast, slow), thresholds=th)
    rel = records.write(tmp_path, gate=g, verdict=live, data=(fast, slow), confidence=0.95, run_id="r3")
    stored = records.load(tmp_path / rel)
    assert len(stored.runs) == 2 and isinstance(stored.data, tuple)
    _same(records.reevaluate(stored, g, th), live)


def test_interleaved_runs_of_each_side(tmp_path: Path, th: Thresholds, engine: OpenAIEngine) -> None:
    """The A B A B design (a list of runs a side, what the phase-1 throughput ratio passes) is kept run
    by run: each side's runs come back as a list and re-evaluate to the live verdict."""
    fast = [run_load(engine, _requests(6, ttft=0.002), LoadConfig(num_requests=6)) for _ in range(3)]
    slow = [run_load(engine, _requests(6, ttft=0.006), LoadConfig(num_requests=6)) for _ in range(3)]
    g = th.gate("speedup")
    live = evaluate(g, (fast, slow), thresholds=th)
    assert live.method.startswith("Welch t over runs (3 vs 3)")
    rel = records.write(tmp_path, gate=g, verdict=live, data=(fast, slow), confidence=0.95, run_id="r4")
    stored = records.load(tmp_path / rel)
    assert len(stored.runs) == 6 and [len(side) for side in stored.data] == [3, 3]
    assert all(isinstance(r, RunResult) for side in stored.data for r in side)
    _same(records.reevaluate(stored, g, th), live)
    samples = ([make_samples([1.0, 1.1], "s"), make_samples([1.2, 1.0], "s")], [make_samples([2.0, 2.2], "s")] * 2)
    live = evaluate(g, samples, thresholds=th)
    stored = records.load(tmp_path / records.write(tmp_path, gate=g, verdict=live, data=samples, confidence=0.95,
                                                   run_id="r5"))
    _same(records.reevaluate(stored, g, th), live)


def test_samples_and_proportions(tmp_path: Path, th: Thresholds) -> None:
    rng = np.random.default_rng(5)
    s = make_samples(rng.lognormal(np.log(80), 0.3, 333), "ms", label="lat")
    g = th.gate("lat")
    live = evaluate(g, s, thresholds=th, confidence=0.99)
    stored = records.load(tmp_path / records.write(tmp_path, gate=g, verdict=live, data=s, confidence=0.99, run_id="x"))
    assert np.array_equal(stored.data.values, s.values) and stored.data.unit == s.unit
    _same(records.reevaluate(stored, g, th), live)
    p = Proportion(77, 100, "acc", (("pos1", 0.8),))
    g = th.gate("acc")
    live = evaluate(g, p, thresholds=th)
    stored = records.load(tmp_path / records.write(tmp_path, gate=g, verdict=live, data=p, confidence=0.95, run_id="x"))
    assert stored.data == p
    _same(records.reevaluate(stored, g, th), live)


def test_bad_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(records.StoreError, match="not found"):
        records.load(tmp_path / "nope.jsonl.gz")
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(records.StoreError, match="bad.jsonl.gz"):
        records.load(bad)
    other = tmp_path / "other.jsonl.gz"
    with gzip.open(other, "wt") as f:
        f.write('{"kind": "header", "schema": "something/else"}\n')
    with pytest.raises(records.StoreError, match="not a perfgate samples file"):
        records.load(other)


def test_a_run_behind_several_verdicts_is_stored_once(tmp_path: Path, th: Thresholds, run: RunResult) -> None:
    rels = [records.write(tmp_path, gate=th.gate(g), verdict=evaluate(th.gate(g), run, thresholds=th), data=run,
                          confidence=0.95, run_id="r1", seq=i) for i, g in enumerate(("ttft", "itl", "acc"))]
    (run_file,) = (tmp_path / "samples" / "r1" / records.RUNS).iterdir()
    assert all((tmp_path / r).stat().st_size < run_file.stat().st_size for r in rels)
    assert all(s.runs[0] is run for s in (records.load(tmp_path / r, {}) for r in rels))  # the writer's own run
    records._LIVE.clear()  # as another process reads them: one copy, read once
    cache: dict[Path, RunResult] = {}
    stored = [records.load(tmp_path / r, cache) for r in rels]
    assert stored[0].runs[0] is stored[1].runs[0] is stored[2].runs[0] and list(cache) == [run_file.resolve()]
    assert stored[0].runs[0] is not run and records.load(tmp_path / rels[0]).runs[0] is not run
    for g, s in zip(("ttft", "itl", "acc"), stored, strict=True):
        _same(records.reevaluate(s, th.gate(g), th), evaluate(th.gate(g), run, thresholds=th))


def _old_layout(path: Path, header: dict[str, Any], run: RunResult) -> None:
    """A data file as schema 1 wrote it before run files: the run and its requests inline."""
    run_line = {k: (v.to_dict() if k == "config" and v is not None else v)
                for k, v in vars(run).items() if k != "records"}
    with gzip.open(path, "wt") as f:
        for line in [header, {"kind": "run", "run": 0, **run_line},
                     *({"kind": "request", "run": 0, **dataclasses.asdict(r)} for r in run.records),
                     {"kind": "data", "part": 0, "type": "run", "run": 0}]:
            f.write(json.dumps(line, default=str) + "\n")


def test_a_results_dir_in_the_old_layout_is_still_read(tmp_path: Path, th: Thresholds, run: RunResult) -> None:
    g = th.gate("ttft")
    live = evaluate(g, run, thresholds=th)
    rel = records.write(tmp_path, gate=g, verdict=live, data=run, confidence=0.95, run_id="r1")
    header = next(iter(records.read_lines(tmp_path / rel)))
    old = tmp_path / "old" / "samples" / "r0" / "0000-ttft.jsonl.gz"
    old.parent.mkdir(parents=True)
    _old_layout(old, header, run)
    stored = records.load(old)
    assert [dataclasses.asdict(r) for r in stored.runs[0].records] == [dataclasses.asdict(r) for r in run.records]
    assert stored.runs[0].config == run.config
    _same(records.reevaluate(stored, g, th), live)


def test_a_run_file_outside_its_folder_is_refused(tmp_path: Path, th: Thresholds, run: RunResult) -> None:
    g = th.gate("ttft")
    rel = records.write(tmp_path, gate=g, verdict=evaluate(g, run, thresholds=th), data=run, confidence=0.95,
                        run_id="r1")
    lines = list(records.read_lines(tmp_path / rel))
    lines[1]["path"] = "../../elsewhere.jsonl.gz"
    with gzip.open(tmp_path / rel, "wt") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(records.StoreError, match="is not in its runs/ folder"):
        records.load(tmp_path / rel)
