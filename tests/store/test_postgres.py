"""A history that outlives the runner: PostgreSQL (a real server, tests/postgres_history.py) with the
schema of history.sqlite, schema versions and migrations, many writers at once, export and import,
and what a bad URL or an unreachable server does."""

from __future__ import annotations

import gzip
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate.store import backend, history, migrations
from pytest_perfgate.store.transfer import copy

WRITER = r"""
import sys, time
from pytest_perfgate.store import history

url, who, runs, per, t0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
import psycopg  # imported before the start line: every process opens the new database at once
while time.time() < t0:
    pass
for i in range(runs):
    vs = [(k, {"gate": f"g{k}", "phase": "p1", "outcome": "pass", "observed": 0.1 * k + i, "lower": 0.0,
               "upper": 1.0, "n": 10, "unit": "ms", "samples": f"samples/{who}-{i}/{k:04d}-g{k}.jsonl.gz"})
          for k in range(per)]
    files = [(f"samples/{who}-{i}/{k:04d}-g{k}.jsonl.gz", f"{who} {i} {k}".encode() * 50) for k in range(per)]
    history.record(url, run_id=f"{who}-{i:04d}", started=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}", git_commit=who,
                   thresholds_file="t.toml", thresholds_sha256="ab", engines=[{"name": "e"}], verdicts=vs,
                   files=files)
print("done", who)
"""


def _meta(run_id: str, commit: str = "c1") -> dict[str, Any]:
    return dict(run_id=run_id, started="2026-01-01T00:00:00", git_commit=commit, thresholds_file="t.toml",
                thresholds_sha256="s", engines=[{"name": "e"}])


def _v(gate: str, x: float, samples: str | None = None) -> dict[str, Any]:
    return {"gate": gate, "phase": "p1", "outcome": "pass", "observed": x, "lower": x * 0.9, "upper": x * 1.1,
            "n": 100, "unit": "s", "direction": "max", "threshold": 1.0, **({"samples": samples} if samples else {})}


def test_many_processes_writing_a_new_database_at_once_lose_nothing(pg_url: str) -> None:
    """4 processes create the schema of a new database at the same instant, then write 60 runs each
    (4 verdicts and 4 data files a run): every row arrives once."""
    import time

    procs_n, runs, per = 4, 60, 4
    t0 = time.time() + 4
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, f"w{j}", str(runs), str(per), str(t0)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for j in range(procs_n)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and "done" in out, err[-3000:]
    assert len(history.runs(pg_url)) == procs_n * runs
    rows = history.verdicts(pg_url)
    assert len(rows) == procs_n * runs * per
    assert len({(r["run_id"], r["seq"]) for r in rows}) == procs_n * runs * per
    assert len(history.verdicts(pg_url, gate="g1", commit="w2")) == runs
    assert history.files(pg_url, "w3-0059")["samples/w3-59/0002-g2.jsonl.gz"] == b"w3 59 2" * 50
    with backend.open_history(pg_url) as con:
        assert [r["version"] for r in con.query("SELECT version FROM schema_version ORDER BY version")] == [1, 2]
        assert con.query("SELECT count(*) AS n FROM files")[0]["n"] == procs_n * runs * per


def test_same_schema_and_queries_on_both(pg_url: str, tmp_path: Path) -> None:
    """One set of writes to PostgreSQL and to SQLite reads back the same through every public function."""
    db = tmp_path / "history.sqlite"
    for where in (pg_url, db):
        assert history.record(where, verdicts=[(0, _v("ttft", 0.2)), (1, _v("itl", 0.01))], **_meta("20260101T000000Z-aa")) == 2
        assert history.record(where, verdicts=[(0, _v("ttft", 0.2)), (2, _v("ttft", float("nan")))],
                              **_meta("20260101T000000Z-aa")) == 1
        history.record(where, verdicts=[(0, _v("ttft", 0.3))], **{**_meta("20260102T000000Z-bb", "c2"),
                                                                   "started": "2026-01-02T00:00:00"})
    strip = ("id", "time", "host", "python")
    a, b = history.verdicts(pg_url), history.verdicts(db)
    assert [{k: v for k, v in r.items() if k not in strip} for r in a] == [{k: v for k, v in r.items() if k not in strip} for r in b]
    assert [r.run_id for r in history.runs(pg_url)] == [r.run_id for r in history.runs(db)] == ["20260102T000000Z-bb", "20260101T000000Z-aa"]
    assert history.run(pg_url, "20260102").run_id == "20260102T000000Z-bb"  # a unique prefix
    with pytest.raises(history.HistoryError, match=r"no run '2026' \(2 runs start with it\)"):
        history.run(pg_url, "2026")
    assert [r["observed"] for r in history.verdicts(pg_url, gate="ttft")] == [0.2, None, 0.3]
    assert len(history.verdicts(pg_url, commit="c2")) == 1 and len(history.verdicts(pg_url, limit=2)) == 2


