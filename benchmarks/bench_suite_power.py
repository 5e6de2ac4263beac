"""The phase-1 suite test's sizes (tests/suite/test_phase1_suite.py::test_phase1_passing_thresholds):
how often a clearly good system passes the speculative throughput ratio (interleaved runs, the run as
the unit, Welch t over the logs, 95%) and the prefix-cache p50 reduction (1 - hit_(u) / cold_(lo),
each side's p50 bound at 97.5%) at a runner's run-to-run spreads. A simulation, not a test:

    .venv/bin/python benchmarks/bench_suite_power.py      # ~20 s; output: results-suite-power.txt
"""

from __future__ import annotations

import numpy as np
from scipy import stats

RUNS = 200_000


def ratio_pass(rng: np.random.Generator, k: int, sd: float) -> float:
    """A true ratio of 0.5 against min 0.05, ``k`` runs a side, run values log-normal (log-sd ``sd``)."""
    a = rng.normal(np.log(0.5), sd, (RUNS, k))
    b = rng.normal(0.0, sd, (RUNS, k))
    va, vb = a.var(axis=1, ddof=1) / k, b.var(axis=1, ddof=1) / k
    df = (va + vb) ** 2 / (va**2 / (k - 1) + vb**2 / (k - 1))
    low = a.mean(axis=1) - b.mean(axis=1) - stats.t.ppf(0.95, df) * np.sqrt(va + vb)
    return float(np.mean(low > np.log(0.05)))


def median_bounds(n: int, c: float = 0.975) -> tuple[int, int]:
    """Order statistics (1-based) of the p50's upper and lower bounds at ``c`` on ``n`` samples."""
    up = next(u for u in range(1, n + 1) if stats.binom.cdf(u - 1, n, 0.5) >= c)
    low = max(v for v in range(1, n + 1) if stats.binom.sf(v - 1, n, 0.5) >= c)
    return up, low


def prefix_pass(rng: np.random.Generator, n: int, run_sd: float, hit_sd: float, cold_sd: float) -> float:
    """Median hit / cold ratio 0.131 (a CI run's), run-level log-sd ``run_sd``, per-request log-sds."""
    up, low = median_bounds(n)
    run = rng.normal(np.log(0.131), run_sd, RUNS)
    hit = np.sort(run[:, None] + rng.normal(0.0, hit_sd, (RUNS, n)), axis=1)
    cold = np.sort(rng.normal(0.0, cold_sd, (RUNS, n)), axis=1)
    return float(np.mean(hit[:, up - 1] < cold[:, low - 1]))


def main() -> None:
    rng = np.random.default_rng(0)
    for k in (3, 5):
        for sd in (0.5, 0.7, 1.0, 1.3):
            print(f"ratio 0.5 vs min 0.05, {k} runs a side, run log-sd {sd}: pass {ratio_pass(rng, k, sd):.3f}")
    for n in (12, 20):
        up, low = median_bounds(n)
        for run_sd, hit_sd, cold_sd in ((0.44, 0.30, 0.30), (0.44, 0.54, 0.37), (0.8, 0.7, 0.5)):
            got = prefix_pass(rng, n, run_sd, hit_sd, cold_sd)
            print(f"prefix n {n} (hit_({up}) / cold_({low})), run sd {run_sd}, per-request sd {hit_sd}/{cold_sd}: pass {got:.4f}")


if __name__ == "__main__":
    main()
