"""``perfgate gate``: thresholds.toml decided on a tool's export, pytest's table and failing lines,
every results file written, exit codes 0 / 1 / 4, bad files named while the others are decided."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.imports import Format, ImportedRun, load_results, register
from pytest_perfgate.imports import registry as format_registry

DATA = Path(__file__).parent / "data"
REAL = DATA / "vllm-bench-serve.json"

GATES = """
[perfgate]
inconclusive = "fail"
[phases.p]
[fallbacks.smaller]
title = "a smaller model"
cost = "quality"
[gates.ttft_p50]
phase = "p"
metric = "ttft"
statistic = "p50"
max = "{ttft}"
[gates.itl_p50]
phase = "p"
metric = "itl"
statistic = "p50"
max = "100 ms"
fallback = "smaller"
[gates.memory]
phase = "p"
metric = "allreduce_time"
statistic = "p50"
max = "1 ms"
"""


def gate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, ttft: str = "300 ms",
         extra: str = "") -> tuple[int, str, str]:
    (tmp_path / "thresholds.toml").write_text(GATES.format(ttft=ttft) + extra)
    rc = main(["gate", "--thresholds", str(tmp_path / "thresholds.toml"), "--out", str(tmp_path / "out"), *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _recorded(tmp_path: Path) -> dict[str, Any]:
    doc = json.loads((tmp_path / "out" / "decisions.json").read_text())
    return {v["gate"] + (f"[{v['label']}]" if v.get("label") else ""): v for v in doc["phases"]["p"]["verdicts"]}


def test_all_pass_writes_every_results_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = gate(tmp_path, capsys, str(REAL))
    assert rc == 0, out + err
    assert "phase  gate" in out and "ttft_p50" in out and "PASS" in out
    assert "not decided here: memory (allreduce_time: not in a benchmark export)" in out
    for name in ("decisions.json", "gates.xml", "summary.md", "report.html", "history.sqlite"):
        assert (tmp_path / "out" / name).exists(), name
    v = _recorded(tmp_path)["ttft_p50"]
    assert v["outcome"] == "pass" and v["n"] == 24 and v["test"] == f"perfgate gate {REAL}"
    assert v["samples"]  # the data is stored: perfgate evaluate re-decides it
    rc2 = main(["evaluate", str(tmp_path / "out"), "ttft_p50", "--thresholds", str(tmp_path / "thresholds.toml")])
    assert rc2 == 0


def test_a_failing_gate_exits_1_with_its_sentence_and_fallback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = gate(tmp_path, capsys, str(REAL), ttft="20 ms")
    assert rc == 1
    assert "FAILED ttft_p50: ttft p50 130 ms > max 20.0 ms (n=24, 95% sure it is above)" in out  # as pytest prints it
    assert "-> fallback:" in out


def test_inconclusive_says_the_requests_in_the_tools_terms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = gate(tmp_path, capsys, str(REAL), ttft="140 ms")  # the P50 is 130 ms on 24 requests
    assert rc == 1
    v = _recorded(tmp_path)["ttft_p50"]
    assert v["outcome"] == "inconclusive" and v["needed"] > 24
    assert f"vllm bench serve --num-prompts {v['needed']} would decide it" in v["note"]
    assert "a file is one look: no sequential stopping" in out


def test_a_bad_file_is_one_line_and_the_others_are_still_decided(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(REAL.read_text()[:5000])
    rc, out, err = gate(tmp_path, capsys, str(cut), "--run", f"good={REAL}")
    assert rc == 4
    (line,) = [ln for ln in err.splitlines() if "cut.json" in ln]
    assert line.startswith(f"perfgate gate: {cut}: not valid JSON (truncated or corrupt?)")
    assert "Traceback" not in err
    assert _recorded(tmp_path)["ttft_p50"]["outcome"] == "pass"  # the good file, decided and written


def test_named_runs_and_a_comparison_of_two_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = """
[gates.speedup]
phase = "p"
metric = "ttft"
statistic = "p50"
compare = "ratio"
runs = ["new", "old"]
max = "4"
[gates.new_only]
phase = "p"
metric = "e2e"
statistic = "p50"
engine = "speculative"
max = "10 s"
"""
    # a gate's engine = names a run (an engine of thresholds.toml: here the built-in "speculative")
    rc, out, err = gate(tmp_path, capsys, "--run", f"new={REAL}", "--run", f"old={REAL}", "--run",
                        f"speculative={REAL}", extra=extra)
    assert rc == 0, out + err
    got = _recorded(tmp_path)
    assert got["speedup"]["outcome"] == "pass" and got["speedup"]["observed"] == pytest.approx(1.0)
    assert "new_only" in got and got["new_only"]["n"] == 24
    assert {"ttft_p50[new]", "ttft_p50[old]", "ttft_p50[speculative]"} <= set(got)  # a gate with no engine: each run, labelled


def test_itl_on_a_format_without_chunk_times_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    def read(path: Path) -> list[tuple[str, ImportedRun]]:
        run = load_results(REAL)
        run.source = dataclasses.replace(run.source, format="coarse", tool="coarse-bench", per_chunk=False)
        return [("", run)]

    register(Format("coarse", "no chunks", lambda p, head: p.suffix == ".coarse", read))
    try:
        f = tmp_path / "r.coarse"
        f.write_text("x")
        rc, out, err = gate(tmp_path, capsys, str(f))
    finally:
        format_registry._FORMATS.pop("coarse")
    assert rc == 4
    assert (f"perfgate gate: gate itl_p50: {REAL}: coarse-bench (coarse) keeps no per-chunk times: itl cannot be "
            "gated on it (usage error)") in err
    assert _recorded(tmp_path)["ttft_p50"]["outcome"] == "pass"


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gate(tmp_path, capsys)[0] == 4
    rc, _, err = gate(tmp_path, capsys, "--run", "nameless")
    assert rc == 4 and "--run nameless: expected NAME=FILE" in err
    rc, _, err = gate(tmp_path, capsys, str(tmp_path / "missing.json"))
    assert rc == 4 and "missing.json: no such file or folder" in err
    assert main(["gate", "--list-formats"]) == 0
    assert "vllm-bench" in capsys.readouterr().out


def test_init_scaffolds_the_results_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "--results", str(REAL)]) == 0
    out = capsys.readouterr().out
    assert f"run: perfgate gate {REAL}" in out
    text = (tmp_path / "thresholds.toml").read_text()
    assert "[gates.itl_p99]" in text and "[engines." not in text
    rc = main(["gate", str(REAL)])
    out = capsys.readouterr().out
    assert rc in (0, 1) and "ttft_p95" in out and "perfgate: wrote perfgate-results/gates.xml" in out
    assert main(["init", "--results", str(tmp_path / "nope.json"), "--force"]) == 4


def test_baseline_regression_on_imported_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = '\n[gates.ttft_reg]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "10 s"\nregression = "10%"\n'
    assert gate(tmp_path, capsys, str(REAL), extra=extra)[0] == 0  # the baseline run, stored in out/
    slow = json.loads(REAL.read_text())
    slow["latencies"] = [x + t for x, t in zip(slow["latencies"], slow["ttfts"], strict=True)]
    slow["ttfts"] = [t * 2 for t in slow["ttfts"]]
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    rc, out, err = gate(tmp_path, capsys, str(tmp_path / "slow.json"), "--baseline", "latest", extra=extra)
    v = _recorded(tmp_path)["ttft_reg"]
    assert v["vs_baseline"]["change"] == pytest.approx(1.0, abs=0.01)  # twice the baseline's P50
    assert rc == 1 and v["outcome"] == "fail" and "REGRESSED" in v["summary"], out + err
    rc, _, err = gate(tmp_path, capsys, str(REAL), "--baseline", "no-such-run")
    assert rc == 4 and "--baseline no-such-run" in err


def test_a_guidellm_sweep_is_decided_level_by_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from peer_files import guidellm

    f = guidellm(tmp_path / "benchmarks.json", levels=2, kept=5)
    extra = ('\n[gates.budget]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "1 s"\n'
             "max_error_rate = 0.5\n")  # one of the file's requests failed: within this gate's budget
    rc, out, err = gate(tmp_path, capsys, str(f), ttft="1 s", extra=extra)
    assert rc == 4  # the ITL gate: guidellm keeps no chunk times (a usage error), the others decided
    assert "gate itl_p50:" in err and "guidellm run (guidellm) keeps no per-chunk times" in err
    got = _recorded(tmp_path)
    levels = ("benchmarks/0-constant@2", "benchmarks/1-constant@4")
    assert set(got) == {f"{g}[{lv}]" for g in ("ttft_p50", "budget") for lv in levels}
    assert all(got[f"ttft_p50[{lv}]"]["outcome"] == "error" for lv in levels)  # no error budget: 1 failure
    for lv in levels:  # 6 kept (1 failed, censored over the limit): too few to decide a P50
        assert got[f"budget[{lv}]"]["outcome"] == "inconclusive"
        assert "a sample: 6 of 10 requests" in got[f"budget[{lv}]"]["note"]
        assert "guidellm run --constraint kind=max_requests,count=" in got[f"budget[{lv}]"]["note"]


def test_a_capacity_gate_over_a_guidellm_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from peer_files import guidellm

    f = guidellm(tmp_path / "benchmarks.json", levels=3)  # constant 2, 4, 6 req/s
    extra = ('\n[gates.capacity]\nphase = "p"\nmetric = "request_throughput"\nstatistic = "sustained"\n'
             'min = "4 req/s"\nslo = { ttft_p50 = "1 s" }\n')
    rc, out, err = gate(tmp_path, capsys, str(f), ttft="1 s", extra=extra)
    v = _recorded(tmp_path)["capacity"]
    assert [lv["level"] for lv in v["curve"]] == [2.0, 4.0, 6.0], out + err
    assert v["unit"] == "req/s" and "capacity" in out


def _to_old_layout(out: Path) -> int:
    """Rewrite every data file of ``out`` as schema 1 wrote it before run files (the run inline)."""
    import gzip
    import shutil

    from pytest_perfgate.store import records, runfiles

    n = 0
    for f in sorted(out.glob("samples/*/*.jsonl.gz")):
        lines: list[dict[str, Any]] = []
        for line in records.read_lines(f):
            if line["kind"] != "run_file":
                lines.append(line)
                continue
            run_line, table = runfiles.read(f.parent / line["path"])  # a Parquet run file (issue 41)
            inner = [run_line, *({"kind": "request", **row} for row in table.to_pylist())]
            lines += [{**x, "run": line["run"]} for x in inner]
            n += 1
        with gzip.open(f, "wt") as g:
            g.write("".join(json.dumps(x) + "\n" for x in lines))
    for d in out.glob("samples/*/runs"):
        shutil.rmtree(d)
    records._LIVE.clear()
    return n


def test_a_results_dir_in_the_old_layout_is_re_evaluated_and_reported(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = gate(tmp_path, capsys, str(REAL))
    assert rc == 0, out + err
    assert len(list((tmp_path / "out").glob("samples/*/runs/*.parquet"))) == 1  # one run, two verdicts on it
    assert _to_old_layout(tmp_path / "out") == 2
    th = str(tmp_path / "thresholds.toml")
    for g in ("ttft_p50", "itl_p50"):
        assert main(["evaluate", str(tmp_path / "out"), g, "--thresholds", th]) == 0
        assert "same verdict as the live run" in capsys.readouterr().out
    (tmp_path / "out" / "report.html").unlink()
    assert main(["report", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "report.html").read_text()
    assert "ITL per chunk" in html and "no stored data" not in html and "plot failed" not in html


def test_verbose_prints_the_full_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = gate(tmp_path, capsys, str(REAL), "-v", ttft="20 ms")
    assert rc == 1
    assert "gate ttft_p50: ttft p50 = 130 ms (one-sided 95% bounds" in out  # the bounds, as pytest -v
