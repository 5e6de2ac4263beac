"""The session's last engine stop runs on a thread while the main thread writes to the terminal:
what the engine's library logs then (vLLM's "[shutdown]" lines) goes to the engine's log (issue 25)."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_perfgate.session import enginelog


def test_library_handlers_write_to_the_log_until_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stdout", terminal)
    lib, other = logging.getLogger("vllm.fake_shutdown"), logging.getLogger("someone_else")
    mine, theirs = logging.StreamHandler(sys.stdout), logging.StreamHandler(sys.stdout)
    lib.addHandler(mine)
    other.addHandler(theirs)
    try:
        restore = enginelog.retarget_handlers(("vllm",), tmp_path / "engines" / "e.log")
        lib.warning("[shutdown] MPClient: start")
        other.warning("the user's own line")
        restore()
        lib.warning("after the stop")
    finally:
        lib.removeHandler(mine)
        other.removeHandler(theirs)
    assert (tmp_path / "engines" / "e.log").read_text() == "[shutdown] MPClient: start\n"
    assert terminal.getvalue() == "the user's own line\nafter the stop\n"


class _Mgr:
    """An engine manager whose stop logs like vLLM's, at a moment the test chooses."""

    class live:
        name = "baseline"

    def close_in_background(self) -> Callable[[float], str | None]:
        logging.getLogger("vllm.fake_stop").warning("[shutdown] Process manager: send sigterm")
        return lambda timeout_s: None


def test_the_last_stop_logs_into_the_engine_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stdout", terminal)
    log = logging.getLogger("vllm.fake_stop")
    h = logging.StreamHandler(sys.stdout)
    log.addHandler(h)
    try:
        logged = enginelog.LoggedEngines(_Mgr(), tmp_path, lambda: None, RuntimeError)  # type: ignore[arg-type,return-value]
        wait = logged.close_in_background()
        assert wait(1.0) is None
        assert h.stream is terminal  # put back once waited for
    finally:
        log.removeHandler(h)
    assert "send sigterm" in enginelog.log_path(tmp_path, "baseline").read_text()
    assert terminal.getvalue() == ""
