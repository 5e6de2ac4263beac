"""Does an inconclusive dependent P99 verdict's projection come true (issue 39)? Fresh runs of the
projected size, drawn from the same model (not the run's own values), decided or not at 95%.
Printed table, not a test.

    nice -n 10 .venv/bin/python benchmarks/bench_projection.py [PILOTS [MODELS]]   # ~25 min at 25 on 2 busy cores; MODELS: 0,1,2

For each model, runs of ``n0`` requests against a P99 ``max`` limit at 1.5x the true P99; for each
inconclusive run with a count:

* before: the count N at the run's own D (the "floor") and the chance the verdict used to state
  (``blocked.decide_chance``: Binomial(N / D, observed rate), "that many decide about X% of runs");
* after: the count to plan for (``projection.likely_needed``: the exceed rate's Jeffreys posterior on
  the run's independent-equivalent counts, D x 1.5, chance >= 80%) and that internal chance, which the
  verdict does not state; fresh runs of both sizes, realised decide rate.

Models: M/M/1 at utilisation 0.5 and 0.7 (tests/stats/queues.py, stationary start), and the
continuous-batching server of tests/queue_runs.py at 12 requests/s (TTFT, 500 requests of warm-up
dropped, true P99 0.414 s). Output of a run: benchmarks/results-issue39-projection.txt.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "stats"), str(ROOT / "tests"), str(ROOT)]
import queue_runs  # noqa: E402
import queues  # noqa: E402

from pytest_perfgate import make_samples  # noqa: E402
from pytest_perfgate.verdicts import blocked, projection  # noqa: E402
from pytest_perfgate.verdicts.dependence import Dependence  # noqa: E402

C, Q, FACTOR, CAP = 0.95, 0.99, 1.5, 60_000
MODELS = (("M/M/1 0.5", 1000, 4), ("M/M/1 0.7", 1000, 4), ("batching 12/s", 2000, 2))  # name, n0, fresh runs a size


def draw(model: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    if model.startswith("M/M/1"):
        v, s = queues.mm1(rng, 1, n, float(model.split()[1]))
        return v[0], s[0]
    sent, first, _ = queue_runs.batching(rng, n + 500, 12.0)
    return (first - sent)[500:], sent[500:]


def limit(model: str) -> float:
    return FACTOR * (queues.mm1_quantile(Q, float(model.split()[1])) if model.startswith("M/M/1") else 0.414)


def decide(v: np.ndarray, s: np.ndarray, thr: float) -> tuple[str, int | None, Dependence, np.ndarray]:
    d = make_samples(v, "s", sent=s)
    x = d.ordered()
    dep = blocked.for_quantile(x, Q, d.dependence())
    outcome, need = blocked.decision(x, Q, C, "max", thr, dep)
    return outcome, need, dep, x


def fresh(model: str, rng: np.random.Generator, n: int, thr: float, runs: int) -> float:
    return float(np.mean([decide(*draw(model, rng, n), thr)[0] != "inconclusive" for _ in range(runs)]))


def row(model: str, n0: int, runs: int, pilots: int, seed: int) -> str:
    rng, thr, t0 = np.random.default_rng(seed), limit(model), time.time()
    got, over = [], 0
    while len(got) < pilots:
        v, s = draw(model, rng, n0)
        outcome, need, dep, x = decide(v, s, thr)
        if outcome != "inconclusive" or need is None:
            continue
        old = blocked.decide_chance(x, Q, C, "max", thr, dep, need)
        plan = projection.likely_needed(x, Q, C, "max", thr, dep.tau, need)
        if plan is None or plan[0] > CAP:
            over += 1
            continue
        got.append((old, fresh(model, rng, need, thr, runs), plan[1], fresh(model, rng, plan[0], thr, runs),
                    need, plan[0]))
    a = np.asarray(got)

    def se(col: int) -> float:
        return float(a[:, col].std() / math.sqrt(len(a)))

    return (f"| {model} | {n0:,} | {len(a)} ({over} over {CAP:,}) | {np.median(a[:, 4]):,.0f} | {a[:, 0].mean():.1%} | "
            f"{a[:, 1].mean():.1%} +- {se(1):.1%} | {np.median(a[:, 5]):,.0f} | none ({a[:, 2].mean():.1%} internal) | "
            f"{a[:, 3].mean():.1%} +- {se(3):.1%} |  ({time.time() - t0:.0f} s)")


def main() -> None:
    pilots = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    only = {int(i) for i in sys.argv[2].split(",")} if len(sys.argv) > 2 else set(range(len(MODELS)))  # model indices
    print(f"P99 max at {FACTOR}x the true P99, 95%; fresh runs of each size from the same model\n")
    print("| model | run | inconclusive runs | floor N (median) | stated before | realised at floor | "
          "planned N (median) | stated after | realised at planned |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, (model, n0, runs) in enumerate(MODELS):
        if i in only:
            print(row(model, n0, runs, pilots, 3900 + i), flush=True)


if __name__ == "__main__":
    main()
