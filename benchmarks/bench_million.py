"""``perfgate gate`` on 100k- and 1M-request exports of every import format (issue 41), against the
stdlib's ``json.load`` of the same file. A script, not a test: it prints one table.

``nice -n 10 python benchmarks/bench_million.py [--requests 100000,1000000] [--formats vllm,aiperf,...] [--itl-budget 0.05]
[--dir /tmp/x]``

Each file is built from a real committed export (``tests/imports/data``; guidellm from the schema
of ``tests/imports/peer_files.py``, no real export being committed) by repeating its requests with
jitter: every time shifted, each gap scaled by a random factor in [0.8, 1.2]; vLLM rows of 31 gaps
(two real rows joined), texts of 8 real texts joined (a ~1.6 KB request, as the issue's file). The files go to a temporary folder and are deleted after. Each measure is a
fresh subprocess (``/usr/bin/time``-style peak RSS from ``resource.getrusage(RUSAGE_CHILDREN)`` of a
process that does nothing else): ``perfgate gate FILE`` with four gates and every writer, and
``json.load(open(FILE))``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "imports" / "data"
GATES = """
[phases.p]
[gates.ttft_p99]
phase = "p"
metric = "ttft"
statistic = "p99"
max = "2 s"
max_error_rate = 0.05
[gates.e2e_p90]
phase = "p"
metric = "e2e"
statistic = "p90"
max = "10 s"
[gates.tpot_mean]
phase = "p"
metric = "tpot"
statistic = "mean"
max = "500 ms"
[gates.errors]
phase = "p"
metric = "error_rate"
statistic = "rate"
max = "5 %"
"""
ITL_GATE = """
[gates.itl_p99]
phase = "p"
metric = "itl"
statistic = "p99"
max = "1 s"
"""
BLOCK = 20_000


def _jit(rng: random.Random, xs: list[float]) -> list[float]:
    return [x * rng.uniform(0.8, 1.2) for x in xs]


def write_vllm(path: Path, n: int) -> None:
    real = json.loads((DATA / "vllm-bench-serve.json").read_text())
    m = len(real["start_times"])
    rng = random.Random(1)
    rows = []
    t = 1000.0
    for i in range(n):
        a, b = i % m, (i * 7 + 3) % m
        t += rng.expovariate(100.0)
        itl = _jit(rng, real["itls"][a]) + [rng.uniform(0.01, 0.05)] + _jit(rng, real["itls"][b])
        ttft = real["ttfts"][a] * rng.uniform(0.8, 1.2)
        failed = rng.random() < 0.01
        rows.append((t, ttft, itl, real["input_lens"][a], failed, "".join(real["generated_texts"][(a + k) % m] for k in range(8)),
                     real["queue_times"][a]))
    with path.open("w") as f:
        head = {k: v for k, v in real.items() if not isinstance(v, list)}
        head["num_prompts"] = n
        f.write(json.dumps(head)[:-1])
        cols: dict[str, Any] = {
            "input_lens": lambda r: r[3], "output_lens": lambda r: 0 if r[4] else len(r[2]) + 1,
            "ttfts": lambda r: 0.0 if r[4] else r[1], "itls": lambda r: [] if r[4] else r[2],
            "latencies": lambda r: 0.0 if r[4] else r[1] + sum(r[2]), "start_times": lambda r: r[0],
            "queue_times": lambda r: r[6], "generated_texts": lambda r: "" if r[4] else r[5],
            "errors": lambda r: "Bad Request: bench error" if r[4] else ""}
        for key, get in cols.items():
            f.write(f', "{key}": [')
            for k in range(0, n, BLOCK):
                f.write(("" if k == 0 else ", ") + ", ".join(json.dumps(get(r)) for r in rows[k:k + BLOCK]))
            f.write("]")
        f.write("}")


def write_aiperf(path: Path, n: int) -> None:
    real = [json.loads(x) for x in (DATA / "aiperf" / "profile_export.jsonl").read_text().splitlines() if x.strip()]
    shutil.copy(DATA / "aiperf" / "profile_export_aiperf.json", path.with_name("profile_export_aiperf.json"))
    rng = random.Random(2)
    t0 = real[0]["metadata"]["request_start_ns"]
    with path.open("w") as f:
        for i in range(n):
            d = json.loads(json.dumps(real[i % len(real)]))
            shift = int(i * 1e7 + rng.uniform(0, 1e6))
            meta = d["metadata"]
            span = meta["request_end_ns"] - meta["request_start_ns"]
            meta["session_num"] = i
            meta["request_start_ns"] = t0 + shift
            meta["request_end_ns"] = t0 + shift + span
            icl = d["metrics"].get("inter_chunk_latency")
            if icl:
                icl["value"] = _jit(rng, icl["value"])
            f.write(json.dumps(d, separators=(",", ":")) + "\n")


def write_inference_perf(path: Path, n: int) -> None:
    real = json.loads((DATA / "inference-perf" / "per_request_lifecycle_metrics.json").read_text())
    rng = random.Random(3)
    with path.open("w") as f:
        f.write("[")
        for i in range(n):
            e = json.loads(json.dumps(real[i % len(real)]))
            shift = i * 0.01 + rng.uniform(0, 0.001)
            e["start_time"] += shift
            e["end_time"] += shift
            rm = e["info"].get("response_metrics")
            if rm:
                rm["chunk_times"] = [x + shift for x in rm["chunk_times"]]
                rm["output_token_times"] = [x + shift for x in rm["output_token_times"]]
            f.write(("," if i else "") + json.dumps(e, indent=1))
        f.write("]")


def write_guidellm(path: Path, n: int) -> None:
    """The same bytes as ``json.dumps`` of the whole report, written a request at a time (a 1M-request
    report's dicts would take ~7 GB here)."""
    sys.path.insert(0, str(ROOT))
    from tests.imports import peer_files as pf

    def requests(errored: bool) -> Iterator[str]:
        rng = random.Random(4)  # the same jitter for both passes: request i is the same request
        for i in range(n):
            r = script[i % len(script)]
            q = pf.Req(i, pf.T0 + 0.01 * i, r.ttft * rng.uniform(0.8, 1.2), tuple(_jit(rng, list(r.gaps))))
            if (i == pf.FAILED) == errored:
                yield json.dumps(pf._guidellm_request(q))

    script = pf.script()
    n_bad = int(n > pf.FAILED)  # request 6 failed (as before: one in the file)
    made = {"successful": n - n_bad, "incomplete": 0, "errored": n_bad, "total": n}
    bench = {"type_": "generative_benchmark", "id_": "b0", "run_id": "run", "run_index": 0,
             "config": {"id_": "b0", "run_id": "run", "run_index": 0, "sample_size": None,
                        "strategy": {"type_": "constant", "rate": 100.0}},
             "scheduler_state": {}, "scheduler_metrics": {"requests_made": made}, "metrics": {"request_totals": made},
             "requests": {"successful": "@OK@", "errored": "@BAD@", "incomplete": [], "total": None}}
    doc = {"metadata": {"version": 2, "guidellm_version": "0.8.1", "python_version": "3.11.7", "platform": "Linux"},
           "args": {}, "benchmarks": [bench]}
    head, rest = json.dumps(doc).split('"@OK@"')
    mid, tail = rest.split('"@BAD@"')
    with path.open("w") as f:
        for text, errored in ((head, False), (mid, True)):
            f.write(text + "[")
            for k, q in enumerate(requests(errored)):
                f.write((", " if k else "") + q)
            f.write("]")
        f.write(tail)


FORMATS = {"vllm": ("vllm-bench.json", write_vllm), "aiperf": ("profile_export.jsonl", write_aiperf),
           "inference-perf": ("per_request_lifecycle_metrics.json", write_inference_perf),
           "guidellm": ("benchmarks.json", write_guidellm)}


def _measure(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of ``cmd`` run as a child, and its last output line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:  # ru_maxrss of children is the largest child so far: measure each in a fresh parent
        peak = before
    tail = (p.stdout.strip().splitlines() or [""])[-1] + (p.stderr.strip().splitlines() or [""])[-1][:200]
    return wall, peak / 1e3, f"rc={p.returncode} {tail}"


def measure(cmd: list[str]) -> tuple[float, float, str]:
    """:func:`_measure` in a fresh process (``ru_maxrss`` of children is a maximum over all of them)."""
    code = f"import json,sys;sys.path.insert(0,{str(ROOT / 'benchmarks')!r});import bench_million as b;" \
           f"print(json.dumps(b._measure({cmd!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    wall, peak, tail = json.loads(out.strip().splitlines()[-1])
    return wall, peak, tail


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", default="100000,1000000")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--dir", default=None)
    ap.add_argument("--skip-json", action="store_true", help="no json.load reference (only the gate)")
    ap.add_argument("--file", help="a vLLM file already written (--formats vllm, one size): timed, not deleted")
    ap.add_argument("--itl-budget", type=float, default=None,
                    help="max_error_rate of the ITL P99 gate (an error budget: its full verdict runs, not the error's)")
    ns = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    os.environ.update(env)
    print(f"{'format':>15} {'requests':>9} {'file MB':>8} {'gate s':>7} {'gate RSS MB':>12} {'RSS/file':>9} "
          f"{'B/request':>10} {'json.load s':>12} {'json RSS MB':>12} rc")
    for fmt in ns.formats.split(","):
        name, write = FORMATS[fmt]
        for n in (int(x) for x in ns.requests.split(",")):
            d = Path(tempfile.mkdtemp(prefix="perfgate-million-", dir=ns.dir))
            try:
                f = d / name
                if ns.file:
                    f = Path(ns.file)
                else:
                    write(f, n)
                (d / "thresholds.toml").write_text(GATES + (ITL_GATE if fmt != "guidellm" else "")
                                               + (f"max_error_rate = {ns.itl_budget}\n" if ns.itl_budget is not None
                                                  and fmt != "guidellm" else ""))
                size = f.stat().st_size / 1e6
                gate = [sys.executable, "-m", "pytest_perfgate.cli", "gate", str(f), "--thresholds",
                        str(d / "thresholds.toml"), "--out", str(d / "out")]
                g_wall, g_rss, tail = measure(gate)
                rc = tail.split()[0] if tail else ""
                j_wall, j_rss = (float("nan"), float("nan"))
                if not ns.skip_json:  # JSON lines: json.loads of every line (json.load of the file stops at line 2)
                    code = (f"import json\nfor line in open({str(f)!r}):\n    json.loads(line)" if f.suffix == ".jsonl"
                            else f"import json; json.load(open({str(f)!r}))")
                    j_wall, j_rss, _ = measure([sys.executable, "-c", code])
                print(f"{fmt:>15} {n:>9} {size:>8.0f} {g_wall:>7.1f} {g_rss:>12.0f} {g_rss / size:>9.2f} "
                      f"{g_rss * 1e6 / n:>10.0f} {j_wall:>12.1f} {j_rss:>12.0f} {rc[:40]}", flush=True)
            finally:
                shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
