"""The ``perfgate`` command line on real stored runs: baseline regression, re-evaluation, exit codes
and ``--json`` shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from perfgate_project import StoredRuns

from pytest_perfgate.cli import main

GATES = ("ttft", "itl", "acceptance", "spec_speedup")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    try:
        doc = json.loads(out) if "--json" in args or "--format" in args else out
    except ValueError:
        doc = out
    return rc, doc, err


def _verdicts(results: Path) -> dict[str, dict[str, Any]]:
    doc = json.loads((results / "decisions.json").read_text())
    return {v["gate"]: v for v in doc["phases"]["phase1"]["verdicts"]}


def test_a_regression_the_threshold_misses_is_caught_and_a_non_regression_is_not(stored_runs: StoredRuns) -> None:
    assert stored_runs.baseline.returncode == 0, stored_runs.baseline.stdout[-3000:]
    assert stored_runs.regressed.returncode == 1, stored_runs.regressed.stdout[-3000:]
    vs = _verdicts(stored_runs.results)
    ttft = vs["ttft"]
    assert ttft["outcome"] == "fail" and ttft["upper"] < 1.0  # meets its absolute target of 1 s...
    assert "< max 1.00 s" in ttft["summary"] and "REGRESSED beyond the 10% regression tolerance" in ttft["summary"]
    assert ttft["vs_baseline"]["regressed"] and ttft["vs_baseline"]["bound"] > 1.1
    assert "FAILED test_gates.py::test_latency - gate ttft: ttft p50" in stored_runs.regressed.stdout
    assert "REGRESSED beyond the 10% regression tolerance" in stored_runs.regressed.stdout
    for gate in ("acceptance", "spec_speedup"):  # unchanged by the slower prefill: compared, not flagged
        assert vs[gate]["outcome"] == "pass" and vs[gate]["vs_baseline"]["regressed"] is False, vs[gate]["summary"]


def test_every_gate_re_evaluates_to_its_live_verdict(stored_runs: StoredRuns, capsys: pytest.CaptureFixture[str]) -> None:
    res = str(stored_runs.results)
    rc, doc, _ = cli(capsys, "history", "--results", res, "--json")
    runs = list(dict.fromkeys(v["run_id"] for v in doc["verdicts"]))
    assert rc == 0 and len(runs) == 2
    checked = 0
    for run in runs:
        for gate in GATES:
            rc, got, err = cli(capsys, "evaluate", run, gate, "--results", res, "--json")
            assert got["matches"] is True, (run, gate, got, err)
            assert set(got) == {"run_id", "gate", "samples", "verdict", "live", "matches"}
            assert rc == (0 if got["verdict"]["outcome"] == "pass" else 1)
            checked += 1
    assert checked == 8
    rc, text, _ = cli(capsys, "evaluate", runs[1], "ttft", "--results", res)
    assert rc == 1 and "same verdict as the live run" in text and "REGRESSED" in text


def test_diff_history_show_and_exports(stored_runs: StoredRuns, capsys: pytest.CaptureFixture[str]) -> None:
    res = str(stored_runs.results)
    rc, doc, _ = cli(capsys, "history", "--results", res, "--json")
    a, b = list(dict.fromkeys(v["run_id"] for v in doc["verdicts"]))
    rc, doc, _ = cli(capsys, "diff", a, b, "--results", res, "--json")
    assert rc == 1 and doc["regressed"] == ["ttft"]
    # itl may be left out: a p90 gap of 0 ms (coalesced chunks) has no ratio
    assert {c["gate"] for c in doc["comparisons"]} >= {"ttft", "acceptance", "spec_speedup"}
    for c in doc["comparisons"]:
        assert set(c) >= {"gate", "run", "baseline_run", "observed", "baseline_observed", "change", "bound",
                          "smaller_is_better", "confidence", "tolerance", "regressed", "text"}
    rc, doc, _ = cli(capsys, "diff", a, a, "--results", res, "--json")
    assert rc == 0 and doc["regressed"] == []
    rc, doc, _ = cli(capsys, "history", "ttft", "--results", res, "--json")
    assert rc == 0 and [v["outcome"] for v in doc["verdicts"]] == ["pass", "fail"]
    rc, doc, _ = cli(capsys, "history", "--results", res, "--format", "bencher")
    assert rc == 0 and set(doc) == set(GATES) and doc["ttft"]["ttft-p50"]["value"] > 0.15  # in s (the gate's unit), the latest run
    rc, doc, _ = cli(capsys, "history", "--results", res, "--format", "github-smaller")
    assert rc == 0 and {d["name"].split()[0] for d in doc} == {"ttft", "itl", "spec_speedup"}
    rc, doc, _ = cli(capsys, "history", "--results", res, "--format", "github-bigger", "--all")
    assert rc == 0 and [d["name"].split()[0] for d in doc] == ["acceptance", "acceptance"]
    rc, doc, _ = cli(capsys, "show", res, "--json")
    ph = doc["phases"]["phase1"]
    assert rc == 0 and ph["outcome"] == "fallback" and ph["triggered_fallbacks"][0]["name"] == "tiered_kv_cache"
    assert ph["triggered_fallbacks"][0]["cost"].startswith("2 engineer-weeks")
    rc, text, _ = cli(capsys, "show", res)
    assert text.index("[fail] gate ttft") < text.index("[pass]")  # failing gates first


def test_exit_codes_and_errors(stored_runs: StoredRuns, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    res = str(stored_runs.results)
    th = str(stored_runs.root / "thresholds.toml")
    rc, doc, _ = cli(capsys, "gates", th, "--json")
    assert rc == 0 and [g["gate"] for g in doc["gates"]] == list(GATES)
    assert doc["gates"][0] == {"gate": "ttft", "phase": "phase1", "metric": "ttft", "statistic": "p50",
                               "compare": None, "direction": "max", "threshold": "1.00 s", "unit": "s", "baseline": None,
                               "regression": 0.1, "fallbacks": ["tiered_kv_cache"]}
    bad = tmp_path / "bad.toml"
    bad.write_text('[gates.x]\nphase = "nope"\n')
    monkeypatch.chdir(tmp_path)
    rc, doc, err = cli(capsys, "gates", str(bad), "--json")
    assert rc == 4 and doc["exit_code"] == 4 and "bad.toml" in doc["error"] and "bad.toml" in err
    rc, doc, err = cli(capsys, "evaluate", "no-such-run", "ttft", "--results", res, "--json")
    assert rc == 3 and "no-such-run" in doc["error"]
    rc, doc, err = cli(capsys, "show", str(tmp_path / "none"), "--json")
    assert rc == 3 and "no decisions.json" in doc["error"]
    rc, doc, err = cli(capsys, "history", "--results", str(tmp_path / "none"))
    assert rc == 3 and "no run history" in err
    rc, doc, _ = cli(capsys, "report", res, "--json")
    assert rc == 0 and sorted(Path(p).name for p in doc["written"]) == ["gates.xml", "report.html", "summary.md"]
    with pytest.raises(SystemExit) as e:
        main(["no-such-command"])
    assert e.value.code == 2
    capsys.readouterr()
    # --version, --help (argparse exits 0)
    for flag in ("--version", "--help"):
        with pytest.raises(SystemExit) as e:
            main([flag])
        assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("perfgate 0.")
    for cmd in ("check", "gates", "show", "diff", "history", "report", "evaluate", "models"):
        assert cmd in out
