"""Server processes that die with the session, even when pytest is SIGKILLed.

A server engine's command does not run as pytest's child directly: it runs under a small
**watchdog** (this file, run as a script with ``python -I``, stdlib only), started in a new
session, so it leads the process group that the server and everything the server spawns
(vLLM's EngineCore, workers) belong to:

* the watchdog starts the server with ``PR_SET_PDEATHSIG`` = SIGTERM (``prctl`` through ctypes, in
  the child before ``exec``; safe there, the watchdog has a single thread): if the watchdog is
  killed, the kernel signals the server at once;
* the watchdog holds the read end of a pipe whose write end only the session holds, and checks
  ``getppid()``: when the session goes (EOF, or the watchdog was re-parented), it SIGTERMs its whole
  process group plus every process carrying the server's tag (the ``PERFGATE_SERVER_ID``
  environment variable, which children inherit), SIGKILLs what is left after a grace period,
  removes the pid file and exits. ``PR_SET_PDEATHSIG`` alone would not do: it reaches only the
  direct child, not vLLM's grandchildren, and it fires when the *thread* that forked exits;
* when the server exits by itself, the watchdog stops what the server left in its group and exits
  with the server's status (a signal death is re-raised, so the status reads the same);
* a SIGTERM/SIGINT/SIGHUP to the watchdog alone reaches the server too (forwarded if the server is
  still up 3 s later: a group-wide SIGTERM already reached it, and vLLM takes a second one as
  "force quit").

Each guarded server also has a **pid file** (JSON) in :func:`servers_dir`: the watchdog's pid
(= the group), the server's tag, and the owning session's pid and start time. At the next start of
any server engine, :func:`stop_stale` stops the servers whose session is gone (say, a watchdog
SIGKILLed together with its session by an OOM killer) -- only processes that carry the recorded
tag or are in the recorded process group while it is still that group, so a recycled pid is never
hit -- and removes their files.

Linux only (``/proc``, ``prctl``); elsewhere the server runs under the watchdog without the
death signal and stale servers are not looked for.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

SERVER_ID_ENV = "PERFGATE_SERVER_ID"
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.2
_GRACE_S = 10.0  # SIGTERM -> SIGKILL when the session is gone or for stale servers
_FORWARD_AFTER_S = 3.0


def servers_dir() -> Path:
    """Where pid files live: ``$PERFGATE_SERVER_DIR``, else ``$PERFGATE_CACHE/servers``, else
    ``~/.cache/pytest-perfgate/servers``."""
    env = os.environ.get("PERFGATE_SERVER_DIR")
    if env:
        return Path(env)
    cache = os.environ.get("PERFGATE_CACHE")
    return Path(cache) / "servers" if cache else Path.home() / ".cache" / "pytest-perfgate" / "servers"


# -- /proc -------------------------------------------------------------------------------------
def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, ``/proc/PID/stat`` field 22), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields and fields[0] == b"Z":  # a zombie has ended
        return None
    return int(fields[19])


def alive(pid: int, started: int | None) -> bool:
    """Is ``pid`` running and the same process as the one that started at ``started``?"""
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def _pids() -> list[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def _proc_files(name: str) -> Iterator[tuple[int, bytes]]:
    """(pid, the bytes of ``/proc/PID/NAME``) of every process, those gone (or unreadable) left out."""
    for pid in _pids():
        try:
            data = Path(f"/proc/{pid}/{name}").read_bytes()
        except OSError:
            continue
        yield pid, data


def tagged(server_id: str) -> list[int]:
    """Live processes whose environment carries ``PERFGATE_SERVER_ID=server_id``."""
    needle = f"{SERVER_ID_ENV}={server_id}".encode()
    return [pid for pid, env in _proc_files("environ") if needle in env.split(b"\0") and start_time(pid) is not None]


def group_members(pgid: int) -> list[int]:
    """Live processes in process group ``pgid``."""
    out = []
    for pid, stat in _proc_files("stat"):
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            out.append(pid)
    return out


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _end(find: Callable[[], list[int]], grace: float) -> list[int]:
    """SIGTERM what ``find()`` returns, wait up to ``grace`` s, SIGKILL the rest; the pids found."""
    first = find()
    _signal_all(first, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = first
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = find()
    _signal_all(left, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = find()
    return first


def pdeathsig(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to send ``sig`` when the parent (thread) dies."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)

    return preexec


# -- the session's side ------------------------------------------------------------------------
@dataclass
class Guarded:
    """A server under a watchdog: ``proc`` is the watchdog (its exit status is the server's)."""

    proc: subprocess.Popen[bytes]
    server_id: str
    pidfile: Path | None
    _pipe_w: int | None

    def release(self) -> None:
        """After the server has been stopped: close the session's end of the pipe, drop the pid file."""
        fd, self._pipe_w = self._pipe_w, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.pidfile is not None:
            with contextlib.suppress(OSError):
                self.pidfile.unlink()


def spawn(
    command: Sequence[str], *, env: Mapping[str, str], stdout: IO[bytes] | int, name: str,
    info: Mapping[str, Any] | None = None, directory: Path | None = None,
) -> Guarded:
    """Start ``command`` under a watchdog (see the module doc) and write its pid file."""
    server_id = uuid.uuid4().hex
    r, w = os.pipe()  # not inheritable (PEP 446): only the watchdog gets ``r`` (pass_fds)
    pidfile = (directory or servers_dir()) / f"{_safe(name)}-{server_id[:12]}.json"
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve()), "--parent", str(os.getpid()), "--fd", str(r),
             "--pidfile", str(pidfile), "--", *command],
            stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**env, SERVER_ID_ENV: server_id}, start_new_session=True, pass_fds=(r,),
        )
    except BaseException:
        os.close(w)
        raise
    finally:
        os.close(r)
    record = {
        "engine": name, "server_id": server_id, "pgid": proc.pid, "watchdog_start": start_time(proc.pid),
        "owner_pid": os.getpid(), "owner_start": start_time(os.getpid()), "created": time.time(),
        "command": list(command), **dict(info or {}),
    }
    try:
        pidfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = pidfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, pidfile)
    except OSError:  # no pid file: the watchdog still guards this session's server
        pidfile = None  # type: ignore[assignment]
    return Guarded(proc, server_id, pidfile, w)


