"""Server processes die with the session (real processes, no vLLM: a stand-in server that spawns a
grandchild, as vLLM's API server spawns EngineCore): the session SIGKILLed, the watchdog SIGKILLed,
the server exiting by itself, a SIGTERM to the watchdog alone, stale servers of earlier sessions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_perfgate.engines import procguard
from pytest_perfgate.runtime.timeouts import scaled

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl: Linux")

# a stand-in server: a grandchild that sleeps, then sleeps itself (exits with EXIT if set)
SERVER = ("import os, subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
          "time.sleep(float(os.environ.get('NAP', '600'))); sys.exit(int(os.environ.get('EXIT', '0')))")

# a stand-in session: guards the server, prints the watchdog's pid and the server's tag, sleeps
SESSION = """
import os, sys, time
from pathlib import Path
from pytest_perfgate.engines import procguard
g = procguard.spawn([sys.executable, "-c", sys.argv[2]], env=dict(os.environ), stdout=sys.stderr.fileno(),
                    name="stand-in", info={"port": 1}, directory=Path(sys.argv[1]))
print(g.proc.pid, g.server_id, flush=True)
time.sleep(600)
"""


#: every wait here is liveness only: it fails when something never happens (a process never starts
#: or never goes), however busy the machine; how long things took is printed, never asserted
LIVENESS_S = 120


def _wait(cond: object, what: str) -> None:
    deadline = time.monotonic() + scaled(LIVENESS_S)
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _session(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int, str]:
    proc = subprocess.Popen([sys.executable, "-c", SESSION, str(tmp_path), SERVER], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    pid, server_id = proc.stdout.readline().split()
    # watchdog, server, grandchild
    _wait(lambda: len(procguard.tagged(server_id)) == 3, f"the stand-in server never started: {procguard.tagged(server_id)}")
    return proc, int(pid), server_id


def _reap(proc: subprocess.Popen[str], server_id: str) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pid in procguard.tagged(server_id):  # pragma: no cover - only when a test failed
        os.kill(pid, signal.SIGKILL)


def test_sigkilled_session_takes_server_and_grandchildren_down(tmp_path: Path) -> None:
    proc, watchdog, server_id = _session(tmp_path)
    try:
        assert os.getpgid(watchdog) == watchdog  # the watchdog leads the server's group
        assert {os.getpgid(p) for p in procguard.tagged(server_id)} == {watchdog}
        [pidfile] = tmp_path.glob("stand-in-*.json")
        rec = json.loads(pidfile.read_text())
        assert (rec["server_id"], rec["pgid"], rec["owner_pid"], rec["port"]) == (server_id, watchdog, proc.pid, 1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t = time.monotonic()
        _wait(lambda: procguard.tagged(server_id) == [], f"orphans left: {procguard.tagged(server_id)}")
        took = time.monotonic() - t
        assert not pidfile.exists()
    finally:
        _reap(proc, server_id)
    print(f"orphans gone {took:.2f} s after the session's SIGKILL")


def test_sigkilled_watchdog_takes_the_server_down_by_its_death_signal(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: the server gets SIGTERM when its parent, the watchdog, dies."""
    proc, watchdog, server_id = _session(tmp_path)
    try:
        [server] = [p for p in procguard.tagged(server_id) if _ppid(p) == watchdog]
        os.kill(watchdog, signal.SIGKILL)
        # the server (direct child) goes; its own grandchild is reparented and outlives it
        _wait(lambda: procguard.start_time(server) is None, "the server outlived its watchdog")
        assert len(procguard.tagged(server_id)) == 1
        # ... and the next start finds it through the pid file once the session is gone too
        proc.kill()
        proc.wait()
        said = procguard.stop_stale(tmp_path, grace=scaled(5))
        _wait(lambda: procguard.tagged(server_id) == [], "the stale grandchild outlived its SIGKILL")
        assert len(said) == 1 and "1 process(es)" in said[0] and list(tmp_path.glob("*.json")) == []
    finally:
        _reap(proc, server_id)


@pytest.mark.parametrize("code", [3, -signal.SIGKILL])
def test_server_exit_status_passes_through_and_leftovers_go(tmp_path: Path, code: int) -> None:
    env = {**os.environ, "NAP": "1" if code > 0 else "600", "EXIT": str(max(code, 0))}
    g = procguard.spawn([sys.executable, "-c", SERVER], env=env, stdout=subprocess.DEVNULL, name="exit",
                        directory=tmp_path)
    try:
        if code < 0:
            _wait(lambda: len(procguard.tagged(g.server_id)) == 3, "the stand-in server never started")
            [server] = [p for p in procguard.tagged(g.server_id) if _ppid(p) == g.proc.pid]
            os.kill(server, -code)
        assert g.proc.wait(scaled(LIVENESS_S)) == code
        _wait(lambda: procguard.tagged(g.server_id) == [], "the server's grandchild outlived it")
    finally:
        for pid in procguard.tagged(g.server_id):  # pragma: no cover
            os.kill(pid, signal.SIGKILL)
        g.release()
    assert list(tmp_path.glob("*.json")) == []


