"""``perfgate gate`` on a generated ``vllm bench serve --save-detailed`` file of N requests: seconds
and peak RSS against the file's size (issue 33). A script, not a test: it prints one table.

``python benchmarks/bench_import.py [--requests 1000,10000,100000] [--chunks 32]``

For each size this process writes the file (the bench's own keys and shapes: parallel per-request
lists, ``itls`` of ``--chunks - 1`` gaps, 1% of requests failed), then a fresh subprocess (peak RSS:
its ``VmHWM``, so the generator's memory is not counted) reads it once and times ``perfgate gate FILE`` with four gates (TTFT P99, ITL P99, TPOT mean,
error rate) and every writer, split into reading the file and the rest (deciding and writing).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATES = """
[phases.p]
[gates.ttft_p99]
phase = "p"
metric = "ttft"
statistic = "p99"
max = "1 s"
max_error_rate = 0.05
[gates.itl_p99]
phase = "p"
metric = "itl"
statistic = "p99"
max = "100 ms"
max_error_rate = 0.05
[gates.tpot_mean]
phase = "p"
metric = "tpot"
statistic = "mean"
max = "50 ms"
max_error_rate = 0.05
[gates.errors]
phase = "p"
metric = "error_rate"
statistic = "rate"
max = "5 %"
"""


def write(path: Path, n: int, chunks: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    start = np.cumsum(rng.exponential(0.01, n)) + 1000.0
    ttft = rng.lognormal(np.log(0.2), 0.4, n)
    itls = rng.lognormal(np.log(0.02), 0.3, (n, chunks - 1))
    failed = rng.random(n) < 0.01
    doc = {"date": "20261202-000000", "endpoint_type": "vllm", "backend": "vllm", "label": None, "model_id": "m",
           "tokenizer_id": "m", "num_prompts": n, "request_rate": 100.0, "burstiness": 1.0, "max_concurrency": None,
           "duration": float(start[-1] - start[0]), "completed": int(n - failed.sum()), "failed": int(failed.sum()),
           "input_lens": [512] * n, "output_lens": [0 if f else chunks for f in failed],
           "ttfts": [0.0 if f else round(float(t), 9) for t, f in zip(ttft, failed, strict=True)],
           "itls": [[] if f else [round(float(g), 9) for g in row] for row, f in zip(itls, failed, strict=True)],
           "latencies": [0.0 if f else round(float(t + row.sum()), 9) for t, row, f in zip(ttft, itls, failed, strict=True)],
           "start_times": [round(float(s), 9) for s in start], "queue_times": [0.0] * n,
           "generated_texts": ["" if f else "x" * chunks for f in failed],
           "errors": ["HTTP 500" if f else "" for f in failed]}
    path.write_text(json.dumps(doc))


def _hwm() -> float:
    """Peak RSS of this process in kB (``VmHWM``: ``ru_maxrss`` keeps the parent's peak across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1])
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def child(n: int, chunks: int, d: Path) -> None:
    """Time ``perfgate gate`` on ``d/bench.json`` (written by another process: its memory is not ours)."""
    sys.path.insert(0, str(ROOT))
    import contextlib
    import io

    from pytest_perfgate.cli import main
    from pytest_perfgate.imports import load_results

    f = d / "bench.json"
    import matplotlib.pyplot  # noqa: F401  (imports the writers use, outside the figures)

    base = _hwm()
    t0 = time.perf_counter()
    run = load_results(f)
    read = time.perf_counter() - t0
    del run
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["gate", str(f), "--thresholds", str(d / "thresholds.toml"), "--out", str(d / "out")])
    total = time.perf_counter() - t0
    peak = _hwm()
    stored = sum(p.stat().st_size for p in (d / "out").rglob("*") if p.is_file())
    print(json.dumps({"requests": n, "mb": f.stat().st_size / 1e6, "read_s": read, "gate_s": total, "rc": rc,
                      "rss_before_mb": base / 1e3, "peak_rss_mb": peak / 1e3, "stored_mb": stored / 1e6}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", default="1000,10000,100000")
    ap.add_argument("--chunks", type=int, default=32)
    ap.add_argument("--child", type=int)
    ap.add_argument("--dir")
    ns = ap.parse_args()
    if ns.child:
        child(ns.child, ns.chunks, Path(ns.dir))
        return
    print(f"{'requests':>9} {'file MB':>8} {'read s':>7} {'gate s':>7} {'peak RSS MB':>12} {'RSS at start MB':>16} "
          f"{'stored MB':>10}")
    for n in (int(x) for x in ns.requests.split(",")):
        with tempfile.TemporaryDirectory() as d:
            write(Path(d) / "bench.json", n, ns.chunks)
            (Path(d) / "thresholds.toml").write_text(GATES)
            out = subprocess.run([sys.executable, __file__, "--child", str(n), "--chunks", str(ns.chunks), "--dir", d],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        r = json.loads(out)
        print(f"{r['requests']:>9} {r['mb']:>8.1f} {r['read_s']:>7.2f} {r['gate_s']:>7.2f} {r['peak_rss_mb']:>12.0f} "
              f"{r['rss_before_mb']:>16.0f} {r['stored_mb']:>10.1f}")


if __name__ == "__main__":
    main()
