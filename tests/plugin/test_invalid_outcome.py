"""The invalid outcome through the plugin: a run whose client did not keep up (scripted health figures,
no clock) is INVALID in the terminal table, the short failure line, gates.xml (an <error> with the
figure), summary.md, report.html, decisions.json and history; the test fails like an error; the
raw verdict with ``--perfgate-no-validity`` or ``[perfgate] validity = false``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

TESTS = """
import os
import pytest
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.health import ClientHealth
from pytest_perfgate.load.result import RunResult

def run(lag_ms):
    recs = []
    for i in range(1000):
        t0 = 10**9 * i
        ttft = int(float(os.environ.get("TTFT_MS", "200")) * 1e6)
        r = RequestRecord(index=i, sent_ns=t0, chunk_ns=[t0 + ttft, t0 + ttft + 1_000_000], end_ns=t0 + ttft + 1_000_000)
        r.output_tokens = 2
        recs.append(r)
    return RunResult(records=recs, health=ClientHealth(loop_lag_p99=lag_ms / 1e3, probes=2000, cpu_share=0.99))

@pytest.mark.gate("long_context_ttft")
def test_ttft(perfgate):
    perfgate.check(run(float(os.environ.get("LAG_MS", "0.2"))))
"""

THRESHOLDS = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "plugin.toml").read_text()
FIGURE = "loop lag P99 40 ms > 7.5 ms allowed for ttft p99 at 150 ms"


@pytest.fixture
def starved(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_gates=TESTS)
    monkeypatch.setenv("LAG_MS", "40")
    return pytester


def test_invalid_everywhere_an_outcome_is(starved: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    junitparser = pytest.importorskip("junitparser")
    res = starved.runpytest("-m", "phase1", "-p", "no:cacheprovider")
    assert res.ret == 1
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "INVALID" in out and FIGURE in out and "set workers = 2" in out
    assert "FAILED test_gates.py::test_ttft - gate long_context_ttft: invalid: client did" in out  # short line
    results = starved.path / "perfgate-results"
    suites = {s.name: s for s in junitparser.JUnitXml.fromfile(str(results / "gates.xml"))}
    case = next(c for c in suites["phase1"] if c.name == "long_context_ttft")
    assert case.result[0]._tag == "error" and case.result[0].type == "perfgate.invalid"
    assert FIGURE in case.result[0].message
    summary, report = (results / "summary.md").read_text(), (results / "report.html").read_text()
    for text in (summary, report):  # (markdown escapes ">", html as &gt;)
        assert "| invalid |" in text or ">invalid<" in text
        assert "loop lag P99 40 ms" in text and "7.5 ms allowed for ttft p99 at 150 ms" in text
    doc = json.loads((results / "decisions.json").read_text())
    ph = doc["phases"]["phase1"]
    assert ph["outcome"] == "failed" and ph["triggered_fallbacks"] == []  # a raw FAIL, invalid: no plan triggered
    v = next(v for v in ph["verdicts"] if v["gate"] == "long_context_ttft")
    assert v["outcome"] == "invalid" and v["details"]["client_loop_lag_p99_s"] == pytest.approx(0.04)
    with sqlite3.connect(results / "history.sqlite") as db:
        assert db.execute("SELECT outcome FROM verdicts WHERE gate = 'long_context_ttft'").fetchall() == [("invalid",)]
    from pytest_perfgate.cli import main  # the stored data re-evaluates to the same invalid verdict

    capsys.readouterr()
    assert main(["evaluate", "latest", "long_context_ttft", "--results", str(results)]) == 1
    said = capsys.readouterr().out
    assert "INVALID" in said and "same verdict as the live run" in said


def test_no_validity_shows_the_raw_verdict(starved: pytest.Pytester) -> None:
    res = starved.runpytest("-m", "phase1", "-p", "no:cacheprovider", "--perfgate-no-validity")
    res.assert_outcomes(failed=1)
    doc = json.loads((Path(starved.path) / "perfgate-results" / "decisions.json").read_text())
    v = doc["phases"]["phase1"]["verdicts"][0]
    assert v["outcome"] == "fail" and "validity off" in v["note"] and FIGURE in v["note"]
    assert doc["phases"]["phase1"]["triggered_fallbacks"] == ["tiered_kv_cache"]
    toml = starved.path / "thresholds.toml"
    toml.write_text(toml.read_text().replace("[perfgate]", "[perfgate]\nvalidity = false", 1))
    starved.runpytest("-m", "phase1", "-p", "no:cacheprovider").assert_outcomes(failed=1)
    res = starved.runpytest("-m", "phase1", "-p", "no:cacheprovider")
    assert "INVALID" not in res.stdout.str() and "FAIL" in res.stdout.str()


@pytest.mark.parametrize(("lag_ms", "ttft_ms", "outcome"), [("0.2", "100", "pass"), ("0.2", "200", "fail"),
                                                             ("40", "100", "pass")])
def test_a_client_that_kept_up_decides_as_before(starved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                 lag_ms: str, ttft_ms: str, outcome: str) -> None:
    """Healthy: the raw verdict. A lagging loop and a TTFT pass: a late read only lengthens a TTFT."""
    monkeypatch.setenv("LAG_MS", lag_ms)
    monkeypatch.setenv("TTFT_MS", ttft_ms)
    res = starved.runpytest("-m", "phase1", "-p", "no:cacheprovider")
    res.assert_outcomes(**{"passed" if outcome == "pass" else "failed": 1})
    doc = json.loads((Path(starved.path) / "perfgate-results" / "decisions.json").read_text())
    assert doc["phases"]["phase1"]["verdicts"][0]["outcome"] == outcome


def test_a_bad_workers_setting_is_one_line(starved: pytest.Pytester) -> None:
    res = starved.runpytest("-p", "no:cacheprovider", "--perfgate-workers", "many")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(['*perfgate: --perfgate-workers many: workers must be a positive integer, "auto" or "ray://HOST:PORT"*'])
    res = starved.runpytest("-p", "no:cacheprovider", "--perfgate-workers", "ray://head")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(['*perfgate: --perfgate-workers ray://head: workers *a Ray cluster is "ray://auto" or "ray://HOST:PORT"*'])
    toml = starved.path / "thresholds.toml"
    toml.write_text(toml.read_text().replace("[perfgate]", "[perfgate]\nworkers = 0", 1))
    res = starved.runpytest("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*thresholds.toml: [[]perfgate[]] workers: must be a positive integer*"])
    toml.write_text(toml.read_text().replace("workers = 0", 'workers = { ray = "auto", per_node = 0 }', 1))
    res = starved.runpytest("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*thresholds.toml: [[]perfgate[]] workers.per_node: must be a positive integer, got 0*"])