def test_sigterm_to_the_watchdog_alone_reaches_the_server(tmp_path: Path) -> None:
    g = procguard.spawn([sys.executable, "-c", SERVER], env=dict(os.environ), stdout=subprocess.DEVNULL,
                        name="term", directory=tmp_path)
    try:
        _wait(lambda: len(procguard.tagged(g.server_id)) == 3, "the stand-in server never started")
        g.proc.terminate()  # the watchdog only, not the group
        assert g.proc.wait(scaled(LIVENESS_S)) == -signal.SIGTERM  # forwarded after 3 s; the server's status
        _wait(lambda: procguard.tagged(g.server_id) == [], "left behind after SIGTERM")
    finally:
        for pid in procguard.tagged(g.server_id):  # pragma: no cover
            os.kill(pid, signal.SIGKILL)
        g.release()


def test_stale_servers_of_dead_sessions_are_stopped_live_ones_kept(tmp_path: Path) -> None:
    """Pid files of a dead session (its processes still running, no watchdog: say it was killed with
    the session) are acted on; those of a live session, or naming a recycled pid, are not."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphans, keep, untagged = "a" * 32, "b" * 32, "c" * 32
    procs = [subprocess.Popen([sys.executable, "-c", SERVER], env={**os.environ, procguard.SERVER_ID_ENV: sid},
                              start_new_session=True) for sid in (orphans, keep)]
    # a group whose tag can't be read (vLLM's setproctitle may overwrite /proc/PID/environ): found by its group
    procs.append(subprocess.Popen([sys.executable, "-c", SERVER], start_new_session=True))
    try:
        _wait(lambda: len(procguard.tagged(orphans)) == 2 and len(procguard.tagged(keep)) == 2
              and len(procguard.group_members(procs[2].pid)) == 2, "not started")
        (tmp_path / "old-1.json").write_text(json.dumps(
            {"engine": "old", "server_id": orphans, "owner_pid": dead.pid, "owner_start": 1, "port": 8123}))
        (tmp_path / "old-2.json").write_text(json.dumps(
            {"engine": "older", "server_id": untagged, "owner_pid": dead.pid, "owner_start": 1,
             "pgid": procs[2].pid, "watchdog_start": procguard.start_time(procs[2].pid)}))
        # a group recorded with another start time: a recycled pid, never touched
        (tmp_path / "old-3.json").write_text(json.dumps(
            {"engine": "recycled", "server_id": untagged, "owner_pid": dead.pid, "owner_start": 1,
             "pgid": procs[1].pid, "watchdog_start": 1}))
        (tmp_path / "live-1.json").write_text(json.dumps(
            {"engine": "live", "server_id": keep, "owner_pid": os.getpid(),
             "owner_start": procguard.start_time(os.getpid())}))
        (tmp_path / "junk.json").write_text("{not json")
        said = procguard.stop_stale(tmp_path, grace=scaled(5))
        _wait(lambda: procguard.tagged(orphans) == [] and procguard.group_members(procs[2].pid) == [],
              "stale servers outlived their SIGKILL")
        assert len(procguard.tagged(keep)) == 2
        assert len(said) == 2 and said[0].startswith("stopped a stale server of an earlier run: engine 'old', port 8123, 2 process(es)")
        assert said[1].startswith("stopped a stale server of an earlier run: engine 'older', 2 process(es)")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["live-1.json"]
        # the live session's pid, recorded with another start time (a recycled pid): stale too
        (tmp_path / "live-1.json").write_text(json.dumps(
            {"engine": "live", "server_id": keep, "owner_pid": os.getpid(), "owner_start": 1}))
        assert len(procguard.stop_stale(tmp_path, grace=scaled(5))) == 1
        _wait(lambda: procguard.tagged(keep) == [], "the recycled-pid session's server outlived its SIGKILL")
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_servers_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PERFGATE_SERVER_DIR", raising=False)
    monkeypatch.setenv("PERFGATE_CACHE", str(tmp_path))
    assert procguard.servers_dir() == tmp_path / "servers"
    monkeypatch.setenv("PERFGATE_SERVER_DIR", str(tmp_path / "x"))
    assert procguard.servers_dir() == tmp_path / "x"


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2 :].split()[1])
