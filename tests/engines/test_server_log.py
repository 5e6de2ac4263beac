"""A vllm-server engine writes its server's output into the session's engine log and leaves it
there (issue 21, item 11: ``engines/<name>.log`` was empty and the real log deleted with the server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pytest_perfgate.engines import vllm_server
from pytest_perfgate.session.enginelog import redirect_output


def test_the_server_log_is_the_engine_log_while_the_engine_starts(tmp_path: Path) -> None:
    log = tmp_path / "engines" / "srv.log"
    with redirect_output(log):
        fd, path, own = vllm_server._server_log("srv")
        subprocess.run([sys.executable, "-c", "print('INFO vLLM API server version 0.32.0')"], stdout=fd, check=True)
        os.close(fd)
    assert (path, own) == (str(log), False)
    assert "INFO vLLM API server version" in log.read_text()


def test_elsewhere_a_temporary_log_is_used_and_removed_at_stop(tmp_path: Path) -> None:
    fd, path, own = vllm_server._server_log("srv")
    os.close(fd)
    assert own and Path(path).exists() and not path.startswith(str(tmp_path))
    eng = vllm_server.VLLMServerEngine.__new__(vllm_server.VLLMServerEngine)
    eng._client = eng._proc = eng._guard = None
    eng._log, eng._own_log = Path(path), True
    eng.stop()
    assert not Path(path).exists()


def test_stop_keeps_the_session_engine_log(tmp_path: Path) -> None:
    log = tmp_path / "srv.log"
    log.write_text("server lines\n")
    eng = vllm_server.VLLMServerEngine.__new__(vllm_server.VLLMServerEngine)
    eng._client = eng._proc = eng._guard = None
    eng._log, eng._own_log = log, False
    eng.stop()
    assert log.read_text() == "server lines\n"
