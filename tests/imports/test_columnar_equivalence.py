"""Issue 41: the columnar import (streamed, msgspec, numpy columns) gives every metric's samples,
every count and every verdict exactly as the record path did, on every committed export."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_perfgate.config import metrics as metric_names
from pytest_perfgate.imports import ImportedRun, ResultsError, load_results, vllm_bench
from pytest_perfgate.imports import jsondoc as j
from pytest_perfgate.roofline.gates import workload_from_run
from pytest_perfgate.verdicts.samples import SampleError

DATA = Path(__file__).parent / "data"
METRICS = [*metric_names.from_source(metric_names.RECORDS), "queue_time", "error_rate", "output_throughput",
           "request_throughput", "goodput"]


def _data(run: ImportedRun, name: str) -> Any:
    try:
        d = run.perfgate_data(name)
    except SampleError as e:
        return ("error", str(e))
    out = dataclasses.asdict(d)
    for k, v in list(out.items()):
        if isinstance(v, np.ndarray):
            out[k] = (str(v.dtype), v.tolist())
    return out


def _everything(run: ImportedRun) -> dict[str, Any]:
    got = {name: _data(run, name) for name in dict.fromkeys(METRICS)}
    got["counts"] = dataclasses.asdict(run.request_counts())
    got["errors"] = dict(run.errors())
    got["notes"] = run.notes()
    got["summary"] = run.summary()
    got["requests_for"] = run.requests_for(1000, 500)
    got["span"] = (run.start_ns, run.end_ns, run.engine_info)
    got["workload"] = workload_from_run(run)
    return got


def _old(path: Path, warmup: int = 0) -> ImportedRun:
    run = vllm_bench.run_of(path, j.load(path), consume=True).drop_implausible()
    for r in run.records[:warmup]:
        r.warmup = True
    return run


@pytest.mark.parametrize("warmup", [0, 3])
def test_vllm_bench_columns_equal_the_record_path(warmup: int) -> None:
    path = DATA / "vllm-bench-serve.json"
    new = load_results(path, warmup=warmup)
    assert new.columnar() is not None  # the committed export takes the fast path
    old = _old(path, warmup)
    assert _everything(new) == _everything(old)
    assert new.columnar() is not None  # and nothing above made records of it
    with_tokens = _variant_run(path, lambda v: [0 if i % 2 else x for i, x in enumerate(v)])
    assert workload_from_run(with_tokens) == workload_from_run(_old(Path(str(with_tokens.source.path))))
    assert [dataclasses.asdict(r) for r in new.records] == [dataclasses.asdict(r) for r in old.records]


def _variant_run(path: Path, f: Any) -> ImportedRun:
    """The export with its input_lens changed by ``f`` (zeros: left out of the median workload)."""
    doc = json.loads(path.read_text())
    doc["input_lens"] = f(doc["input_lens"])
    doc["input_lens"][1] = 7  # an even count of requests left: the mean of the middle two
    out = Path(_TMP[0]) / "tokens.json"
    out.write_text(json.dumps(doc))
    return load_results(out)


_TMP: list[str] = []


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path) -> None:
    _TMP[:] = [str(tmp_path)]


def _variant(tmp_path: Path, **change: Any) -> Path:
    doc = json.loads((DATA / "vllm-bench-serve.json").read_text())
    for k, f in change.items():
        doc[k] = f(doc[k])
    out = tmp_path / "bench.json"
    out.write_text(json.dumps(doc))
    return out


VARIANTS: dict[str, dict[str, Any]] = {
    "failed": {"errors": lambda e: ["HTTP 500: boom" if i % 5 == 2 else x for i, x in enumerate(e)],
               "itls": lambda rows: [[] if i % 5 == 2 else r for i, r in enumerate(rows)]},
    "one token": {"output_lens": lambda v: [1 if i % 4 == 0 else x for i, x in enumerate(v)]},
    "no queue": {"queue_times": lambda v: None},
    "unsorted": {"start_times": lambda v: [x + (3.0 if i % 3 == 0 else 0.0) for i, x in enumerate(v)]},
    "NaN gap": {"itls": lambda rows: [[float("nan")] + r if i == 4 else r for i, r in enumerate(rows)]},
    "string gap": {"itls": lambda rows: [["x"] + r if i == 4 else r for i, r in enumerate(rows)]},
    "huge count": {"output_lens": lambda v: [10**12 if i == 2 else x for i, x in enumerate(v)]},
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variants_decide_as_the_record_path(tmp_path: Path, name: str) -> None:
    """Failures, undefined TPOT, no queue times, send order: columns; a bad entry: the old path."""
    path = _variant(tmp_path, **VARIANTS[name])
    try:
        old: Any = _everything(_old(path))
    except ValueError as e:
        old = str(e)
    try:
        new: Any = _everything(load_results(path))
    except ValueError as e:
        new = str(e)
    assert new == old


@pytest.mark.parametrize("name,columnar", [("failed", True), ("one token", True), ("no queue", True),
                                           ("unsorted", True), ("NaN gap", False), ("string gap", False)])
def test_which_files_take_the_columns(tmp_path: Path, name: str, columnar: bool) -> None:
    path = _variant(tmp_path, **VARIANTS[name])
    if columnar:
        assert load_results(path).columnar() is not None
    else:  # the old path names the request and field
        with pytest.raises(ResultsError, match=r"bench.json: request 4\[0\]: field 'itls': not a finite number"):
            load_results(path)


def _old_of(fmt: Any, path: Path) -> ImportedRun:
    return fmt._read_records(path, *( [fmt.token_counts(path)] if hasattr(fmt, "token_counts") else []))[0][1] \
        .drop_implausible()


@pytest.mark.parametrize("rel", ["aiperf/profile_export.jsonl", "inference-perf/per_request_lifecycle_metrics.json"])
def test_peer_exports_columns_equal_the_record_path(rel: str) -> None:
    from pytest_perfgate.imports import aiperf, inference_perf

    path = DATA / rel
    fmt = aiperf if rel.startswith("aiperf") else inference_perf
    new = load_results(path)
    assert new.columnar() is not None
    old = _old_of(fmt, path)
    assert _everything(new) == _everything(old)
    assert [dataclasses.asdict(r) for r in new.records] == [dataclasses.asdict(r) for r in old.records]


@pytest.mark.parametrize("kind", ["aiperf", "inference_perf"])
def test_generated_peer_files_equal_the_record_path(tmp_path: Path, kind: str) -> None:
    """The scripted files of peer_files.py: a failed request, warm-up, client token counts."""
    import peer_files

    from pytest_perfgate.imports import aiperf, inference_perf

    if kind == "aiperf":
        paths = [peer_files.aiperf(tmp_path / "a.jsonl", warmup=2, server_counts=True)]
        fmt: Any = aiperf
    else:
        paths = [peer_files.inference_perf(tmp_path / "i.json", server_usage=s) for s in (True,)]
        paths.append(peer_files.inference_perf(tmp_path / "j.json", server_usage=False))
        fmt = inference_perf
    for path in paths:
        new = load_results(path)
        assert new.columnar() is not None
        assert _everything(new) == _everything(_old_of(fmt, path))


def _guidellm_variants(tmp_path: Path) -> dict[str, Path]:
    """The scripted guidellm files, and ones whose cuts are not where a byte search first looks."""
    import peer_files

    out = {"one": peer_files.guidellm(tmp_path / "g1.json"),
           "sweep": peer_files.guidellm(tmp_path / "g3.json", levels=3, kept=5),
           "v1": peer_files.guidellm(tmp_path / "gv1.json", version=1)}
    doc = json.loads(out["sweep"].read_text())
    for k, b in enumerate(doc["benchmarks"]):
        reqs = b["requests"]
        for i, q in enumerate(reqs["successful"]):  # inner lists of objects, "}, {" and "}]" in strings
            q["request_args"] = {"body": {"messages": [{"role": "user", "content": "a}, {b"},
                                                       {"role": "assistant", "content": '"}]'}]}}
            q["output"] = "x" * (q["output_tokens"] - 1) + ("}" if i % 2 else "\\")
        if k == 1:  # errored before successful, no incomplete, an empty list
            b["requests"] = {"errored": reqs["errored"], "successful": reqs["successful"], "incomplete": []}
    out["nested"] = tmp_path / "nested.json"
    out["nested"].write_text(json.dumps(doc))
    out["compact"] = tmp_path / "compact.json"
    out["compact"].write_text(json.dumps(doc, separators=(",", ":")))
    return out


@pytest.mark.parametrize("name", ["one", "sweep", "v1", "nested", "compact"])
def test_guidellm_streamed_columns_equal_the_whole_tree(tmp_path: Path, name: str) -> None:
    """Issue 41: benchmarks.json's request lists read an element at a time into columns give every
    sample, count, note and verdict the whole-tree record path gave."""
    from pytest_perfgate.imports import guidellm

    path = _guidellm_variants(tmp_path)[name]
    new = guidellm._streamed(path)
    assert new is not None  # the streamed path read it
    if name == "one":
        assert load_results(path).columnar() is not None  # and the reader takes it
    old = guidellm._read_tree(path)
    assert [lv for lv, _ in new] == [lv for lv, _ in old]
    for (_, n), (_, o) in zip(new, old, strict=True):
        assert n.columnar() is not None
        o = o.drop_implausible()
        assert _everything(n) == _everything(o)
        assert n.source == o.source
        assert [dataclasses.asdict(r) for r in n.records] == [dataclasses.asdict(r) for r in o.records]


@pytest.mark.parametrize("change,match", [
    (lambda s: s.replace('"output_tokens": 8', '"output_tokens": NaN', 1), "output_tokens"),
    (lambda s: s.replace('"request_start": ', '"request_begin": ', 1), r"field 'info.timings.request_start': "),
    (lambda s: s.replace('"errored": [', '"errored": {"x": [', 1).replace('], "incomplete"', ']}, "incomplete"', 1),
     "not a list"),
    (lambda s: s[:-40], "not valid JSON"),
])
def test_guidellm_files_the_stream_does_not_read_are_worded_as_before(tmp_path: Path, change: Any, match: str) -> None:
    """A value orjson does not read, a bad request, a list where none should be, a truncated file:
    the whole-tree path reads it, with its error naming the file and the request."""
    import peer_files

    from pytest_perfgate.imports import guidellm

    path = peer_files.guidellm(tmp_path / "g.json")
    text = change(json.dumps(json.loads(path.read_text())))
    assert text != path.read_text()
    path.write_text(text)
    try:
        old: Any = [(lv, _everything(r.drop_implausible())) for lv, r in guidellm._read_tree(path)]
    except ValueError as e:
        old = str(e)
    try:
        new: Any = [(lv, _everything(r)) for lv, r in guidellm.read(path)]
    except ValueError as e:
        new = str(e)
    assert new == old
    assert guidellm._streamed(path) is None
    assert isinstance(old, list) or match in old
