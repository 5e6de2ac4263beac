"""The scripted calibration server in a process of its own (real loopback sockets, its own clock
reads): shared by the cross-process timing tests (test_timing_calibration.py, test_replay.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_perfgate.engines.openai import OpenAIEngine


@contextmanager
def scripted_server_process() -> Iterator[str]:
    """``python -m pytest_perfgate.calib.scripted_server`` on a free loopback port; yields its base URL
    once it says it is listening, and terminates it at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "pytest_perfgate.calib.scripted_server", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert "scripted server on" in line, line
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def ground_truth(url: str) -> dict[str, dict[str, Any]]:
    """The server's own record of each request it served, by the client's request id."""
    with urllib.request.urlopen(url + "/ground_truth", timeout=10) as r:
        return {t["client_id"]: t for t in json.loads(r.read())["requests"] if t["client_id"]}


@contextmanager
def calibration_engine(url: str, **args: Any) -> Iterator[OpenAIEngine]:
    """A started OpenAI engine on the scripted server at ``url`` (``args`` add to its arguments, e.g.
    ``transport``), stopped at the end."""
    eng = OpenAIEngine("cal", {"base_url": url, "model": "scripted", "timeout": 10, **args})
    eng.start()
    try:
        yield eng
    finally:
        eng.stop()
