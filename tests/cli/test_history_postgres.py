"""A run history in PostgreSQL outlives the runner: real sessions of the CLI's test project write it,
a second runner compares with the first's run through it alone, and the commands read it anywhere.
An unreachable history loses nothing: the session writes its results directory's history.sqlite,
says so in one line without the password, and fails."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from perfgate_project import make, run_pytest

from pytest_perfgate.cli import main


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    rc = main(list(args))
    out = capsys.readouterr().out
    return rc, json.loads(out) if "--json" in args else out


def test_a_second_runner_compares_with_the_first_through_postgres(
        pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first = make(tmp_path / "runner-1")
    a = run_pytest(first, "--perfgate-history", pg_url)
    assert a.returncode == 0, a.stdout[-3000:]
    assert not (first / "perfgate-results" / "history.sqlite").exists()  # the verdicts went to the database
    shutil.rmtree(first / "perfgate-results")  # the runner is gone, and its results with it
    second = make(tmp_path / "runner-2")
    monkeypatch.setenv("PERFGATE_HISTORY", pg_url)  # the environment's history, as a CI secret gives it
    b = run_pytest(second, "--perfgate-baseline", "latest", ttft=0.150)
    assert b.returncode == 1, b.stdout[-3000:]
    assert "REGRESSED beyond the 10% regression tolerance" in b.stdout  # the first run's data, from the database
    report = (second / "perfgate-results" / "report.html").read_text()
    assert "<h2>Trend</h2>" in report and "2 stored runs" in report  # the trend over both runners' runs
    assert "baseline run <code>" in report  # the first run's requests overlaid, from the fetched data file
    monkeypatch.delenv("PERFGATE_HISTORY")

    elsewhere = tmp_path / "laptop"  # a third place re-evaluates both runs from the database alone
    rc, doc = cli(capsys, "history", "--history", pg_url, "--results", str(elsewhere), "--json")
    runs = list(dict.fromkeys(v["run_id"] for v in doc["verdicts"]))
    assert rc == 0 and len(runs) == 2 and doc["history"].startswith("postgresql://perfgate:***@")
    for run in runs:
        for gate in ("ttft", "itl", "acceptance", "spec_speedup"):
            rc, got = cli(capsys, "evaluate", run, gate, "--history", pg_url, "--results", str(elsewhere), "--json")
            assert got["matches"] is True, (run, gate, got)
    rc, doc = cli(capsys, "diff", runs[0], runs[1], "--history", pg_url, "--results", str(elsewhere), "--json")
    assert rc == 1 and doc["regressed"] == ["ttft"]

    exported = tmp_path / "exported.sqlite"
    rc, doc = cli(capsys, "history", "--history", pg_url, "--export", str(exported), "--json")
    assert rc == 0 and doc["runs"] == 2 and doc["verdicts"] == 8 and doc["files"] >= 8
    def rows(at: str) -> list[tuple[Any, ...]]:
        doc = cli(capsys, "history", "--history", at, "--json")[1]
        return [(v["run_id"], v["gate"], v["outcome"], v["observed"], v["lower"], v["upper"]) for v in doc["verdicts"]]

    assert rows(str(exported)) == rows(pg_url) and len(rows(pg_url)) == 8
    rc, doc = cli(capsys, "history", "--history", pg_url, "--import", str(exported), "--json")
    assert rc == 0 and (doc["runs"], doc["verdicts"], doc["files"]) == (0, 0, 0)  # nothing twice


def test_an_unreachable_history_loses_nothing_and_fails_the_session(tmp_path: Path) -> None:
    root = make(tmp_path / "runner")
    url = "postgresql://perfgate:hunter2-secret@127.0.0.1:1/perf?connect_timeout=3"
    r = run_pytest(root, "--perfgate-history", url)
    out = r.stdout
    assert r.returncode != 0, out[-3000:]
    assert "hunter2" not in out + r.stderr
    line = next(ln for ln in out.splitlines() if "could not write results (the session fails)" in ln)
    assert "postgresql://perfgate:***@127.0.0.1:1/perf" in line and "nothing measured is lost" in line
    assert "perfgate history --history URL --import" in line
    db = root / "perfgate-results" / "history.sqlite"
    decided = json.loads((root / "perfgate-results" / "decisions.json").read_text())
    with closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT count(*) FROM verdicts").fetchone()[0] == \
            len(decided["phases"]["phase1"]["verdicts"]) == 4
    bad = run_pytest(root, "--perfgate-history", "mysql://u:pw@h/db")
    assert bad.returncode == 4 and "--perfgate-history mysql://u:***@h/db: not a history location" in bad.stdout + bad.stderr
