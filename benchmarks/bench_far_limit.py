"""Issue 39, first contact: how long (in memories) a run must be before a limit far beyond every
value is decided on the tail's clustering (``blocked.far_length``). P99 gates at the true
stationary P99 of long-memory models, where a run spent in a quiet stretch sits under half the
limit; pass rate over seeded runs with three length guards: 50 memories at any distance (before),
``max(10, 50 sqrt(2 / ratio))`` memories for a limit ``ratio`` times the run's largest value (after),
and none. Printed table, not a test.

    .venv/bin/python benchmarks/bench_far_limit.py [TRIALS] [SEED]   # ~4 min at 300 on 2 cores

The false pass budget is 5% + 3 SE. Output of a run: benchmarks/results-far-limit.txt.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "stats"), str(ROOT / "tests")]
import queue_runs  # noqa: E402
import queues  # noqa: E402

from pytest_perfgate.verdicts import blocked  # noqa: E402
from pytest_perfgate.verdicts import bounds as st  # noqa: E402
from pytest_perfgate.verdicts import dependence as dp  # noqa: E402

Q, C = 0.99, 0.95
ADOPTED = blocked.far_length
GUARDS: dict[str, Callable[[float], float]] = {"50 at any distance": lambda r: blocked.FAR_MEMORY, "after": ADOPTED, "none": lambda r: 0.0}


def _pass(x: np.ndarray, thr: float) -> bool:
    dep = dp.estimate(x)
    if not dep.dependent:
        return st.quantile_decision(x, Q, C, "max", thr)[0] == "pass"
    return blocked.decision(x, Q, C, "max", thr, blocked.for_quantile(x, Q, dep))[0] == "pass"


def _row(name: str, v: np.ndarray, thr: float) -> None:
    cells = []
    ratios = thr / v.max(axis=1)
    for guard in GUARDS.values():
        setattr(blocked, "far_length", guard)  # noqa: B010 (the guards compared)
        blocked.FAR_MEMORY_MIN = 0.0 if guard(1e9) == 0 else 10.0
        cells.append(f"{np.mean([_pass(r, thr) for r in v]):.1%}")
    setattr(blocked, "far_length", ADOPTED)  # noqa: B010
    blocked.FAR_MEMORY_MIN = 10.0
    far = f"{np.mean(ratios >= blocked.FAR):.0%} (max {ratios.max():.3g}x)"
    print(f"| {name} | {far} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 39)
    print(f"P99 gate at the true P99, confidence {C}, pass rate over {trials} seeded runs a row\n")
    print("| model | runs under half the limit (largest ratio) | " + " | ".join(GUARDS) + " |")
    print("|---|---|" + "---|" * len(GUARDS))
    for rho, n in ((0.9, 1000), (0.95, 1000), (0.95, 3000), (0.97, 1000), (0.97, 3000), (0.99, 1000), (0.99, 3000),
                   (0.99, 10000), (0.999, 1000), (0.999, 10000)):
        v, _ = queues.mm1(rng, trials, n, rho)
        _row(f"M/M/1 {rho}, n {n:,}", v, queues.mm1_quantile(Q, rho))
    for phi, sigma, n in ((0.99, 1.0, 1000), (0.995, 1.0, 1000), (0.995, 1.0, 3000), (0.999, 1.0, 3000),
                          (0.999, 1.0, 10000), (0.9999, 1.0, 3000), (0.999, 0.3, 3000)):
        v, _ = queues.ar1_lognormal(rng, trials, n, phi, sigma=sigma)
        _row(f"AR(1) log-normal phi {phi} sigma {sigma}, n {n:,}", v, queues.ar1_quantile(Q, sigma))
    for users in (8, 16):
        _, _, lat = queue_runs.closed_loop(rng, trials, 1000, users, 1.0)
        _row(f"closed loop of {users}, n 1,000", lat, float(sps.gamma.ppf(Q, users)))
    print("\nadopted guard (memories): " + ", ".join(f"{r:g}x: {ADOPTED(r):.3g}" for r in (2, 5, 10, 20, 50, 100, 300)))


if __name__ == "__main__":
    main()
