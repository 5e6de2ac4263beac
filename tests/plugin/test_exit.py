"""A perfgate session ends without Python's shutdown collections (startup.freeze_heap_at_exit):
with vLLM loaded they took 2.4-3.2 s after the last test on the 2-core runner."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_perfgate import startup

pytest_plugins = ["pytester"]


def test_registered_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(startup.atexit, "register", calls.append)
    monkeypatch.setattr(startup, "_EXIT_FREEZE", False)
    startup.freeze_heap_at_exit()
    startup.freeze_heap_at_exit()
    assert calls == [startup.gc.freeze]


def _session(tmp_path: Path, thresholds: bool) -> str:
    # a conftest's exit handler is registered before the plugin's (at conftest import), so it runs
    # after it and sees the frozen heap
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        import atexit, gc, os
        atexit.register(lambda: os.write(1, f"FROZEN {gc.get_freeze_count()}\\n".encode()))
    """))
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"]
    if thresholds:
        (tmp_path / "thresholds.toml").write_text('[phases.phase1]\n')
        args += ["--perfgate-thresholds", "thresholds.toml", "--perfgate-out", "out"]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


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
