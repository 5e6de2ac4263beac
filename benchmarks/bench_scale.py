"""Does the client scale with worker processes?  Events/s and timestamp error vs streams and workers.

The scripted server (:mod:`pytest_perfgate.calib.scripted_server`) runs in a process of its own;
``run_load`` drives it at ``concurrency = streams`` (one request per stream) with ``workers`` client
processes (load/workers.py), and for each (streams, workers):

* **capacity**: chunk events/s consumed with chunks sent back-to-back (ttft = itl = 0), 40,000
  chunks in all (at least 20 per stream): total chunks / (last chunk - first send);
* **timestamp error** at 50 chunks/s per stream (itl = 20 ms, 25 chunks): client arrival minus the
  server's ground-truth send time (both ``perf_counter_ns``, CLOCK_MONOTONIC, shared by every
  process on Linux), TTFT (first chunk) and ITL (the later ones), P50 / P99;
* the client's health (load/health.py): loop lag P99 (worst worker) and whether a 20 ms ITL P99
  gate would be **invalid** on that run (load/validity.py).

One table; ratios are to one process at the same streams. Usage::

    python benchmarks/bench_scale.py [--quick] [--streams 64,256,1024,4096] [--workers 1,2,auto]
                                     [--peers [--peer-streams 64,256] [--peer-rounds 2]]

On the 2-core machine this project develops on, the server and the client share two cores: workers
cannot show more than ~2x there (and less, since the server needs one). ``scripts/gpu-check.sh``
runs it on the 16-core GPU host (workers 1 / 4 / 8 / auto).

``--peers`` adds, in the same run, a second table: perfgate, guidellm and AIPerf at the same streams
against one scripted server (ttft 5 ms, itl 2 ms, 50 chunks), each peer in its own venv
(``bash benchmarks/peers_setup.sh``: ``build/peers/``, git-ignored), the timestamp error from each
tool's own per-request export (``benchmarks/bench_peers.py`` says how), ratios to perfgate with 1 worker.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_client import ServerProcess, check_clock  # noqa: E402

from pytest_perfgate.config.load import parse_thresholds  # noqa: E402
from pytest_perfgate.contract import Request  # noqa: E402
from pytest_perfgate.engines.openai import OpenAIEngine  # noqa: E402
from pytest_perfgate.load.runner import run_load  # noqa: E402
from pytest_perfgate.load.schedule import LoadConfig  # noqa: E402
from pytest_perfgate.load.validity import invalid_cause  # noqa: E402
from pytest_perfgate.load.workers import resolve_workers, usable_cores  # noqa: E402

ITL_GATE = parse_thresholds({"phases": {"p": {}}, "gates": {"itl": {"phase": "p", "metric": "itl", "statistic": "p99",
                                                                  "max": "20 ms"}}}, Path("bench.toml")).gate("itl")


def _run(srv: ServerProcess, eng: OpenAIEngine, tag: str, streams: int, workers: int, chunks: int,
         itl: float) -> tuple[Any, dict[str, dict[str, Any]], list[str]]:
    ids = [f"{tag}-{i}" for i in range(streams)]
    reqs = [Request(prompt="hello", max_tokens=chunks,
                    extra={"perfgate": {"id": ids[i], "ttft": itl, "itl": itl}}) for i in range(streams)]
    srv.reset()
    res = run_load(eng, reqs, LoadConfig(mode="concurrency", concurrency=streams, num_requests=streams, workers=workers))
    return res, srv.truth(), ids


def measure(srv: ServerProcess, eng: OpenAIEngine, streams: int, workers: int) -> dict[str, float]:
    res, _, _ = _run(srv, eng, f"c{streams}w{workers}", streams, workers, max(20, 40_000 // streams), 0.0)
    ok = [r for r in res.measured if r.ok and r.chunk_ns]
    events = sum(len(r.chunk_ns) for r in ok)
    span = (max(r.chunk_ns[-1] for r in ok) - min(r.sent_ns for r in ok)) / 1e9 if ok else math.nan
    out = {"events_s": events / span if span > 0 else math.nan, "failed": float(len(res.measured) - len(ok))}
    res, truth, ids = _run(srv, eng, f"e{streams}w{workers}", streams, workers, 25, 0.02)
    ttft, itl = [], []
    for r in res.measured:
        t = truth.get(ids[r.index % streams])
        if not r.ok or t is None or len(t["chunk_ns"]) != len(r.chunk_ns):
            continue
        err = (np.asarray(r.chunk_ns) - np.asarray(t["chunk_ns"])) / 1e6
        ttft.append(err[0])
        itl.extend(err[1:])
    for name, xs in (("ttft", ttft), ("itl", itl)):
        out[f"{name}_p50_ms"] = float(np.percentile(xs, 50)) if xs else math.nan
        out[f"{name}_p99_ms"] = float(np.percentile(xs, 99)) if xs else math.nan
    h = res.health
    out["lag_p99_ms"] = h.loop_lag_p99 * 1e3 if h is not None else math.nan
    out["lag_tail_ms"] = h.loop_lag_tail * 1e3 if h is not None else math.nan
    out["invalid"] = float(h is not None and invalid_cause(ITL_GATE, h, workers) is not None)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="64 and 256 streams, workers 1 and 2")
    ap.add_argument("--streams", default="64,256,1024,4096")
    ap.add_argument("--workers", default="1,2,auto")
    ap.add_argument("--peers", action="store_true", help="also guidellm and AIPerf (benchmarks/peers_setup.sh)")
    ap.add_argument("--peer-streams", default="", help="streams for the peers' table (default: --streams)")
    ap.add_argument("--peer-rounds", type=int, default=2, help="requests per stream in the peers' table")
    ns = ap.parse_args(argv)
    streams = [64, 256] if ns.quick else [int(s) for s in ns.streams.split(",")]
    workers = [1, 2] if ns.quick else list(dict.fromkeys(resolve_workers(w) for w in ns.workers.split(",")))
    print(check_clock())
    print(f"usable cores: {usable_cores()}; workers {workers}; streams {streams}")
    srv = ServerProcess(uvloop=False)
    eng = OpenAIEngine("scale", {"base_url": srv.base_url, "model": "scripted", "timeout": 120})
    head = ("streams", "workers", "events/s", "x 1 worker", "TTFT err P50/P99 ms", "ITL err P50/P99 ms",
            "loop lag P99 / tail mean ms", "20 ms ITL gate", "failed")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head), flush=True)
    try:  # each row as soon as it is measured (a time limit keeps the rows done)
        eng.start()
        for s in streams:
            base: dict[str, float] | None = None
            for w in workers:
                m = measure(srv, eng, s, w)
                base = base or m
                print(f"| {s} | {w} | {m['events_s']:,.0f} | {m['events_s'] / base['events_s']:.2f} | "
                      f"{m['ttft_p50_ms']:.2f} / {m['ttft_p99_ms']:.2f} | {m['itl_p50_ms']:.2f} / {m['itl_p99_ms']:.2f} | "
                      f"{m['lag_p99_ms']:.2f} / {m['lag_tail_ms']:.2f} | {'INVALID' if m['invalid'] else 'valid'} | {m['failed']:.0f} |", flush=True)
    finally:
        eng.stop()
        srv.stop()
    print(f"(ratios to 1 worker at the same streams; {usable_cores()} usable cores shared with the server: "
          "workers cannot show more than ~cores x)")
    if ns.peers:
        from bench_peers import run as peers

        pstreams = [int(s) for s in ns.peer_streams.split(",")] if ns.peer_streams else streams
        print(f"\nperfgate vs guidellm vs AIPerf, streams {pstreams}, {ns.peer_rounds} requests per stream:", flush=True)
        print("\n".join(peers(pstreams, ns.peer_rounds, [w for w in workers if w <= 2] or [1])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
