"""Issue 38 section 2: hostile benchmark exports in ``perfgate gate``. One bad file never stops the
command; no traceback; only regular files read, each with a size cap; garbage past finite/int64 and
absurd token counts are named per-request errors; every number stored stays finite."""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import peer_files as pf
import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.imports import ResultsError, jsondoc, load_results

DATA = Path(__file__).parent / "data"
REAL = DATA / "vllm-bench-serve.json"
GATES = """
[phases.p]
[gates.ttft_p50]
phase = "p"
metric = "ttft"
statistic = "p50"
max = "300 ms"
[gates.tpot_p50]
phase = "p"
metric = "tpot"
statistic = "p50"
max = "300 ms"
[gates.thr]
phase = "p"
metric = "output_throughput"
statistic = "mean"
min = "1 tok/s"
"""


def _gate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *files: str) -> tuple[int, str]:
    (tmp_path / "thresholds.toml").write_text(GATES)
    rc = main(["gate", "--thresholds", str(tmp_path / "thresholds.toml"), "--out", str(tmp_path / "out"), *files])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out + err


def _bench(tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], None]) -> Path:
    doc = json.loads(REAL.read_text())
    edit(doc)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def _recorded(tmp_path: Path) -> dict[str, Any]:
    doc = json.loads((tmp_path / "out" / "decisions.json").read_text())
    return {v["gate"] + (f"[{v['label']}]" if v.get("label") else ""): v for v in doc["phases"]["p"]["verdicts"]}


def _set(key: str, f: Callable[[Any], Any]) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc[key] = [f(v) for v in doc[key]]
    return edit


# -- item 1: one bad file stops nothing ------------------------------------------------------------
@pytest.mark.parametrize(("edit", "gate", "cause"), [
    (_set("output_lens", lambda v: 1), "tpot_p50", "undefined for every request"),
    (_set("ttfts", lambda v: -v), "ttft_p50", "negative duration"),
])
def test_a_gate_that_cannot_be_computed_on_one_file_is_its_error_the_rest_decided(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[dict[str, Any]], None], gate: str,
        cause: str) -> None:
    bad = _bench(tmp_path, "bad.json", edit)
    rc, out = _gate(tmp_path, capsys, str(bad), str(REAL))
    assert rc == 1 and "--baseline" not in out, out
    got = _recorded(tmp_path)
    assert got[f"{gate}[bad]"]["outcome"] == "error" and cause in got[f"{gate}[bad]"]["note"]
    assert str(bad) in got[f"{gate}[bad]"]["note"]  # named: the file
    assert got[f"{gate}[vllm-bench-serve]"]["outcome"] == "pass"
    for name in ("decisions.json", "gates.xml", "summary.md", "report.html", "history.sqlite"):
        assert (tmp_path / "out" / name).exists(), name


@pytest.mark.parametrize("value", [float("nan"), -5, 1e12, 1e308, 10**30])
def test_a_bad_token_count_is_that_requests_named_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        value: Any) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["output_lens"][3] = value
    bad = _bench(tmp_path, "bad.json", edit)
    run = load_results(bad)
    failed = [r for r in run.records if not r.ok]
    assert len(failed) == 1 and failed[0].error is not None and failed[0].error.startswith("implausible:")
    rc, out = _gate(tmp_path, capsys, str(bad), str(REAL))
    assert "implausible: output" in out and _recorded(tmp_path)["ttft_p50[vllm-bench-serve]"]["outcome"] == "pass"
    assert "not stored" not in out  # every verdict's samples stored


# -- item 2: no tracebacks -------------------------------------------------------------------------
def _deep(n: int = 5000) -> str:
    return "[" * n + "]" * n


