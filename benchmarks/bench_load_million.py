"""A long load run over 2 client worker processes against the scripted server (issue 41): the
coordinator's memory must not grow with the run (workers stream Arrow batches to a Parquet spool,
load/parquet.py), and every request must be stored.

Closed loop, ``concurrency`` 32 (16 per worker), 4-token outputs, zero scripted delays, the server in
a process of its own (its ground truth is reset every few seconds so that it stays small). Printed:
wall time, request rate, the coordinator's peak RSS (``getrusage(RUSAGE_SELF).ru_maxrss``: the whole
process, imports included) after the run and after writing the run file and reading it back, the
largest worker's peak RSS, the run file's bytes per request (Parquet, zstd; store/runfiles.py),
the TTFT samples a gate evaluates (computed from the run's numpy columns, load/columns.py), and
whether every request is stored once (the run file read back).

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/bench_load_million.py [requests=100000]
"""

from __future__ import annotations

import gc
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pytest_perfgate.contract import Request
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.store import records, runfiles

MB = 1024.0  # ru_maxrss is in KiB on Linux


def _server() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "pytest_perfgate.calib.scripted_server", "--port", str(port), "--ttft", "0", "--itl", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert "scripted server on" in line, line
    return proc, f"http://127.0.0.1:{port}"


def _keep_small(url: str, done: threading.Event) -> None:
    """POST /reset every 5 s: the server forgets its per-request ground truth (not measured here)."""
    while not done.wait(5.0):
        try:
            urllib.request.urlopen(urllib.request.Request(url + "/reset", method="POST"), timeout=10).read()
        except OSError:
            pass


def main(n: int) -> None:
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MB
    proc, url = _server()
    done = threading.Event()
    threading.Thread(target=_keep_small, args=(url, done), daemon=True).start()
    eng = OpenAIEngine("bench", {"base_url": url, "model": "scripted", "timeout": 60})
    eng.start()
    reqs = [Request(prompt=f"p {i}", max_tokens=4, extra={"perfgate": {"ttft": 0.0, "itl": 0.0}}) for i in range(16)]
    cfg = LoadConfig(mode="concurrency", concurrency=32, num_requests=n, warmup=2, workers=2)
    last = [0.0]

    def progress(d: int, total: int, elapsed: float) -> None:
        if elapsed - last[0] >= 30 or d == total:
            last[0] = elapsed
            print(f"  {d:,}/{total:,} after {elapsed:.0f} s, coordinator peak RSS "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MB:.0f} MB", flush=True)

    t0 = time.perf_counter()
    try:
        res = run_load(eng, reqs, cfg, progress=progress)
    finally:
        eng.stop()
        done.set()
    wall = time.perf_counter() - t0
    rss_run = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MB
    workers_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / MB  # the workers (waited); server still up
    proc.terminate()
    proc.wait(10)
    cols = res.columnar()
    kind = "numpy columns (RunResult.from_columns)" if cols is not None else "a list of RequestRecord"
    t1 = time.perf_counter()
    ttft = res.perfgate_data("ttft")  # what a TTFT gate evaluates: from the columns
    t_ttft = time.perf_counter() - t1
    assert cols is None or res.columnar() is cols  # no record was made
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"run{runfiles.SUFFIX}"
        t1 = time.perf_counter()
        runfiles.write(path, records._finite_json(records._run_line(0, res)), cols if cols is not None else res.records)
        t_write = time.perf_counter() - t1
        size = path.stat().st_size
        del res, cols
        gc.collect()
        t1 = time.perf_counter()
        table = pq.read_table(path, columns=["index", "warmup", "error"])  # the run file, read back
        t_read = time.perf_counter() - t1
    idx, warm = table.column("index").to_numpy(), table.column("warmup").to_numpy(zero_copy_only=False)
    measured = idx[~warm]
    every = measured.size == n and bool((measured == np.arange(n)).all())
    errors = int(table.column("error").drop_null().length())
    rss_end = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MB
    v = np.asarray(ttft.values)  # type: ignore[union-attr]
    print(f"requests {n:,} over 2 workers (closed loop, 32 in flight, 4-token outputs, zero delays)")
    print(f"wall {wall:.1f} s ({n / wall:,.0f} req/s, worker start-up included); records held as {kind}")
    print(f"coordinator peak RSS: {rss0:.0f} MB at start, {rss_run:.0f} MB after the run, {rss_end:.0f} MB after "
          f"the TTFT samples ({t_ttft:.1f} s), writing the run file ({t_write:.1f} s) and reading it back ({t_read:.1f} s)")
    print(f"largest worker's peak RSS {workers_rss:.0f} MB")
    print(f"run file {size / 1e6:.1f} MB: {size / n:.1f} bytes per request (Parquet, zstd)")
    print(f"TTFT P99 {np.percentile(v, 99) * 1e3:.3f} ms over {v.size:,} requests; errors {errors}")
    print(f"every request stored once: {every}; coordinator peak RSS < 1 GB: {rss_end < 1024}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