def stop_stale(directory: Path | None = None, grace: float = _GRACE_S) -> list[str]:
    """Stop the servers of sessions that are gone (see the module doc); one line per server stopped."""
    root = directory or servers_dir()
    if not sys.platform.startswith("linux") or not root.is_dir():
        return []
    said = []
    for f in sorted(root.glob("*.json")):
        try:
            rec = json.loads(f.read_text())
            server_id = str(rec["server_id"])
            owner, owner_start = int(rec["owner_pid"]), rec.get("owner_start")
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                f.unlink()
            continue
        if alive(owner, owner_start):
            continue  # its session still runs (another pytest, an xdist worker)
        stopped = _end(functools.partial(_recorded, rec, server_id), grace)
        with contextlib.suppress(OSError):
            f.unlink()
        if stopped:
            port = f", port {rec['port']}" if rec.get("port") else ""
            said.append(f"stopped a stale server of an earlier run: engine {rec.get('engine')!r}{port}, "
                        f"{len(stopped)} process(es) ({', '.join(map(str, sorted(stopped)))}), "
                        f"pid file {f}")
    return said


def _recorded(rec: Mapping[str, Any], server_id: str) -> list[int]:
    """The live processes of the server a pid file records: those in its process group (while the
    group is still the recorded one: its leader, the watchdog, alive with the recorded start time,
    or gone and the members no older than it) and those carrying its tag. Both, because vLLM's
    processes rename themselves (``VLLM::EngineCore``) with setproctitle, which may overwrite their
    environment as ``/proc`` shows it."""
    pids = set(tagged(server_id))
    pgid, wd_start = rec.get("pgid"), rec.get("watchdog_start")
    if isinstance(pgid, int) and pgid > 1 and isinstance(wd_start, int):
        leader = start_time(pgid)
        if leader is None or leader == wd_start:
            pids.update(p for p in group_members(pgid) if (start_time(p) or -1) >= wd_start)
    pids.discard(os.getpid())
    return sorted(pids)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "engine"


# -- the watchdog ------------------------------------------------------------------------------
def _watch(parent: int, fd: int, pidfile: str, command: list[str]) -> int:
    me = os.getpid()
    pgid = os.getpgrp()
    got: list[int] = []

    def on_signal(sig: int, _frame: Any) -> None:
        got.append(sig)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    child = subprocess.Popen(command, preexec_fn=pdeathsig(signal.SIGTERM))
    server_id = os.environ.get(SERVER_ID_ENV, "")

    def others() -> list[int]:
        pids = set(group_members(pgid))
        if server_id:
            pids.update(tagged(server_id))
        pids.discard(me)
        return sorted(pids)

    forwarded = False
    first_signal: float | None = None
    while True:
        code = child.poll()
        if code is not None:
            _end(others, 2.0)  # what the server left behind
            if code < 0:  # die of the same signal (SIGKILL's disposition can't be set, nor needs to)
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(-code, signal.SIG_DFL)
                os.kill(me, -code)
            return code
        if got and not forwarded:
            first_signal = first_signal or time.monotonic()
            if time.monotonic() - first_signal > _FORWARD_AFTER_S:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(got[0])
                forwarded = True
        try:
            ready, _, _ = select.select([fd], [], [], _POLL_S)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            ready = []
        gone = os.getppid() != parent
        if ready and not gone:
            try:
                gone = os.read(fd, 1) == b""
            except OSError:
                gone = True
        if gone:  # the session is gone: take everything down, then ourselves
            for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(s, signal.SIG_IGN)
            _end(others, _GRACE_S)
            with contextlib.suppress(OSError):
                os.unlink(pidfile)
            return 0


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: procguard.py --parent PID --fd N --pidfile PATH -- COMMAND...", file=sys.stderr)
        return 2
    i = argv.index("--")
    opts = dict(zip(argv[:i:2], argv[1:i:2], strict=True))
    return _watch(int(opts["--parent"]), int(opts["--fd"]), opts.get("--pidfile", ""), argv[i + 1 :])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
