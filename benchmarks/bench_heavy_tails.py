"""Issue 39, "Over the budget" rows 1-2: quantile gates on heavy-tailed dependent runs, before and
after the jump-tail-index raise of ``D`` (``dependence.heavy_factor``). Before = the same code with
``dependence.HEAVY = 0`` (no raise). Seeded; every row a fresh draw of ``trials`` runs; printed as a
markdown table (benchmarks/results-issue39-tails.txt).

    PYTHONPATH=$PWD:$PWD/tests:$PWD/tests/stats nice -n 10 .venv/bin/python benchmarks/bench_heavy_tails.py [trials]
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import queue_runs  # tests/queue_runs.py
import queues  # tests/stats/queues.py
import tails  # tests/stats/tails.py
from scipy import stats

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Gate, load_thresholds
from pytest_perfgate.config.units import parse_quantity
from pytest_perfgate.verdicts import dependence

ROOT = Path(__file__).resolve().parents[1]
TH = load_thresholds(ROOT / "tests" / "fixtures" / "thresholds" / "stats.toml")
_CACHE: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]] = {}
Runs = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def gate(q: float, limit: float) -> Gate:
    g = TH.gate("ttft_p99")
    st = dataclasses.replace(g.statistic, q=q, text=f"p{round(q * 100)}")
    return dataclasses.replace(g, statistic=st, threshold=parse_quantity(f"{limit!r} s"))


def rate(g: Gate, v: np.ndarray, sent: np.ndarray, heavy: float) -> tuple[float, float]:
    """(pass rate, median D) with ``dependence.HEAVY = heavy``."""
    old, dependence.HEAVY = dependence.HEAVY, heavy
    try:
        out = [evaluate(g, make_samples(v[i], "s", sent=sent[i])) for i in range(v.shape[0])]
    finally:
        dependence.HEAVY = old
    return (float(np.mean([e.outcome == "pass" for e in out])),
            float(np.median([e.details.get("dependence_tau", 1.0) for e in out])))


def row(name: str, runs: Runs, trials: int, q: float, limit: float, x: float = 1.0, seed: int = 7) -> None:
    t0 = time.perf_counter()
    key = (name, trials, seed)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = runs(np.random.default_rng(seed), trials)
    v, sent = _CACHE[key]
    g = gate(q, x * limit)
    (b, db), (a, da) = rate(g, v, sent, 0.0), rate(g, v, sent, dependence.HEAVY)
    se = 3 * math.sqrt(0.05 * 0.95 / trials)
    kind = "false pass" if x == 1 else "power"
    print(f"| {name} | {v.shape[1]:,} | P{round(q * 100)} at {x:g}x ({kind}) | {100 * b:.1f}% | {100 * a:.1f}% "
          f"| {db:.1f} -> {da:.1f} | {trials} (5% + 3 SE = {100 * (0.05 + se):.1f}%), {time.perf_counter() - t0:.0f} s |",
          flush=True)


def _sends(v: np.ndarray) -> np.ndarray:
    return np.tile(np.arange(v.shape[1], dtype=np.float64), (v.shape[0], 1))


def _closed(r: np.random.Generator, t: int) -> tuple[np.ndarray, np.ndarray]:
    v = queue_runs.closed_loop(r, t, 3000, 4, 1.0)[2]
    return v, _sends(v)


def _iid(sigma: float) -> Runs:
    def runs(r: np.random.Generator, t: int) -> tuple[np.ndarray, np.ndarray]:
        v = r.lognormal(0.0, sigma, (t, 2000))
        return v, _sends(v)
    return runs


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    print("| model | n | gate | pass before | after | median D before -> after | runs |")
    print("|---|---|---|---|---|---|---|")
    p99, p95 = tails.pareto_mg1_quantile(0.99, 0.5), tails.pareto_mg1_quantile(0.95, 0.5)
    for n, q, lim in ((3000, 0.99, p99), (10_000, 0.99, p99), (10_000, 0.95, p95), (30_000, 0.99, p99)):
        tr = trials if n < 30_000 else max(100, trials // 4)
        row("M/G/1 Pareto 2.5 service, rho 0.5", lambda r, t, n=n: tails.pareto_mg1(r, t, n, 0.5), tr, q, lim, seed=n)
    for x in (2.0, 3.0):
        row("M/G/1 Pareto 2.5 service, rho 0.5", lambda r, t: tails.pareto_mg1(r, t, 10_000, 0.5), trials, 0.99, p99, x)
    row("M/G/1 Pareto 2.5 service, rho 0.3", lambda r, t: tails.pareto_mg1(r, t, 10_000, 0.3), trials, 0.99,
        tails.pareto_mg1_quantile(0.99, 0.3), 2.0)
    ch = max(100, trials // 2)
    for q, x in ((0.95, 1.0), (0.99, 1.0), (0.95, 1.5), (0.99, 1.5)):
        row("chunked-prefill batching, 8 slots, 512-token steps, 11 req/s", lambda r, t: tails.chunked_prefill(r, t, 3000),
            ch, q, tails.CHUNKED_TTFT[q], x, seed=95)
    for rho, n, x in ((0.3, 2000, 1.5), (0.5, 3000, 1.0), (0.5, 3000, 1.5)):
        row(f"M/M/1 rho {rho}", lambda r, t, rho=rho, n=n: queues.mm1(r, t, n, rho), trials, 0.99,
            queues.mm1_quantile(0.99, rho), x)
    for x in (1.0, 1.5):
        row("closed loop of 4", _closed, trials, 0.99, float(stats.gamma.ppf(0.99, 4)), x)
    for x in (1.0, 1.5):
        row("M/G/1 log-normal sigma 1 service, rho 0.5", lambda r, t: queues.mg1(r, t, 3000, 0.5, 1.0), trials, 0.99,
            tails.long_run_quantile(lambda r: queues.mg1(r, 20, 50_000, 0.5, 1.0)[0], 0.99), x)
    row("AR(1) log-normal phi 0.5", lambda r, t: queues.ar1_lognormal(r, t, 3000, 0.5), trials, 0.99,
        queues.ar1_quantile(0.99), 1.5)
    for sigma, x in ((0.5, 1.2), (1.0, 1.2)):
        row(f"independent log-normal sigma {sigma}", _iid(sigma), trials, 0.99, math.exp(sigma * stats.norm.ppf(0.99)), x)


if __name__ == "__main__":
    main()