def _hostile_files(tmp_path: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    out["deep-bench"] = _bench(tmp_path, "deep.json", lambda d: d.update(label=json.loads("[]")))
    out["deep-bench"].write_text(out["deep-bench"].read_text()[:-1] + ', "x": ' + _deep() + "}")
    g_deep = json.loads(pf.guidellm(tmp_path / "gd.json").read_text())
    g_deep["args"] = "@@"
    out["deep-guidellm"] = tmp_path / "gd.json"
    out["deep-guidellm"].write_text(json.dumps(g_deep).replace('"@@"', _deep()))
    ip = json.loads(pf.inference_perf(tmp_path / "ipd.json").read_text())
    ip[0]["info"]["extra_info"] = "@@"
    out["deep-inference-perf"] = tmp_path / "ipd.json"
    out["deep-inference-perf"].write_text(json.dumps(ip).replace('"@@"', _deep()))
    ai = _ai(tmp_path / "ai" / "profile_export.jsonl")
    lines = ai.read_text().splitlines()
    out["deep-aiperf"] = tmp_path / "deep-ai" / "profile_export.jsonl"
    out["deep-aiperf"].parent.mkdir()
    out["deep-aiperf"].write_text("\n".join([lines[0][:-1] + ', "x": ' + _deep() + "}", *lines[1:]]) + "\n")
    for tag in ("output_sequence_length", "input_sequence_length"):
        for word in ("NaN", "Infinity"):
            p = tmp_path / f"ai-{tag}-{word}" / "profile_export.jsonl"
            p.parent.mkdir()
            p.write_text(ai.read_text().replace(f'"{tag}":{{"value":8,', f'"{tag}":{{"value":{word},')
                         .replace(f'"{tag}":{{"value":64,', f'"{tag}":{{"value":{word},'))
            out[f"aiperf-{tag}-{word}"] = p
    g = json.loads(pf.guidellm(tmp_path / "g.json").read_text())
    for field in ("output_tokens", "prompt_tokens"):
        for word in ("NaN", "Infinity"):
            doc = copy.deepcopy(g)
            doc["benchmarks"][0]["requests"]["successful"][0][field] = "@@"
            p = tmp_path / f"g-{field}-{word}.json"
            p.write_text(json.dumps(doc).replace('"@@"', word))
            out[f"guidellm-{field}-{word}"] = p
    for where, value in (("config", [1]), ("strategy", "x"), ("scheduler_metrics", 3), ("requests_made", [2]),
                         ("incomplete", "many"), ("rate", 10**400)):
        doc = copy.deepcopy(g)
        b = doc["benchmarks"][0]
        if where in ("config", "scheduler_metrics"):
            b[where] = value
        elif where == "strategy":
            b["config"]["strategy"] = value
        elif where == "rate":
            b["config"]["strategy"]["rate"] = value
        elif where == "requests_made":
            b["scheduler_metrics"]["requests_made"] = value
        else:
            b["scheduler_metrics"]["requests_made"]["incomplete"] = value
        p = tmp_path / f"g-{where}.json"
        p.write_text(json.dumps(doc))
        out[f"guidellm-{where}"] = p
    doc = copy.deepcopy(g)
    doc["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"]["request_start"] = 1e308
    out["guidellm-start-1e308"] = tmp_path / "g-start.json"
    out["guidellm-start-1e308"].write_text(json.dumps(doc))
    ip = json.loads(pf.inference_perf(tmp_path / "ip308.json").read_text())
    ip[0]["start_time"] = 1e308
    out["inference-perf-start-1e308"] = tmp_path / "ip308.json"
    out["inference-perf-start-1e308"].write_text(json.dumps(ip))
    binary = tmp_path / "bin" / "profile_export.jsonl"
    binary.parent.mkdir()
    binary.write_text(ai.read_text())
    (binary.parent / "profile_export_aiperf.json").write_bytes(bytes(range(256)) * 64)
    out["aiperf-binary-side-file"] = binary
    return out


HOSTILE = ["deep-bench", "deep-aiperf", "deep-guidellm", "deep-inference-perf",
           *(f"aiperf-{t}-{w}" for t in ("output_sequence_length", "input_sequence_length") for w in ("NaN", "Infinity")),
           *(f"guidellm-{f}-{w}" for f in ("output_tokens", "prompt_tokens") for w in ("NaN", "Infinity")),
           *(f"guidellm-{w}" for w in ("config", "strategy", "scheduler_metrics", "requests_made", "incomplete", "rate")),
           "guidellm-start-1e308", "inference-perf-start-1e308", "aiperf-binary-side-file"]


@pytest.mark.parametrize("name", HOSTILE)
def test_no_hostile_export_is_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """Each file beside a good one: a named line (exit 4) or decided; the good one always decided."""
    path = _hostile_files(tmp_path)[name]
    rc, out = _gate(tmp_path, capsys, str(path), str(REAL))
    assert rc in (0, 1, 4), out
    assert "ttft_p50" in out and "PASS" in out, out  # the good file's gates decided
    json.loads((tmp_path / "out" / "decisions.json").read_text())  # written


def test_deep_json_is_named(tmp_path: Path) -> None:
    p = tmp_path / "deep.json"
    p.write_text('{"burstiness": 1, "endpoint_type": "x", "a": ' + _deep() + "}")
    with pytest.raises(ResultsError, match="nested too deeply"):
        load_results(p)


# -- items 3, 4: regular files only, capped --------------------------------------------------------
def _ai(path: Path, **kw: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return pf.aiperf(path, **kw)


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _with_deadline(f: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``f()`` in a thread: a hang is a test failure, not a stuck suite (a generous bound, not a budget)."""
    got: list[Any] = []

    def run() -> None:
        try:
            got.append(f())
        except BaseException as e:  # noqa: BLE001
            got.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert got, "hung"
    return got[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_never_read(tmp_path: Path) -> None:
    got = _with_deadline(lambda: load_results(_fifo(tmp_path / "in.json")))
    assert isinstance(got, ResultsError) and "not a regular file (a FIFO)" in str(got)
    got = _with_deadline(lambda: load_results(_fifo(tmp_path / "in2.json"), "vllm-bench"))
    assert isinstance(got, ResultsError) and "not a regular file" in str(got)
    ai = _ai(tmp_path / "ai" / "profile_export.jsonl")
    _fifo(ai.parent / "profile_export_aiperf.json")
    run = _with_deadline(lambda: load_results(ai))
    assert not isinstance(run, BaseException) and run.source.token_counts == "unknown"
    level = tmp_path / "sweep" / "SERVE-a-BENCH-b"
    level.mkdir(parents=True)
    (level / "run=1.json").write_text(REAL.read_text())
    _fifo(level / "run=0.json")
    got = _with_deadline(lambda: load_results(tmp_path / "sweep"))
    assert isinstance(got, ResultsError) and "run=0.json" in str(got) and "not a regular file" in str(got)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_an_endless_file_is_never_read(tmp_path: Path) -> None:
    got = _with_deadline(lambda: load_results(Path("/dev/zero"), "vllm-bench"))
    assert isinstance(got, ResultsError) and "not a regular file (a device)" in str(got)
    ai = _ai(tmp_path / "ai" / "profile_export.jsonl")
    (ai.parent / "profile_export_aiperf.json").symlink_to("/dev/zero")
    run = _with_deadline(lambda: load_results(ai))
    assert not isinstance(run, BaseException) and run.source.token_counts == "unknown"
    level = tmp_path / "sweep" / "SERVE-a-BENCH-b"
    level.mkdir(parents=True)
    (level / "run=0.json").symlink_to("/dev/zero")
    got = _with_deadline(lambda: load_results(tmp_path / "sweep"))
    assert isinstance(got, ResultsError) and "not a regular file" in str(got)


def test_a_file_past_the_cap_is_named_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsondoc, "MAX_BYTES", 1000)
    monkeypatch.setattr(jsondoc.load, "__defaults__", (1000,))
    with pytest.raises(ResultsError, match="over 0 MiB: not read"):
        load_results(REAL)
    side = tmp_path / "ai" / "profile_export_aiperf.json"
    _ai(tmp_path / "ai" / "profile_export.jsonl", server_counts=True)
    side.write_text(side.read_text()[:-1] + ', "pad": "' + "x" * (jsondoc.SIDE_BYTES + 10) + '"}')
    assert load_results(tmp_path / "ai" / "profile_export.jsonl").source.token_counts == "unknown"


# -- items 5, 6: garbage and absurd counts are per-request errors, nothing lost at store time --------
@pytest.mark.parametrize(("fmt", "edit"), [
    ("vllm-bench", lambda d: d["start_times"].__setitem__(0, 1e308)),
    ("vllm-bench", lambda d: d["queue_times"].__setitem__(0, 1e300)),
    ("vllm-bench", lambda d: d["output_lens"].__setitem__(0, 10**40)),
    ("vllm-bench", lambda d: d["output_lens"].__setitem__(0, 10000)),  # > the bytes of its generated text
])
def test_garbage_is_a_named_request_error_and_every_sample_is_stored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, edit: Callable[[dict[str, Any]], None]) -> None:
    bad = _bench(tmp_path, "bad.json", edit)
    run = load_results(bad)
    failed = [r for r in run.records if not r.ok]
    assert len(failed) == 1 and failed[0].error is not None and failed[0].error.startswith("implausible:"), failed
    assert run.end_ns - run.start_ns < 60 * 10**9  # the span from real times (not 1e308 s)
    rc, out = _gate(tmp_path, capsys, str(bad))
    assert "not stored" not in out and "exceeds" not in out, out
    for v in _recorded(tmp_path).values():
        assert v["samples"] or v["outcome"] == "error", v


def _peer_garbage(tmp_path: Path, case: str) -> Path:
    if case.startswith("aiperf"):
        p = _ai(tmp_path / "ai" / "profile_export.jsonl")
        key, value = ("request_start_ns", "1" + "0" * 40) if case == "aiperf-start-1e40" else ("session_num", "1e30")
        if case == "aiperf-session-10**30":
            value = "1" + "0" * 30
        p.write_text(p.read_text().replace(f'"{key}":', f'"{key}":{value},"was_{key}":', 1))
        return p
    if case == "inference-perf-output-1e308":
        p = pf.inference_perf(tmp_path / "ip.json", server_usage=False)
        doc = json.loads(p.read_text())
        doc[0]["info"]["response_metrics"]["output_tokens"] = 1e308
        p.write_text(json.dumps(doc))
        return p
    p = pf.guidellm(tmp_path / "g.json")
    doc = json.loads(p.read_text())
    doc["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"]["request_start"] = 1e308
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("case", ["aiperf-start-1e40", "aiperf-session-10**30", "inference-perf-output-1e308",
                                  "guidellm-start-1e308"])
def test_garbage_in_peer_formats_is_a_named_request_error_and_stored(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      case: str) -> None:
    """Values past int64 were decided, then "gate data not stored: Integer exceeds 64-bit range"."""
    p = _peer_garbage(tmp_path, case)
    run = load_results(p)
    bad = [r for r in run.records if r.error and r.error.startswith("implausible:")]
    assert len(bad) == 1, [r.error for r in run.records]
    assert run.end_ns - run.start_ns < 60 * 10**9
    rc, out = _gate(tmp_path, capsys, str(p))
    assert "not stored" not in out and "exceeds" not in out, out


@pytest.mark.parametrize("fmt", ["aiperf", "guidellm", "inference-perf", "vllm-bench"])
def test_1e12_tokens_pass_in_no_format(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    if fmt == "aiperf":
        p = _ai(tmp_path / "ai" / "profile_export.jsonl")
        p.write_text(p.read_text().replace('"output_sequence_length":{"value":8,', '"output_sequence_length":{"value":1e12,'))
    elif fmt == "guidellm":
        p = pf.guidellm(tmp_path / "g.json")
        p.write_text(p.read_text().replace('"output_tokens": 8', '"output_tokens": 1000000000000'))
    elif fmt == "inference-perf":
        p = pf.inference_perf(tmp_path / "ip.json")
        p.write_text(p.read_text().replace('"completion_tokens": 8', '"completion_tokens": 1000000000000'))
    else:
        p = _bench(tmp_path, "b.json", _set("output_lens", lambda v: 10**12))
    run = load_results(p)
    assert not run.successful
    causes = {str(r.error).split(" 1")[0] for r in run.records}
    assert causes <= {"implausible: output tokens", "implausible: metrics.output_sequence_length",
                      "implausible: output_tokens", "implausible: server_usage.completion_tokens",
                      "implausible: output_lens", "HTTP 500: boom", "guidellm error: HTTP 500: boom",
                      "inference-perf error: HTTPError: 500 boom"}, causes
    rc, out = _gate(tmp_path, capsys, str(p))
    assert rc == 1 and "PASS" not in out.replace("PASSED", ""), out


def test_more_tokens_than_asked_fail_inference_perf(tmp_path: Path) -> None:
    p = pf.inference_perf(tmp_path / "ip.json")
    p.write_text(p.read_text().replace('"completion_tokens": 8', '"completion_tokens": 20'))  # max_tokens 8
    run = load_results(p)
    causes = [str(r.error) for r in run.records if r.error and "500" not in r.error]
    assert len(causes) == pf.N - 1 and all("> max_tokens 8 asked" in c for c in causes), causes


def test_a_streamed_export_has_its_own_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AIPerf's lines go into columns a block at a time (memory grows with the requests, not the file):
    its cap is STREAM_BYTES (a 1M-request export is 2.6 GB, over the whole-tree MAX_BYTES), and past it
    the file is named with the line where reading stopped."""
    ai = _ai(tmp_path / "ai" / "profile_export.jsonl")
    monkeypatch.setattr(jsondoc, "MAX_BYTES", 1000)  # a whole-tree read would refuse this file
    assert ai.stat().st_size > 1000 and load_results(ai).records
    monkeypatch.setattr(jsondoc, "STREAM_BYTES", 1000)
    with pytest.raises(ResultsError, match=r"profile_export.jsonl: line \d+: over 0 MiB: not read further"):
        load_results(ai)
