"""``perfgate gate`` when its results cannot be written (issue 38, item 10): a full disk (ENOSPC), a
read-only folder (EROFS, EACCES), a ``decisions.json.lock`` that cannot be taken. One line per file
naming the path and the cause, what was written before is kept, the other files are still written,
exit 4; never a traceback. As pytest's recorder does (``plugin/recorder.py``). The causes are made by
a fake (``os.fsync`` of the atomic writes raising) everywhere, and for real where this process may
mount a tiny tmpfs or a read-only bind mount (root)."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_helpers import BENCH_EXPORT, ttft_p50_gates

from pytest_perfgate.cli import main

EXPORT = BENCH_EXPORT
GATES = ttft_p50_gates()
REPORTS = ("gates.xml", "summary.md", "report.html")


def gate(tmp_path: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    (tmp_path / "thresholds.toml").write_text(GATES)
    rc = main(["gate", str(EXPORT), "--thresholds", str(tmp_path / "thresholds.toml"), "--out", str(out)])
    o, e = capsys.readouterr()
    assert "Traceback" not in o + e
    return rc, o, e


def _runs_in_history(out: Path) -> int:
    with sqlite3.connect(out / "history.sqlite") as con:
        n = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    con.close()
    return int(n)


@pytest.mark.parametrize(("code", "cause"), [(errno.ENOSPC, "No space left on device"),
                                             (errno.EROFS, "Read-only file system"),
                                             (errno.EACCES, "Permission denied")])
def test_a_failing_write_is_one_line_and_keeps_what_was_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch, code: int,
                                                                cause: str) -> None:
    out = tmp_path / "out"
    assert gate(tmp_path, out, capsys)[0] == 0
    kept = {n: (out / n).read_bytes() for n in ("decisions.json", *REPORTS)}

    real = os.fsync

    def fsync(fd: int) -> None:  # only this folder's disk is full (not the results of the session running this)
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(out)):
            raise OSError(code, os.strerror(code))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)  # every atomic write (decisions.json, reports) fails at its end
    rc, o, e = gate(tmp_path, out, capsys)
    assert rc == 4
    lines = [ln for ln in e.splitlines() if ln.startswith("perfgate gate: could not write results: ")]
    assert lines[0] == f"perfgate gate: could not write results: {out / 'decisions.json'}: {cause}"
    assert lines[1].startswith(f"perfgate gate: could not write results: {out}: report writers failed: ")
    for w, f in (("junit", "gates.xml"), ("markdown", "summary.md"), ("html", "report.html")):
        assert f"{w} ({f}): {'PermissionError' if code == errno.EACCES else 'OSError'}: [Errno {code}] {cause}" in lines[1]
    assert len(lines) == 2
    assert e.splitlines() == lines, e  # nothing else on standard error
    assert "1 gate verdict(s): 1 passed, 0 not" in o  # decided and shown all the same
    assert {n: (out / n).read_bytes() for n in kept} == kept  # the earlier files are whole
    assert _runs_in_history(out) == 2  # what could be written was
    assert not [p for p in out.rglob("*.tmp")]  # nothing half-written left behind


def test_a_lock_that_cannot_be_taken_is_one_line_and_the_reports_are_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    (out / "decisions.json.lock").mkdir(parents=True)  # filelock: IsADirectoryError
    rc, o, e = gate(tmp_path, out, capsys)
    assert rc == 4
    assert e == f"perfgate gate: could not write results: {out / 'decisions.json.lock'}: Is a directory\n"
    for name in (*REPORTS, "history.sqlite"):
        assert (out / name).is_file(), name
    assert "ttft\\_p50 | ttft p50 | 130 ms" in (out / "summary.md").read_text()


def test_a_read_only_folder_is_named_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()

    def refuse(*a: object, **k: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)  # the start's probe file
    rc, _, e = gate(tmp_path, out, capsys)
    assert rc == 4
    assert e == f"perfgate gate: --out {out}: not writable (Read-only file system)\n"
    assert list(out.iterdir()) == []


# -- for real: a tiny tmpfs filled up, a read-only bind mount (root only) -------------------------------------
def _mount(*args: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "mnt"
    d.mkdir()
    yield d
    subprocess.run(["umount", str(d)], capture_output=True, check=False)


def test_a_really_full_disk(tmp_path: Path, mounted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not _mount("-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mounted)):
        pytest.skip("needs root to mount a tmpfs")
    out = mounted / "out"
    assert gate(tmp_path, out, capsys)[0] == 0
    summary = (out / "summary.md").read_bytes()
    fd = os.open(mounted / "filler", os.O_WRONLY | os.O_CREAT)  # the disk fills up
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as full:
        assert full.errno == errno.ENOSPC
    finally:
        os.close(fd)
    rc, _, err = gate(tmp_path, out, capsys)
    assert rc == 4
    lines = err.splitlines()
    assert lines and all(ln.startswith("perfgate gate: could not write results: ") for ln in lines), err
    # SQLite's own words for it: "database or disk is full", or "disk I/O error" when its journal cannot grow
    assert all(any(c in ln for c in ("No space left on device", "disk is full", "disk I/O error")) for ln in lines), err
    assert len(lines) == 4  # decisions.json, the data files, history.sqlite, the reports
    assert (out / "summary.md").read_bytes() == summary  # the earlier file is whole
    assert json.loads((out / "decisions.json").read_text())["phases"]["p"]["outcome"] == "passed"


def test_a_really_read_only_folder(tmp_path: Path, mounted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (_mount("--bind", str(mounted), str(mounted)) and _mount("-o", "remount,ro,bind", str(mounted))):
        pytest.skip("needs root to make a read-only bind mount")
    rc, _, e = gate(tmp_path, mounted / "out", capsys)
    assert rc == 4
    assert e == f"perfgate gate: --out {mounted / 'out'}: cannot be created in {mounted} (Read-only file system)\n"
