"""A perfgate session ends without Python's shutdown collections (startup.freeze_heap_at_exit):
with vLLM loaded they took 4.2-5.4 s after the last test on the busy 2-core runner (0.5-0.6 s
frozen), and without nanobind's report of what the frozen heap keeps (issue 25)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_perfgate.session import startup

pytest_plugins = ["pytester"]


def test_registered_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(startup.atexit, "register", calls.append)
    monkeypatch.setattr(startup, "_EXIT_FREEZE", False)
    startup.freeze_heap_at_exit()
    startup.freeze_heap_at_exit()
    assert calls == [startup._freeze_and_filter]


def _session(tmp_path: Path, thresholds: bool, conftest: str = "") -> str:
    # a conftest's exit handler is registered before the plugin's (at conftest import), so it runs
    # after it and sees the frozen heap
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        import atexit, gc, os
        atexit.register(lambda: os.write(1, f"FROZEN {gc.get_freeze_count()}\\n".encode()))
    """) + textwrap.dedent(conftest))
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"]
    if thresholds:
        (tmp_path / "thresholds.toml").write_text('[phases.phase1]\n')
        args += ["--perfgate-thresholds", "thresholds.toml", "--perfgate-out", "out"]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout + "\nSTDERR\n" + proc.stderr


def test_a_perfgate_session_freezes_the_heap_at_exit(tmp_path: Path) -> None:
    out = _session(tmp_path, thresholds=True)
    count = int(out.split("FROZEN ")[1].split()[0])
    assert count > 10_000, out[-1000:]


def test_a_session_without_perfgate_exits_as_usual(tmp_path: Path) -> None:
    assert "FROZEN 0" in _session(tmp_path, thresholds=False)


def test_pytest_teardown_collections_run_on_a_frozen_heap_and_nothing_stays_frozen(pytester: pytest.Pytester) -> None:
    """pytest's own full collections at unconfigure find the heap frozen (0.8 s each with vLLM
    loaded); an in-process session leaves the caller's heap as it found it."""
    pytester.makeconftest("""
        import gc, pytest
        SEEN = []

        @pytest.hookimpl(trylast=True)
        def pytest_unconfigure(config):
            SEEN.append(gc.get_freeze_count())
            print("FROZEN DURING TEARDOWN", SEEN[-1] > 0)
    """)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    pytester.makefile(".toml", thresholds="[phases.phase1]\n")
    assert gc.get_freeze_count() == 0
    r = pytester.runpytest("-p", "no:cacheprovider", "-s", "--perfgate-thresholds", "thresholds.toml")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["FROZEN DURING TEARDOWN True"])
    assert gc.get_freeze_count() == 0
    assert not startup.TEARDOWN_GC.frozen


def test_nanobind_leak_report_is_not_printed_and_other_late_output_is(tmp_path: Path) -> None:
    """triton's nanobind bindings report the objects the frozen heap keeps ("nanobind: leaked 4
    instances! ... 514 functions!", 27-31 lines) after Python's shutdown: filtered out, while a line
    written to standard error after the freeze (a real shutdown error) still reaches it."""
    out = _session(tmp_path, thresholds=True, conftest="""
        import triton  # its nanobind module reports leaks when the heap is frozen at exit
        atexit.register(lambda: os.write(2, b"a real error after the freeze\\n"))
    """)
    err = out.split("\nSTDERR\n", 1)[1]
    assert "nanobind" not in err, err[-2000:]
    assert "a real error after the freeze" in err, err[-2000:]
    assert int(out.split("FROZEN ")[1].split()[0]) > 10_000


def test_the_filter_drops_only_nanobinds_report() -> None:
    report = (b"before\nnanobind: leaked 4 instances!\n - leaked instance 0x1 of type \"t\"\n"
              b"nanobind: leaked 64 types!\n - leaked type \"x\"\n - ... skipped remainder\n"
              b"nanobind: this is likely caused by a reference counting issue in the binding code.\n"
              b"See https://nanobind.readthedocs.io/en/latest/refleaks.html\n - a list item of someone else\nafter\n")
    got = subprocess.run([sys.executable, "-S", "-I", "-c", startup._NANOBIND_FILTER], input=report,
                         capture_output=True, check=True).stdout
    assert got == b"before\n - a list item of someone else\nafter\n"
