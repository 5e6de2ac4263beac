"""Nothing is left running: a real pytest run with a ``vllm-server`` engine (tiny models),
interrupted with SIGINT in the middle of a measurement, leaves no process, no listening port and
no temporary file of the plugin behind -- and keeps the verdict measured before the interrupt."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from reliability_helpers import closed_port, listening, perfgate_temp_files, tagged_processes

from pytest_perfgate.engines import procguard
from pytest_perfgate.runtime.timeouts import scaled

LIVENESS_S = 120  # waits that fail only when something never happens (processes never go)

pytest_plugins = ["pytester"]

TESTS = """
from pathlib import Path
import pytest
from pytest_perfgate.contract import Request
from pytest_perfgate.load.schedule import LoadConfig

PROMPT = tuple(range(10, 74))

@pytest.mark.gate("ttft")
@pytest.mark.engine("srv")
def test_first(perfgate, perfgate_engine, perfgate_engines):
    run = perfgate_engines.run("srv", [Request(PROMPT, 8)], LoadConfig(num_requests=8))
    perfgate.check(run)

@pytest.mark.engine("srv")
def test_long(perfgate_engine, perfgate_engines):
    def progress(done, total, seconds):
        if done == 3:
            Path("measuring").write_text("1")
    from pytest_perfgate.load.runner import run_load
    run_load(perfgate_engine, [Request(PROMPT, 64)], LoadConfig(num_requests=100_000), progress)
"""


def _server_thresholds(port: int, startup_timeout: float) -> str:
    """One gate measured on ``srv``, a ``vllm-server`` engine on the tiny target model at ``port``."""
    return f"""
[phases.p]
[gates.ttft]
phase = "p"
metric = "ttft"
statistic = "p50"  # 8 requests decide a median; a mean needs more (stats.MEAN_MIN_N)
max = "60 s"

[engines.srv]
kind = "vllm-server"
model = "embedded:target"
port = {port}
dtype = "float32"
max_model_len = 512
gpu_memory_utilization = 0.3
startup_timeout = {startup_timeout:.0f}
env = {{ VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1" }}
"""


def _pytest_process(cwd: Path, tag: str, **env: str) -> subprocess.Popen[str]:
    """pytest in ``cwd`` as a child process whose processes carry ``tag`` (output on its stdout)."""
    full = {**os.environ, "PERFGATE_TEST_TAG": tag, "VLLM_CPU_KVCACHE_SPACE": "1", **env}
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s"], cwd=cwd,
                            env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _listening_of(tag: str) -> list[int]:
    """Loopback ports in LISTEN state owned by processes carrying the tag."""
    psutil = pytest.importorskip("psutil")
    pids = {int(p.split(":")[0]) for p in tagged_processes(tag)}
    return sorted(c.laddr.port for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.pid in pids)


@pytest.mark.needs_engine
def test_sigint_mid_measurement_leaves_nothing_behind(pytester: pytest.Pytester) -> None:
    port = closed_port()
    tag = uuid.uuid4().hex
    tmp = Path(tempfile.mkdtemp(prefix="reliability-tmp-"))
    pytester.makefile(".toml", thresholds=_server_thresholds(port, 300))
    pytester.makepyfile(test_engine=TESTS)
    assert tagged_processes(tag) == [] and not listening(port)
    proc = _pytest_process(pytester.path, tag, TMPDIR=str(tmp))
    try:
        t = time.monotonic()
        while not (pytester.path / "measuring").exists():
            assert proc.poll() is None, proc.communicate()[0][-5000:]
            assert time.monotonic() - t < scaled(400), "the measurement never started"
            time.sleep(0.2)
        during = tagged_processes(tag)
        assert any("vllm.entrypoints.openai.api_server" in p for p in during), during
        assert listening(port) and port in _listening_of(tag)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, _ = proc.communicate(timeout=scaled(90))
    finally:
        if proc.poll() is None:  # pragma: no cover - keep the machine clean whatever happens
            proc.kill()
            proc.wait()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-5000:]
    # nothing left: processes (the server's whole group), the port, the plugin's temp files
    # (the wait: liveness only, for processes the kernel is still taking down)
    deadline = time.monotonic() + scaled(LIVENESS_S)
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tagged_processes(tag) == [], out[-3000:]
    assert not listening(port)
    assert perfgate_temp_files(tmp) == []
    shutil.rmtree(tmp, ignore_errors=True)
    # nothing lost: the verdict measured before the interrupt is in every result file
    res = pytester.path / "perfgate-results"
    d = json.loads((res / "decisions.json").read_text())["phases"]["p"]
    assert [(v["gate"], v["outcome"], v["n"]) for v in d["verdicts"]] == [("ttft", "pass", 8)]
    assert d["engines"] and d["engines"][0]["kind"] == "vllm-server"
    assert ET.parse(res / "gates.xml").getroot().find(".//testcase[@name='ttft']") is not None


SLEEPER = """
import time
import pytest

@pytest.mark.engine("srv")
def test_holds_the_server(perfgate_engine):
    time.sleep(600)
"""


@pytest.mark.needs_engine
def test_sigkilled_pytest_leaves_no_server_behind(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """pytest SIGKILLed (a CI job cancelled, a test runner's timeout) while its ``vllm-server``
    engine runs: the watchdog takes the server, vLLM's EngineCore and its workers down; nothing
    holds the port; the pid file is gone. pytest is killed as soon as EngineCore (a grandchild)
    exists, which is what PR_SET_PDEATHSIG alone would leave behind."""
    port = closed_port()
    tag = uuid.uuid4().hex
    servers = tmp_path / "servers"
    pytester.makefile(".toml", thresholds=_server_thresholds(port, scaled(300)))
    pytester.makepyfile(test_sleeper=SLEEPER)
    proc = _pytest_process(pytester.path, tag, PERFGATE_SERVER_DIR=str(servers))
    def server_group() -> list[str]:  # vLLM renames its processes, which may hide their environment
        recs = [json.loads(f.read_text()) for f in servers.glob("srv-*.json")]
        return [f"{p}: {_cmdline(p)}" for r in recs for p in procguard.group_members(int(r["pgid"]))]

    try:
        t = time.monotonic()
        while not any("VLLM::EngineCore" in p for p in server_group()):
            assert proc.poll() is None, proc.communicate()[0][-5000:]
            assert time.monotonic() - t < scaled(300), f"vLLM's EngineCore never started: {server_group()}"
            time.sleep(0.2)
        [rec] = [json.loads(f.read_text()) for f in servers.glob("srv-*.json")]
        during = server_group()
        proc.kill()
        proc.wait()
        t = time.monotonic()
        # liveness only: the watchdog's SIGTERM, its 10-s grace, its SIGKILL; how long it took is printed
        while (procguard.group_members(rec["pgid"]) or tagged_processes(tag)) and time.monotonic() - t < scaled(LIVENESS_S):
            time.sleep(0.2)
        took = time.monotonic() - t
        left = procguard.group_members(rec["pgid"]) + procguard.tagged(rec["server_id"])
    finally:
        if proc.poll() is None:  # pragma: no cover
            proc.kill()
            proc.wait()
    assert left == [] and tagged_processes(tag) == [], f"orphans after pytest's SIGKILL: {left} (before: {during})"
    assert not listening(port)
    assert list(servers.glob("*.json")) == []
    print(f"{len(during)} server processes ({', '.join(during)}) gone {took:.1f} s after pytest's SIGKILL")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
    except OSError:
        return "?"
