"""Sequential load runs (issue 39): the expected number of requests to a decision, and what is
decided, when a load run looks at 100, 200, 400, ... requests and stops once its gate is decided
(load/decided.py, budget 10,000 requests), against one fixed run of 3,000 requests decided once.

A P99 gate on TTFT; the truth (the stationary P99) at 0.5x, 0.667x (1.5x headroom), 0.8x, 1x (the boundary), 1.25x and
1.5x the limit; M/M/1 at utilisation 0.5 and 0.7 (stationary start), a continuous-batching server
(tests/queue_runs.py, 16 slots, 12 requests/s: about 0.7 of its capacity; P99 0.414 s from four
paths of 250,000), a closed loop of 4 requests in flight (the scaffold's design). Printed, not asserted.

    PYTHONPATH=$PWD:$PWD/tests/stats:$PWD/tests .venv/bin/python benchmarks/bench_sequential_load.py [trials]
        [--budget N] [--models "M/M/1 0.7,batching"] [--ratios 0.667,1]

``--budget``: ``max_requests`` (default 10,000); ``--models``: the rows whose names start with these;
``--ratios``: the true P99 over the limit (default all six).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import queue_runs  # tests/queue_runs.py
import queues  # tests/stats/queues.py
import seqload  # tests/stats/seqload.py
from scipy import stats

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import load_thresholds

ROOT = Path(__file__).resolve().parents[1]
GATE = load_thresholds(ROOT / "tests" / "fixtures" / "thresholds" / "stats.toml").gate("ttft_p99")
BUDGET, FIXED = 10_000, 3000
RATIOS = (0.5, 2 / 3, 0.8, 1.0, 1.25, 1.5)  # the true P99 over the limit (2/3: the limit 1.5x the truth, issue 39's goal)
Model = Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]]


def _batching(rng: np.random.Generator, trials: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rows = [queue_runs.batching(rng, n + 500, 12.0) for _ in range(trials)]
    return np.stack([(f - s)[500:] for s, f, _ in rows]), np.stack([s[500:] for s, _, _ in rows])


def _closed(rng: np.random.Generator, trials: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    sent, _, lat = queue_runs.closed_loop(rng, trials, n, 4, 1.0)
    return lat, sent


def _fixed(limit: float, v: np.ndarray, sent: np.ndarray) -> tuple[float, float]:
    g = seqload.at(GATE, limit)
    out = [evaluate(g, make_samples(v[i, :FIXED], "s", sent=sent[i, :FIXED])).outcome for i in range(v.shape[0])]
    return float(np.mean([o == "pass" for o in out])), float(np.mean([o == "fail" for o in out]))


def row(name: str, model: Model, truth: float, trials: int, budget: int = BUDGET,
        ratios: tuple[float, ...] = RATIOS) -> None:
    t0 = time.perf_counter()
    v, sent = model(np.random.default_rng(39), trials, budget)
    for x in ratios:
        limit = truth / x
        p, f, n = seqload.rates(seqload.at(GATE, limit), v, sent, budget)
        fp, ff = _fixed(limit, v, sent)
        print(f"| {name} | {x:.3g}x | {p:.1%} / {f:.1%} | {n:,.0f} | {fp:.1%} / {ff:.1%} |", flush=True)
    print(f"<!-- {name}: {trials} runs a row, {time.perf_counter() - t0:.0f} s -->", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trials", nargs="?", type=int, default=200)
    ap.add_argument("--budget", type=int, default=BUDGET)
    ap.add_argument("--models", default="")
    ap.add_argument("--ratios", default="")
    a = ap.parse_args()
    ratios = tuple(float(r) for r in a.ratios.split(",")) if a.ratios else RATIOS
    wanted = tuple(m.strip() for m in a.models.split(",") if m.strip())
    print(f"P99 gate, sequential looks {', '.join(map(str, seqload.load_looks(a.budget)))} vs one run of {FIXED:,}; "
          f"{a.trials} seeded runs a model")
    print("| model | true P99 / limit | sequential: pass / fail | mean requests sent | fixed 3,000: pass / fail |")
    print("|---|---|---|---|---|")
    rows = (("M/M/1 0.5", lambda r, t, n: queues.mm1(r, t, n, 0.5), queues.mm1_quantile(0.99, 0.5)),
            ("M/M/1 0.7", lambda r, t, n: queues.mm1(r, t, n, 0.7), queues.mm1_quantile(0.99, 0.7)),
            ("closed loop, 4 in flight", _closed, float(stats.gamma.ppf(0.99, 4))),
            ("batching, 16 slots, 0.7 load", _batching, 0.414))
    for name, model, truth in rows:
        if not wanted or name.startswith(wanted):
            row(name, model, truth, a.trials, a.budget, ratios)


if __name__ == "__main__":
    main()