V1_SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, started TEXT NOT NULL, updated TEXT NOT NULL, git_commit TEXT, host TEXT,
  python TEXT, thresholds_file TEXT, thresholds_sha256 TEXT, engines TEXT NOT NULL DEFAULT '[]', results_dir TEXT);
CREATE TABLE verdicts (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(run_id),
  seq INTEGER NOT NULL, time TEXT NOT NULL, phase TEXT NOT NULL, gate TEXT NOT NULL, test TEXT, outcome TEXT NOT NULL,
  metric TEXT, statistic TEXT, observed REAL, lower REAL, upper REAL, n INTEGER, unit TEXT, direction TEXT,
  threshold REAL, baseline REAL, method TEXT, confidence REAL, samples TEXT, verdict TEXT NOT NULL, UNIQUE (run_id, seq));
CREATE INDEX verdicts_gate ON verdicts (gate, id);
INSERT INTO runs VALUES ('old', '2025-01-01T00:00:00', '2025-01-01T00:00:00', 'c0', 'h', '3.11', 't', 's', '[]', 'r');
INSERT INTO verdicts (run_id, seq, time, phase, gate, outcome, observed, verdict)
  VALUES ('old', 0, '2025-01-01T00:00:00', 'p1', 'ttft', 'pass', 0.5, '{"gate": "ttft", "outcome": "pass"}');
