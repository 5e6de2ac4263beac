"""How long a verdict takes on big data (docs/statistics.md "Speed"): printed, never asserted.

    .venv/bin/python benchmarks/bench_stats.py            # median of 5 of each
    .venv/bin/python benchmarks/bench_stats.py --runs 11

* ``evaluate()`` of a P99 gate on 1,000,000 samples (target 100 ms on an idle core);
* ``make_proportion`` + ``evaluate()`` of an acceptance gate over 10,000 request clusters
  (target 100 ms).

The tests check what these return (tests/core/test_verdict.py, tests/stats/test_power_and_sequential.py);
how fast this machine returns it is a figure of the machine, watched here. The load average is
printed with it: on a shared runner single numbers move by tens of percent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

TOML = """
[phases.p]
[gates.ttft_p99]
phase = "p"
metric = "ttft"
statistic = "p99"
max = "150 ms"
[gates.acceptance]
phase = "p"
metric = "acceptance_rate"
statistic = "rate"
min = "70%"
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from pytest_perfgate import evaluate, load_thresholds, make_proportion, make_samples

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "thresholds.toml"
        p.write_text(TOML)
        th = load_thresholds(p)
    x = make_samples(np.random.default_rng(1).exponential(0.05, 1_000_000), "s")
    rng = np.random.default_rng(2)
    m = rng.integers(5, 31, 10_000)
    s = rng.binomial(m, 0.75)
    evaluate(th.gate("ttft_p99"), x, thresholds=th)  # warm
    big, clusters = [], []
    for _ in range(args.runs):
        t = time.perf_counter()
        evaluate(th.gate("ttft_p99"), x, thresholds=th)
        big.append(time.perf_counter() - t)
        t = time.perf_counter()
        evaluate(th.gate("acceptance"), make_proportion(s, m), thresholds=th)
        clusters.append(time.perf_counter() - t)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; median of {args.runs}")
    print(f"evaluate(p99 gate, 1e6 samples)                       {statistics.median(big) * 1e3:7.1f} ms"
          f"  (min {min(big) * 1e3:.1f}, target 100)")
    print(f"make_proportion + evaluate(acceptance, 10,000 clusters) {statistics.median(clusters) * 1e3:7.1f} ms"
          f"  (min {min(clusters) * 1e3:.1f}, target 100)")


if __name__ == "__main__":
    main()
