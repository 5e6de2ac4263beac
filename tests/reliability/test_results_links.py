"""Nothing is written through a symbolic link planted in the results folder (issue 38, item 9):
``samples/`` or ``engines/`` linked to a folder elsewhere, ``history.sqlite`` (or its -wal/-shm/
-journal) linked to a database elsewhere, ``decisions.json.lock`` a link (a loop). pytest's session
start and ``perfgate gate`` name the link and exit 4; every writer and store refuses a link below the
results root as it writes (a link planted after the start), and opens its files ``O_NOFOLLOW``.
Real links, real files, real SQLite."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from reliability_helpers import BENCH_EXPORT, ttft_p50_gates

from pytest_perfgate.cli import main
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.imports import load_results
from pytest_perfgate.runtime.atomic import atomic_write_text
from pytest_perfgate.runtime.links import LinkInResults, check, planted
from pytest_perfgate.session import enginelog
from pytest_perfgate.store import records
from pytest_perfgate.verdicts.verdict import evaluate

pytest_plugins = ["pytester"]

EXPORT = BENCH_EXPORT
GATES = ttft_p50_gates()
LINKED = ["samples", "engines", "history.sqlite", "history.sqlite-wal", "history.sqlite-shm", "history.sqlite-journal",
          "decisions.json.lock", "engines/baseline.log"]


def _elsewhere(tmp: Path, name: str) -> Path:
    """What the planted link points at: a folder for a folder's name, else a database (a file)."""
    if name in ("samples", "engines"):
        d = tmp / "elsewhere"
        d.mkdir()
        return d
    (tmp / "elsewhere-db").mkdir(exist_ok=True)
    db = tmp / "elsewhere-db" / "other.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (x)")
        con.execute("INSERT INTO t VALUES (1)")
    con.close()
    return db


def _plant(res: Path, name: str, target: Path) -> Path:
    link = res / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def _state(target: Path) -> tuple[list[str], str]:
    """What is elsewhere: the files beside the target and the target's bytes."""
    folder = target if target.is_dir() else target.parent
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    return names, hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else ""


