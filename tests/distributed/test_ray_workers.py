"""Client workers on two real hosts through Ray (load/ray_workers.py): a Ray head in the root network
namespace, a Ray worker node in a namespace of its own (a veth pair, its own address), the scripted
server on the root end of the veth; one run with a worker on each node. Every Ray process and the
namespace are gone afterwards."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from pytest_perfgate.contract import Request
from pytest_perfgate.distributed import netns
from pytest_perfgate.distributed.netns import RootPeer
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
START_TIMEOUT_S = 240.0  # Ray on a busy 2-core machine: a minute or more per node
pytestmark = [
    pytest.mark.skipif(netns.unavailable_reason() is not None, reason=str(netns.unavailable_reason())),
    pytest.mark.skipif(not RAY.exists(), reason="Ray is not installed (pip install 'pytest-perfgate[ray]')"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _own_ip() -> str:
    """This machine's default-route address (what Ray's head and driver pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.123", 9))  # no packet is sent
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


SESSIONS: list[int] = []  # the session of each node's ``ray start`` (start_new_session): its Ray processes


def _ray_pids() -> list[int]:
    """The processes of this test's clusters: those in the sessions of its ``ray start`` commands (Ray
    renames its agents' command lines, ``ray::DashboardAgent``, over their environment: neither names them)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone
                continue
            if fields[0] != "Z" and int(fields[3]) in SESSIONS:  # state, ppid, pgrp, session
                out.append(int(d.name))
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """``ray start --block`` ends its node's processes on SIGTERM; what is left of this cluster is killed by pid."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    deadline = time.monotonic() + 5  # its agents (children of its raylet) may outlive it: what is left is killed
    while _ray_pids() and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in _ray_pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@contextmanager
def _node(argv: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    SESSIONS.append(proc.pid)
    try:
        yield proc
    finally:
        _stop(proc)


def _wait_for_nodes(address: str, n: int) -> None:
    import ray

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            break
        except Exception:  # the head is not up yet
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
    try:
        while sum(1 for x in ray.nodes() if x.get("Alive")) < n:
            assert time.monotonic() < deadline, f"Ray: {n} nodes not up after {START_TIMEOUT_S:g} s: {ray.nodes()}"
            time.sleep(1)
    finally:
        ray.shutdown()


@contextmanager
def _cluster(peer: RootPeer, temp: str) -> Iterator[str]:
    """A Ray head here and a worker node inside ``peer``'s namespace; yields the head's address."""
    ip, port = _own_ip(), _free_port()
    common = ["--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp}", "--block"]
    with ExitStack() as stack:
        stack.enter_context(_node([str(RAY), "start", "--head", f"--node-ip-address={ip}", f"--port={port}",
                                   "--include-dashboard=false", *common]))
        address = f"{ip}:{port}"
        stack.enter_context(_node(peer.exec(str(RAY), "start", f"--address={address}",
                                            f"--node-ip-address={peer.peer_addr}", *common)))
        _wait_for_nodes(address, 2)
        yield address


@contextmanager
def _server(host: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pytest_perfgate.calib.scripted_server", "--host", host,
                             "--port", str(port), "--ttft", "0.005", "--itl", "0.002"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert "scripted server on" in line, line
        yield f"http://{host}:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def temp() -> Iterator[str]:
    """The cluster's Ray temp dir (short: Ray's socket paths must fit 107 bytes), removed after."""
    path = f"/tmp/pgray-{os.getpid()}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_workers_on_two_hosts_through_ray(temp: str) -> None:
    if _own_ip().startswith("127."):
        pytest.skip("no default route: the namespace could not reach a Ray head on this machine's address")
    mine = f"{netns.PREFIX}-{os.getpid()}-"
    reqs = [Request(prompt=f"hello {i}", max_tokens=8, tag="t") for i in range(10)]
    t0 = time.monotonic()
    with RootPeer(tag="ray") as peer, _server(peer.root_addr) as url, _cluster(peer, temp) as address:
        t_up = time.monotonic()
        eng = OpenAIEngine("cal", {"base_url": url, "model": "scripted", "timeout": 10})
        eng.start()
        try:
            res = run_load(eng, reqs, LoadConfig(mode="poisson", rate=20.0, num_requests=40, warmup=1,
                                                 ray=address, per_node=1))
        finally:
            eng.stop()
        t_run = time.monotonic()
    print(f"ray cluster up in {t_up - t0:.1f} s, run {t_run - t_up:.1f} s, cleanup {time.monotonic() - t_run:.1f} s")
    measured = res.measured
    assert [r.index for r in measured] == list(range(40)) and all(r.ok for r in measured), \
        [r.error for r in measured if not r.ok][:3]
    hosts = {r.host for r in measured}
    assert hosts == {address.split(":")[0], netns.PEER_ADDR}, hosts
    for r in measured:  # host-local durations: every chunk after its send, on the host that sent it
        assert r.chunk_ns and r.chunk_ns[0] > r.sent_ns and r.end_ns is not None and r.end_ns >= r.chunk_ns[-1]
    assert len(res.worker_health) == 2 and {h.host for h in res.worker_health} == hosts
    for h in res.worker_health:  # one machine, one CLOCK_MONOTONIC: the true offset is 0
        print(h.text())
        assert 0 < h.clock_uncertainty < 1.0 and abs(h.clock_offset) <= h.clock_uncertainty + 50e-6, h.text()
    assert res.health is not None and res.health.clock_uncertainty == max(h.clock_uncertainty for h in res.worker_health)
    assert "clock offset" in res.worker_health[0].text()
    # nothing left: the namespace (and its veth) and every Ray process of this cluster
    assert not [n for n in netns.list_namespaces() if n.startswith(mine)]
    assert not _ray_pids()
    left = subprocess.run(["pgrep", "-f", f"raylet.*{temp}|gcs_server.*{temp}"], capture_output=True, text=True).stdout
    assert not left.strip(), left
