"""Send lag of a trace replay (``LoadConfig(mode="trace")``) on loopback: the scripted server in its
own process, 1,000 requests at Poisson arrivals of 50 req/s mean, replayed at 1x and time-scaled 0.5.
Send lag = sent - scheduled - connection setup.  ``python benchmarks/bench_replay.py``; figures in
docs/workloads.md.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np

from pytest_perfgate.contract import Request
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "pytest_perfgate.calib.scripted_server", "--port", str(port)],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        eng = OpenAIEngine("cal", {"base_url": f"http://127.0.0.1:{port}", "model": "scripted", "timeout": 10})
        eng.start()
        rng = np.random.default_rng(1)
        arr = np.concatenate([[0.0], np.cumsum(rng.exponential(1 / 50, 999))])
        reqs = [Request(prompt="a b c", max_tokens=4, arrival=float(t),
                        extra={"perfgate": {"ttft": 0.002, "itl": 0.001}}) for t in arr]
        for scale in (1.0, 0.5):
            res = run_load(eng, reqs, LoadConfig(mode="trace", time_scale=scale))
            lag = np.sort([r.sent_ns - (r.scheduled_ns or 0) - (r.connect_ns or 0) for r in res.records]) / 1e6
            p99 = lag[int(np.ceil(0.99 * lag.size)) - 1]
            print(f"time_scale {scale:g}: {lag.size} requests, {50 / scale:g} req/s mean: send lag P50 "
                  f"{lag[lag.size // 2]:.3f} ms, P99 {p99:.3f} ms, max {lag[-1]:.3f} ms; "
                  f"errors {sum(not r.ok for r in res.records)}")
        eng.stop()
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