@pytest.mark.parametrize("name", LINKED)
def test_perfgate_gate_refuses_a_planted_link_at_start(tmp_path: Path, name: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "res"
    target = _elsewhere(tmp_path, name)
    before = _state(target)
    link = _plant(res, name, target)
    (tmp_path / "thresholds.toml").write_text(GATES)
    rc = main(["gate", str(EXPORT), "--thresholds", str(tmp_path / "thresholds.toml"), "--out", str(res)])
    out, err = capsys.readouterr()
    assert rc == 4, out + err
    assert err.splitlines() == [f"perfgate gate: --out {res}: {name} is a symbolic link (to {target}): perfgate writes "
                                "nothing through a link in its results folder; remove it"]
    assert _state(target) == before  # nothing written elsewhere
    assert link.is_symlink() and not (res / "decisions.json").exists()  # nothing decided, nothing written


def test_a_lock_that_is_a_symlink_loop_is_named_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "res"
    res.mkdir()
    (res / "decisions.json.lock").symlink_to("decisions.json.lock")  # a loop: ELOOP when filelock opens it
    (tmp_path / "thresholds.toml").write_text(GATES)
    rc = main(["gate", str(EXPORT), "--thresholds", str(tmp_path / "thresholds.toml"), "--out", str(res)])
    err = capsys.readouterr().err
    assert rc == 4
    assert err == (f"perfgate gate: --out {res}: decisions.json.lock is a symbolic link (to decisions.json.lock): "
                   "perfgate writes nothing through a link in its results folder; remove it\n")


@pytest.mark.parametrize("name", ["samples", "engines", "history.sqlite", "engines/baseline.log"])
def test_pytest_refuses_a_planted_link_at_session_start(pytester: pytest.Pytester, name: str) -> None:
    res = pytester.path / "res"
    target = _elsewhere(pytester.path, name)
    before = _state(target)
    _plant(res, name, target)
    pytester.makefile(".toml", thresholds=GATES)
    pytester.makepyfile(f"""
        import pytest
        from pytest_perfgate import load_results

        @pytest.mark.gate("ttft_p50")
        def test_a(perfgate):
            perfgate.check(load_results({str(EXPORT)!r}))
    """)
    r = pytester.runpytest("-p", "no:xdist", "-p", "no:cacheprovider", "--perfgate-out", "res")
    assert r.ret == pytest.ExitCode.USAGE_ERROR, r.stdout.str() + r.stderr.str()
    r.stderr.fnmatch_lines([f"ERROR: perfgate: --perfgate-out {res}: {name} is a symbolic link (to {target}): "
                            "perfgate writes nothing through a link in its results folder; remove it"])
    assert "Traceback" not in r.stdout.str() + r.stderr.str()
    assert _state(target) == before


# -- a link planted after the start: each writer refuses it as it writes ---------------------------------------
@pytest.fixture
def stored(tmp_path: Path) -> tuple[object, object, object]:
    (tmp_path / "thresholds.toml").write_text(GATES)
    th = load_thresholds(tmp_path / "thresholds.toml")
    run = load_results(EXPORT)
    g = th.gate("ttft_p50")
    return g, evaluate(g, run, thresholds=th), run


@pytest.mark.parametrize("planted_at", ["samples", "samples/r1", "samples/r1/runs"])
def test_gate_data_is_not_written_through_a_link(tmp_path: Path, stored: tuple[object, object, object],
                                                 planted_at: str) -> None:
    g, v, run = stored
    res = tmp_path / "res"
    elsewhere = _elsewhere(tmp_path, "samples")
    _plant(res, planted_at, elsewhere)
    with pytest.raises(LinkInResults) as e:
        records.write(res, gate=g, verdict=v, data=run, confidence=0.95, run_id="r1", seq=0)  # type: ignore[arg-type]
    assert e.value.filename == str(res / planted_at)
    assert str(e.value).startswith(f"{planted_at} is a symbolic link (to {elsewhere})")
    assert list(elsewhere.iterdir()) == []


def test_a_data_file_is_opened_nofollow(tmp_path: Path, stored: tuple[object, object, object]) -> None:
    """The temporary file a data file is written to, planted as a link to a file elsewhere: not followed."""
    g, v, run = stored
    res = tmp_path / "res"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    _plant(res, "samples/r1/0000-ttft_p50.jsonl.gz.tmp", victim)
    with pytest.raises(OSError, match="symbolic link"):
        records.write(res, gate=g, verdict=v, data=run, confidence=0.95, run_id="r1", seq=0)  # type: ignore[arg-type]
    assert victim.read_text() == "keep me"


def test_engine_logs_are_not_written_through_a_link(tmp_path: Path) -> None:
    res = tmp_path / "res"
    elsewhere = _elsewhere(tmp_path, "engines")
    _plant(res, "engines", elsewhere)
    log = enginelog.log_path(res, "baseline")
    with pytest.raises(LinkInResults, match=r"^engines is a symbolic link"), enginelog.redirect_output(log, res):
        pass
    enginelog.append(log, "test", "captured output", res)  # a courtesy: nothing written, nothing raised
    enginelog.route_captured(res, "baseline", "t::x", [("Captured stdout call", "text")])
    assert enginelog.retarget_handlers(("vllm",), log, res)() is None
    assert list(elsewhere.iterdir()) == []


def test_an_engine_log_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    log = _plant(tmp_path / "res", "engines/baseline.log", victim)
    with pytest.raises(OSError, match="symbolic link"), enginelog.redirect_output(log):  # no root: the file itself
        pass
    enginelog.append(log, "test", "captured output")
    assert victim.read_text() == "keep me"


def test_history_is_not_written_through_a_link(tmp_path: Path) -> None:
    from pytest_perfgate.store import history

    res = tmp_path / "res"
    for side in ("", "-wal", "-shm", "-journal"):
        db = _elsewhere(tmp_path, "history.sqlite")
        before = _state(db)
        link = _plant(res, "history.sqlite" + side, db)
        with pytest.raises(LinkInResults, match=rf"^history\.sqlite{side} is a symbolic link"):
            history.record(history.path_of(res), run_id="r", started="s", git_commit=None, thresholds_file=None,
                           thresholds_sha256=None, engines=[], verdicts=[])
        assert _state(db) == before
        link.unlink()
        db.unlink()


def test_a_file_of_a_test_is_not_written_through_a_linked_folder(tmp_path: Path) -> None:
    res = tmp_path / "res"
    elsewhere = _elsewhere(tmp_path, "samples")
    _plant(res, "extra", elsewhere)
    with pytest.raises(LinkInResults):
        atomic_write_text(res / "extra" / "notes.txt", "x", root=res)  # Perfgate.write_text's way
    assert list(elsewhere.iterdir()) == []
    # the replaced files replace a link at their own name (never write through it)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    _plant(res, "summary.md", victim)
    atomic_write_text(res / "summary.md", "new", root=res)
    assert victim.read_text() == "keep me" and not (res / "summary.md").is_symlink()


def test_the_check_lets_a_linked_root_and_missing_parts_pass(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    root = _plant(tmp_path, "res", real)  # the root itself is the user's choice
    assert check(root / "samples" / "r1" / "x.gz", root) == root / "samples" / "r1" / "x.gz"
    assert planted(root) is None and planted(tmp_path / "missing") is None
    os.symlink("nowhere", real / "samples")  # a dangling link is a link
    assert planted(root) == ("samples is a symbolic link (to nowhere): perfgate writes nothing through a link in its "
                             "results folder; remove it")


def test_an_engine_whose_log_folder_became_a_link_is_a_one_line_start_error(tmp_path: Path) -> None:
    class StartError(Exception):
        pass

    class Manager:
        live = None

        def spec(self, name: str) -> object:
            return type("Spec", (), {"name": name})()

        def get(self, name: str) -> object:
            raise AssertionError("not started through a link")

    res = tmp_path / "res"
    elsewhere = _elsewhere(tmp_path, "engines")
    _plant(res, "engines", elsewhere)
    engines = enginelog.LoggedEngines(Manager(), res, lambda: contextlib.nullcontext(), StartError)
    with pytest.raises(StartError) as e:
        engines.get("baseline")
    assert str(e.value) == (f"[engines.baseline] not started: engine log {res / 'engines' / 'baseline.log'}: engines is a "
                            f"symbolic link (to {elsewhere}): perfgate writes nothing through a link in its results "
                            "folder; remove it")
    assert list(elsewhere.iterdir()) == []
