"""Start the ranks of an all-reduce benchmark as child processes (a real ``torch.distributed``
job: each rank is a process of its own that meets the others over TCP through ``env://``).

A rank may run inside a network namespace (``ip netns exec NAME``, see :mod:`.netns`), which
makes it a separate host on the network. Communication settings (NCCL_*, GLOO_*) go into the
ranks' environment only, never into this process's. Children get their own process group and are
killed with it when anything goes wrong (a failed rank, a timeout, Ctrl-C).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bench import BenchSpec


class LaunchError(RuntimeError):
    """A rank failed or the job timed out; the message carries each rank's exit status and stderr tail."""


@dataclass(frozen=True)
class Rank:
    """Where one rank runs: a network namespace (None: this one) and its own extra environment."""

    netns: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    host: str = "localhost"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(
    spec: BenchSpec,
    ranks: Sequence[Rank],
    *,
    backend: str = "gloo",
    layout: str = "local",
    comm: Mapping[str, str] | None = None,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    timeout_s: float = 300.0,
    python: str = sys.executable,
    realtime: bool = False,
) -> dict[str, Any]:
    """Run ``len(ranks)`` ranks of the benchmark; return rank 0's results document.

    ``realtime`` (root only) runs the ranks' timed loop under SCHED_FIFO, so that on a busy machine
    the measurement is the link's cost rather than the wait for a CPU behind other jobs (recorded in
    the document's ``priority``)."""
    if not ranks:
        raise ValueError("launch: need at least one rank")
    port = master_port or free_port()
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="perfgate-dist-") as tmp:
        out = Path(tmp) / "rank0.json"
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"spec": spec.to_dict(), "backend": backend, "layout": layout, "out": str(out),
                                   "timeout_s": timeout_s, "hosts": [r.host for r in ranks], "realtime": realtime}),
                       encoding="utf-8")
        procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        try:
            for i, r in enumerate(ranks):
                env = dict(os.environ)
                env.update({"RANK": str(i), "LOCAL_RANK": "0" if r.netns else str(i), "WORLD_SIZE": str(len(ranks)),
                            "MASTER_ADDR": master_addr, "MASTER_PORT": str(port)})
                env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
                env.update(comm or {})
                env.update(r.env)
                cmd = [python, "-m", "pytest_perfgate.distributed.worker", str(job)]
                if r.netns:
                    cmd = ["ip", "netns", "exec", r.netns, *cmd]
                err = Path(tmp) / f"rank{i}.err"
                with err.open("wb") as ef:
                    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=ef, start_new_session=True)
                procs.append((p, err))
            _wait(procs, timeout_s)
            doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
            return doc
        finally:
            for p, _ in procs:
                _kill(p)


def _wait(procs: Sequence[tuple[subprocess.Popen[bytes], Path]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p, _ in procs]
        if any(c not in (None, 0) for c in codes) or time.monotonic() > deadline:
            for p, _ in procs:
                _kill(p)
            lines = []
            for i, (p, err) in enumerate(procs):
                tail = err.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-6:]
                lines.append(f"rank {i}: exit {p.returncode}" + ("".join(f"\n    {t}" for t in tail)))
            why = f"timed out after {timeout_s:.0f} s" if all(c in (None, 0) for c in codes) else "a rank failed"
            raise LaunchError(f"all-reduce job {why}:\n  " + "\n  ".join(lines))
        if all(c == 0 for c in codes):
            return
        time.sleep(0.05)


def _kill(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
