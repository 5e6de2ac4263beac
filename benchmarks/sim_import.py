"""Seeded simulation: fixed-sample verdicts on imported vLLM-bench files keep perfgate's error rates,
and an inconclusive verdict's "requests that would decide it" is checked (issue 33).

``python benchmarks/sim_import.py [--reps 400] [--n 200]``

Each replicate writes a ``vllm bench serve --save-detailed`` document (TTFT lognormal, sigma 0.5;
1% of requests failed), reads it with the ``vllm-bench`` reader and evaluates a gate on it:

* (no failed requests unless `--failed`: a failed request counts as over a latency threshold)
* P99 TTFT, ``max`` = the true P99 (the truth on the threshold): the pass rate is the false-pass
  rate, at most 1 - c = 5% by design;
* a ratio of P50 TTFT of two files from the same distribution, ``max = 1.0`` (on the boundary):
  the pass rate is the ratio gate's false-pass rate;
* projection: a P50 gate at 1.1 x the true median on 40 requests; among inconclusive replicates,
  the projected requests N are run (fresh seeds): the share decided at N, and at 2N/3.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_perfgate.config import load_thresholds  # noqa: E402
from pytest_perfgate.imports.vllm_bench import run_of  # noqa: E402
from pytest_perfgate.verdicts.verdict import evaluate  # noqa: E402

SIGMA, MEDIAN = 0.5, 0.2
FAILED = 0.0  # share of failed requests (--failed): a failure counts over a latency threshold
P99 = MEDIAN * float(np.exp(SIGMA * 2.3263478740408408))


def doc(rng: np.random.Generator, n: int) -> dict[str, object]:
    ttft = rng.lognormal(np.log(MEDIAN), SIGMA, n)
    gaps = rng.lognormal(np.log(0.02), 0.2, (n, 3))
    failed = rng.random(n) < FAILED
    start = np.cumsum(rng.exponential(0.1, n)) + 100.0
    return {"start_times": start.tolist(), "ttfts": [0.0 if f else t for t, f in zip(ttft.tolist(), failed, strict=True)],
            "itls": [[] if f else g for g, f in zip(gaps.tolist(), failed, strict=True)],
            "latencies": [0.0 if f else t + sum(g) for t, g, f in zip(ttft.tolist(), gaps.tolist(), failed, strict=True)],
            "errors": ["HTTP 500" if f else "" for f in failed], "input_lens": [64] * n, "output_lens": [4] * n}


def gates(d: Path) -> object:
    (d / "t.toml").write_text(f"""
[phases.p]
[gates.p99]
phase = "p"
metric = "ttft"
statistic = "p99"
max = "{P99 * 1000:.6f} ms"
max_error_rate = 0.05
[gates.ratio]
phase = "p"
metric = "ttft"
statistic = "p50"
compare = "ratio"
runs = ["a", "b"]
max = "1.0"
max_error_rate = 0.05
[gates.p50]
phase = "p"
metric = "ttft"
statistic = "p50"
max = "{MEDIAN * 1.1 * 1000:.6f} ms"
max_error_rate = 0.05
""")
    return load_thresholds(d / "t.toml")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--failed", type=float, default=0.0)
    ns = ap.parse_args()
    global FAILED
    FAILED = ns.failed
    th = gates(Path(tempfile.mkdtemp()))
    path = Path("sim.json")
    rng = np.random.default_rng(33)
    passes = {"p99": 0, "ratio": 0}
    for _ in range(ns.reps):
        a = run_of(path, doc(rng, ns.n))
        b = run_of(path, doc(rng, ns.n))
        passes["p99"] += evaluate(th.gate("p99"), a, thresholds=th).outcome == "pass"  # type: ignore[attr-defined]
        passes["ratio"] += evaluate(th.gate("ratio"), (a, b), thresholds=th).outcome == "pass"  # type: ignore[attr-defined]
    for k, v in passes.items():
        rate = v / ns.reps
        se = (0.05 * 0.95 / ns.reps) ** 0.5
        print(f"{k:6} truth on the threshold, n={ns.n}: pass (false-pass) rate {rate:.3f} over {ns.reps} seeds "
              f"(design <= 0.05; 0.05 + 3 SE = {0.05 + 3 * se:.3f})")
    decided_at, decided_less, tried = 0, 0, 0
    for _ in range(ns.reps):
        v = evaluate(th.gate("p50"), run_of(path, doc(rng, 40)), thresholds=th)  # type: ignore[attr-defined]
        if v.outcome != "inconclusive" or not v.needed:
            continue
        run = run_of(path, doc(rng, 40))
        need = run.requests_for(int(v.needed), int(v.n))
        tried += 1
        decided_at += evaluate(th.gate("p50"), run_of(path, doc(rng, need)), thresholds=th).outcome != "inconclusive"  # type: ignore[attr-defined]
        decided_less += evaluate(th.gate("p50"), run_of(path, doc(rng, max(1, 2 * need // 3))),  # type: ignore[attr-defined]
                                 thresholds=th).outcome != "inconclusive"
    if tried:
        print(f"projection: {tried} inconclusive P50 verdicts on 40 requests; a run of the projected N requests "
              f"decided {decided_at / tried:.2f}, of 2N/3 {decided_less / tried:.2f}")


if __name__ == "__main__":
    main()
