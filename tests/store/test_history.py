"""history.sqlite: WAL, two processes appending at once lose nothing, queries."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from pytest_perfgate.store import history

WRITER = r"""
import sys
from pathlib import Path
from pytest_perfgate.store import history

db, who, runs, per = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for i in range(runs):
    vs = [(k, {"gate": f"g{k}", "phase": "p1", "outcome": "pass", "observed": 0.1 * k + i, "lower": 0.0,
               "upper": 1.0, "n": 10, "unit": "ms", "samples": f"samples/{who}-{i}/{k}.jsonl.gz"}) for k in range(per)]
    history.record(db, run_id=f"{who}-{i:04d}", started=f"2026-01-01T00:00:{i % 60:02d}", git_commit=who,
                   thresholds_file="t.toml", thresholds_sha256="ab", engines=[{"name": "e"}], verdicts=vs)
print("done", who)
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    runs, per = 120, 4
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), who, str(runs), str(per)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    with closing(sqlite3.connect(db)) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2 * runs
        assert con.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 2 * runs * per
        assert con.execute("SELECT count(DISTINCT run_id || '/' || seq) FROM verdicts").fetchone()[0] == 2 * runs * per
    assert len(history.verdicts(db, gate="g1", commit="a")) == runs


def test_record_is_idempotent_per_sequence_and_updates_the_run(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    v = {"gate": "ttft", "phase": "p1", "outcome": "fail", "observed": float("nan"), "n": 3}
    kw = dict(run_id="20260101T000000Z-aaaaaa", started="2026-01-01T00:00:00", git_commit="c1",
              thresholds_file="t", thresholds_sha256="s", engines=[])
    assert history.record(db, verdicts=[(0, v)], **kw) == 1  # type: ignore[arg-type]
    assert history.record(db, verdicts=[(0, v), (1, v)], **kw) == 1  # type: ignore[arg-type]
    (row0, row1) = history.verdicts(db)
    assert row0["observed"] is None and row0["verdict"]["gate"] == "ttft" and row1["seq"] == 1
    assert history.run(db, "20260101T000000Z-a").run_id == kw["run_id"]  # a unique prefix
    with pytest.raises(history.HistoryError, match="no run 'zzz'"):
        history.run(db, "zzz")


def test_missing_or_corrupt_history_is_named(tmp_path: Path) -> None:
    with pytest.raises(history.HistoryError, match="no run history"):
        history.runs(tmp_path / "none.sqlite")
    bad = tmp_path / "bad.sqlite"
    bad.write_text("this is not a database" * 100)
    with pytest.raises(history.HistoryError, match="bad.sqlite"):
        history.record(bad, run_id="r", started="s", git_commit=None, thresholds_file=None, thresholds_sha256=None,
                       engines=[], verdicts=[])


CREATOR = r"""
import sys, time
from pathlib import Path
from pytest_perfgate.store import history
base, t0 = Path(sys.argv[1]), float(sys.argv[2])
for i in range(40):
    while time.time() < t0 + i * 0.05:  # every process opens the same new file at the same instant
        pass
    history.connect(base / f"h{i}.sqlite").close()
print("ok")
"""


def test_processes_creating_one_history_at_once_all_get_it(tmp_path: Path) -> None:
    """Switching a new file to WAL while another process opens it answers "database is locked" at once,
    past the busy timeout; 4 processes opening 40 new files together failed 24 of 160 opens (and
    one busy CI run's two-writer test), and now wait their turn."""
    import time

    t0 = time.time() + 3
    procs = [subprocess.Popen([sys.executable, "-c", CREATOR, str(tmp_path), str(t0)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.strip() == "ok", err[-2000:]