PRAGMA user_version = 1;
"""


def test_a_version_1_file_is_migrated_and_a_newer_one_refused(tmp_path: Path) -> None:
    """A history.sqlite written before schema_version (perfgate's version 1) gains the files table and
    its version rows, its runs intact; a history of a version this perfgate does not know is refused."""
    db = tmp_path / "history.sqlite"
    with closing(sqlite3.connect(db)) as con:
        con.executescript(V1_SCHEMA)
    assert [r["gate"] for r in history.verdicts(db)] == ["ttft"]  # read as it is, before any write
    history.record(db, verdicts=[(0, _v("itl", 0.01))], files=[("samples/new/a.jsonl.gz", b"x")], **_meta("new"))
    with closing(sqlite3.connect(db)) as con:
        assert [v for (v,) in con.execute("SELECT version FROM schema_version ORDER BY version")] == [1, 2]
        assert con.execute("PRAGMA user_version").fetchone()[0] == migrations.VERSION == 2
        assert "written before schema_version" in con.execute("SELECT description FROM schema_version WHERE version = 1").fetchone()[0]
        assert [r for (r,) in con.execute("SELECT run_id FROM verdicts ORDER BY id")] == ["old", "new"]
        con.execute("INSERT INTO schema_version VALUES (99, 'x', 'from the future')")
        con.commit()
    for call in (lambda: history.runs(db), lambda: history.record(db, verdicts=[], **_meta("r"))):
        with pytest.raises(history.HistoryError, match=r"history.sqlite: history schema version 99 was written by a newer perfgate"):
            call()


def test_migration_of_postgres_and_the_version_table(pg_url: str) -> None:
    with backend.open_history(pg_url) as con:
        assert migrations.version(con) == migrations.VERSION
        assert migrations.migrate(con) == migrations.VERSION  # nothing to do the second time
        con.execute("INSERT INTO schema_version VALUES (7, 'x', 'from the future')")
    with pytest.raises(history.HistoryError, match=r"\*\*\*.*schema version 7 was written by a newer perfgate"):
        history.runs(pg_url)


def _results_dir(root: Path, run_id: str, gates: int = 2) -> Path:
    """A results directory as a session leaves it: history.sqlite and each verdict's data file (and a
    run file under runs/) beside it."""
    vs = []
    for k in range(gates):
        rel = f"samples/{run_id}/{k:04d}-g{k}.jsonl.gz"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(gzip.compress(f'{{"kind": "header", "gate": "g{k}"}}\n'.encode()))
        vs.append((k, _v(f"g{k}", 0.1 + k, rel)))
    run_file = root / f"samples/{run_id}/runs/e-{run_id}.jsonl.gz"
    run_file.parent.mkdir(parents=True, exist_ok=True)
    run_file.write_bytes(gzip.compress(b'{"kind": "header"}\n' * 100))
    history.record(root / "history.sqlite", verdicts=vs, **_meta(run_id))
    return root


def test_export_and_import_round_trip(pg_url: str, tmp_path: Path) -> None:
    """Two runners' results directories -> PostgreSQL (their data files from beside their files) ->
    a new SQLite file -> a third: every run, verdict and file the same; a second import adds nothing."""
    a = _results_dir(tmp_path / "runner-a", "20260101T000000Z-aaaaaa", gates=3)
    b = _results_dir(tmp_path / "runner-b", "20260101T000100Z-bbbbbb", gates=2)
    got = copy(a / "history.sqlite", pg_url)
    assert (got.runs, got.verdicts, got.files) == (1, 3, 4)
    got = copy(b / "history.sqlite", pg_url)
    assert (got.runs, got.verdicts, got.files) == (1, 2, 3)
    again = copy(b / "history.sqlite", pg_url)
    assert (again.seen_runs, again.runs, again.verdicts, again.files) == (1, 0, 0, 0)
    out = tmp_path / "exported.sqlite"
    got = copy(pg_url, out)
    assert (got.runs, got.verdicts, got.files) == (2, 5, 7)
    third = tmp_path / "third.sqlite"
    assert copy(out, third).files == 7  # between SQLite files, the files table's copies travel
    strip = ("id",)
    for h in (out, third):
        assert [{k: v for k, v in r.items() if k not in strip} for r in history.verdicts(h)] == \
            [{k: v for k, v in r.items() if k not in strip} for r in history.verdicts(pg_url)]
        assert history.runs(h) == history.runs(pg_url)
    for run_id, root in (("20260101T000000Z-aaaaaa", a), ("20260101T000100Z-bbbbbb", b)):
        stored = history.files(third, run_id)
        assert stored == {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.jsonl.gz")}
    fresh = tmp_path / "elsewhere"  # a new runner: the data files come back from the database
    assert history.materialize(pg_url, "20260101T000000Z-aaaaaa", fresh) == 4
    assert history.materialize(pg_url, "20260101T000000Z-aaaaaa", fresh) == 0
    assert (fresh / "samples/20260101T000000Z-aaaaaa/0002-g2.jsonl.gz").read_bytes() == \
        (a / "samples/20260101T000000Z-aaaaaa/0002-g2.jsonl.gz").read_bytes()
    with pytest.raises(history.HistoryError, match="source and destination are the same history"):
        copy(pg_url, pg_url)


def test_bad_urls_are_one_line_naming_the_url_without_its_password(pg_url: str, tmp_path: Path) -> None:
    wrong = pg_url.replace("perfgate:", "perfgate:NOT-THE-PASSWORD-x", 1)
    with pytest.raises(history.HistoryError) as e:
        history.runs(wrong)
    msg = str(e.value)
    assert msg.startswith("postgresql://perfgate:***@/t_") and "password authentication failed" in msg
    assert "NOT-THE-PASSWORD" not in msg and "\n" not in msg
    missing = pg_url.rsplit("?", 1)[0].rsplit("/", 1)[0] + "/no_such_db?" + pg_url.rsplit("?", 1)[1]
    with pytest.raises(history.HistoryError, match=r"no_such_db.*does not exist"):
        history.record(missing, verdicts=[], **_meta("r"))


def test_locations_without_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """URL checks, redaction and the choice of the history need no server."""
    assert backend.label("postgresql://ci:s3cret@db.example:5432/perf?sslmode=require&password=x") == \
        "postgresql://ci:***@db.example:5432/perf?sslmode=require&password=***"
    assert backend.label("postgresql://ci@db/perf") == "postgresql://ci@db/perf"
    for bad, match in (("mysql://u:pw@h/db", "mysql://u:\\*\\*\\*@h/db: not a history location"),
                       ("postgresql://u:pw@h", "no database name"),
                       ("postgresql://u:pw@h:99999/db", "not a valid URL")):
        with pytest.raises(history.HistoryError, match=match) as e:
            backend.check_location(bad, "--perfgate-history")
        assert "pw" not in str(e.value).replace("postgresql", "")
    monkeypatch.delenv(backend.ENV, raising=False)
    out = tmp_path / "perfgate-results"
    assert backend.choose(None, None, out) == out / "history.sqlite"
    assert backend.choose(None, "shared/h.sqlite", out, base=tmp_path) == tmp_path / "shared/h.sqlite"
    monkeypatch.setenv(backend.ENV, "postgresql://env@h/db")
    assert backend.choose(None, "shared/h.sqlite", out) == "postgresql://env@h/db"
    assert backend.choose("postgresql://opt@h/db", "x.sqlite", out) == "postgresql://opt@h/db"
    unreachable = "postgresql://u:topsecret@127.0.0.1:1/db?connect_timeout=3"
    with pytest.raises(history.HistoryError) as e:
        history.runs(unreachable)
    assert str(e.value).startswith("postgresql://u:***@127.0.0.1:1/db") and "topsecret" not in str(e.value)


def test_the_thresholds_file_setting_is_checked_when_loaded() -> None:
    from pytest_perfgate.config import ConfigError, parse_thresholds

    assert parse_thresholds({"perfgate": {"history": " postgresql://ci@db/perf "}}, Path("t.toml")).settings.history \
        == "postgresql://ci@db/perf"
    assert parse_thresholds({}, Path("t.toml")).settings.history is None
    for bad, match in (("mysql://u:pw@h/db", r"t.toml: \[perfgate\] history: mysql:// is not a history location"),
                       (3, r"\[perfgate\] history: must be a postgresql:// URL or a SQLite file path, got 3"),
                       ("", "must be a postgresql:// URL")):
        with pytest.raises(ConfigError, match=match) as e:
            parse_thresholds({"perfgate": {"history": bad}}, Path("t.toml"))
        assert "pw" not in str(e.value)


def test_the_history_commands_name_what_is_wrong_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_perfgate.cli import main

    unreachable = "postgresql://u:sekrit@127.0.0.1:1/db?connect_timeout=3"
    cases = (
        (["history", "--history", unreachable], 3, "perfgate: postgresql://u:***@127.0.0.1:1/db?connect_timeout=3: "
         "cannot open the PostgreSQL history (connection failed:"),
        (["history", "--history", "redis://u:sekrit@h/0"], 2,
         "perfgate: --history redis://u:***@h/0: not a history location"),
        (["history", "--history", str(tmp_path / "h.sqlite"), "--import", str(tmp_path / "none.sqlite")], 3,
         f"perfgate: --import {tmp_path / 'none.sqlite'}: no run history there (nothing to import)"),
        (["history", "--results", str(tmp_path), "--export", unreachable], 3,
         f"perfgate: {tmp_path / 'history.sqlite'}: no run history"),
        (["history", "--history", unreachable, "--export", "a.sqlite", "--import", "b.sqlite"], 2,
         "perfgate: give --export or --import, not both"),
    )
    for args, code, start in cases:
        capsys.readouterr()
        assert main(args) == code, args
        err = capsys.readouterr().err
        assert err.startswith(start) and err.count("\n") == 1 and "sekrit" not in err, err


def test_a_shared_history_failing_half_way_leaves_the_whole_run_in_the_local_file(tmp_path: Path, th: Any) -> None:
    """Written to a shared history (here a file elsewhere: no server needed) until it breaks; then the
    results directory's history.sqlite gets every verdict of the run, the session's error says where,
    and an import makes the shared history whole again (nothing twice)."""
    import warnings

    from pytest_perfgate.store.live import LiveStore

    out, shared = tmp_path / "perfgate-results", tmp_path / "shared" / "h.sqlite"
    live = LiveStore(out, th, "20260101T000000Z-abcdef", history_at=shared)
    (out / "samples" / live.run_id).mkdir(parents=True)
    (out / "samples" / live.run_id / "0000-ttft.jsonl.gz").write_bytes(b"gz")
    assert live.shared and backend.history_of(out) == shared
    meta: dict[str, Any] = dict(started="2026-01-01T00:00:00", commit="c1", engines=[])
    vs = [_v("ttft", 0.2, f"samples/{live.run_id}/0000-ttft.jsonl.gz")]
    assert live.record_history(vs, **meta) == 1
    assert history.files(shared, live.run_id) == {f"samples/{live.run_id}/0000-ttft.jsonl.gz": b"gz"}
    shared.unlink()
    shared.mkdir()  # the shared history is gone: a folder where the file was
    vs += [_v("itl", 0.01), _v("tpot", 0.02)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        live.record_history(vs, **meta)
    assert [r["gate"] for r in history.verdicts(out / "history.sqlite")] == ["ttft", "itl", "tpot"]
    assert [r["seq"] for r in history.verdicts(out / "history.sqlite")] == [0, 1, 2]
    (msg,) = live.errors
    assert msg.startswith(f"{shared}: not a usable SQLite history") and "nothing measured is lost" in msg
    assert f"--import {out / 'history.sqlite'}" in msg and len(caught) == 1
    assert backend.history_of(out) == out / "history.sqlite"  # the report's trend reads the local file now
    vs.append(_v("e2e", 1.0))
    assert live.record_history(vs, **meta) == 1 and len(live.errors) == 1  # given up once, not retried
    shared.rmdir()
    history.record(shared, verdicts=[(0, vs[0])], **_meta(live.run_id))
    got = copy(out / "history.sqlite", shared)
    assert (got.runs, got.verdicts, got.files) == (0, 3, 1)  # the run made whole, its data file too
    assert [r["gate"] for r in history.verdicts(shared)] == ["ttft", "itl", "tpot", "e2e"]
