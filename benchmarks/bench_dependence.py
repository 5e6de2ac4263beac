"""Per-request gates under dependence (issue 32): false pass at the boundary (the limit is the true
stationary P99 / mean) and power at 1.5x the limit, before (samples taken as independent) and after
(decided in arrival order), for the load-test models of tests/stats/queues.py plus a
continuous-batching server and a closed loop. Printed, not asserted.

    PYTHONPATH=$PWD:$PWD/tests/stats .venv/bin/python benchmarks/bench_dependence.py [trials]
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import queues  # tests/stats/queues.py

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Gate, load_thresholds
from pytest_perfgate.config.units import parse_quantity

ROOT = Path(__file__).resolve().parents[1]
TH = load_thresholds(ROOT / "tests" / "fixtures" / "thresholds" / "stats.toml")
Model = Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]]


def batching(rng: np.random.Generator, n: int, rho: float, slots: int = 8, warmup: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """TTFT of a continuous-batching server: up to ``slots`` requests advance together; an iteration
    takes 10 ms of decode plus the prefill (lognormal, mean 20 ms) of the requests admitted in it; a
    request's first token ends the iteration that admitted it, it then decodes Geometric(mean 30)
    tokens. Poisson arrivals at ``rho`` times the (approximate) capacity."""
    total = n + warmup
    mean_tokens, step, prefill = 30.0, 0.010, 0.020
    capacity = 1 / (mean_tokens * step / slots + prefill)  # a prefill holds the whole batch
    arrivals = np.cumsum(rng.exponential(1 / (rho * capacity), total))
    pre = rng.lognormal(math.log(prefill) - 0.5 * 0.6**2, 0.6, total)
    tokens = rng.geometric(1 / mean_tokens, total)
    ttft = np.empty(total)
    waiting: deque[int] = deque()
    running: list[int] = []  # remaining tokens of the requests in the batch
    t, i = 0.0, 0
    while i < total or waiting or running:
        if not waiting and not running:
            t = max(t, arrivals[i])
        while i < total and arrivals[i] <= t:
            waiting.append(i)
            i += 1
        admitted = []
        while waiting and len(running) + len(admitted) < slots:
            admitted.append(waiting.popleft())
        t += step + float(sum(pre[j] for j in admitted))
        for j in admitted:
            ttft[j] = t - arrivals[j]
        running = [r - 1 for r in running if r > 1] + [int(tokens[j]) for j in admitted]
    return ttft[warmup:], arrivals[warmup:]


def closed_loop(rng: np.random.Generator, n: int, users: int, think: float = 4.0, warmup: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """Sojourn times of ``users`` closed-loop clients (Exp(think) between a response and the next
    request) on one FCFS server with Exp(1) service."""
    total = n + warmup
    ready = [(float(rng.exponential(think)), u) for u in range(users)]
    heapq.heapify(ready)
    free, out, sent = 0.0, np.empty(total), np.empty(total)
    for k in range(total):
        t, u = heapq.heappop(ready)
        done = max(free, t) + float(rng.exponential(1.0))
        free = done
        out[k], sent[k] = done - t, t
        heapq.heappush(ready, (done + float(rng.exponential(think)), u))
    return out[warmup:], sent[warmup:]


def _stack(one: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]) -> Model:
    def model(rng: np.random.Generator, trials: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        rows = [one(rng, n) for _ in range(trials)]
        return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])
    return model


def _long_path(model: Model, stat: str, n: int = 1_000_000) -> float:
    v, _ = model(np.random.default_rng(2026), 1, n)
    return float(np.quantile(v[0], 0.99, method="inverted_cdf")) if stat == "p99" else float(v[0].mean())


def _rate(gate: Gate, limit: float, v: np.ndarray, sent: np.ndarray | None) -> float:
    g = dataclasses.replace(gate, threshold=parse_quantity(f"{limit!r} s"))
    out = [evaluate(g, make_samples(v[i], "s", sent=None if sent is None else sent[i])).outcome for i in range(v.shape[0])]
    return float(np.mean([o == "pass" for o in out]))


def row(name: str, model: Model, n: int, trials: int, p99: float | None = None, mean: float | None = None) -> None:
    t0 = time.perf_counter()
    v, sent = model(np.random.default_rng(7), trials, n)
    cells = []
    for stat, gate, truth in (("p99", TH.gate("ttft_p99"), p99), ("mean", TH.gate("tpot_mean"), mean)):
        truth = truth if truth is not None else _long_path(model, stat)
        cells += [_rate(gate, truth, v, None), _rate(gate, truth, v, sent), _rate(gate, 1.5 * truth, v, None),
                  _rate(gate, 1.5 * truth, v, sent)]
    se = math.sqrt(0.05 * 0.95 / trials)
    print(f"| {name} | {n:,} | " + " | ".join(f"{100 * x:.1f}%" for x in cells)
          + f" | {trials} (3 SE {300 * se:.1f} pts), {time.perf_counter() - t0:.0f} s |", flush=True)


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print("| model | n | P99 false pass before | after | P99 power at 1.5x before | after "
          "| mean false pass before | after | mean power at 1.5x before | after | trials |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    row("independent (control)", lambda r, t, n: queues.iid(r, t, n, 0.5), 2000, trials, queues.mm1_quantile(0.99, 0.5), 2.0)
    for rho, n in ((0.3, 2000), (0.5, 3000), (0.7, 2000), (0.7, 20000), (0.9, 5000), (0.9, 100_000), (0.95, 100_000)):
        tr = trials if n <= 20000 else max(50, trials // 4)
        row(f"M/M/1 rho {rho}", lambda r, t, n, rho=rho: queues.mm1(r, t, n, rho), n, tr,
            queues.mm1_quantile(0.99, rho), 1 / (1 - rho))
    row("M/M/4 rho 0.8", lambda r, t, n: queues.mmc(r, t, n, 0.8, 4), 3000, trials)
    row("M/G/1 lognormal service sigma 1, rho 0.5", lambda r, t, n: queues.mg1(r, t, n, 0.5, 1.0), 3000, trials)
    row("M/G/1 lognormal service sigma 1, rho 0.8", lambda r, t, n: queues.mg1(r, t, n, 0.8, 1.0), 10000, trials)
    for load in (0.7, 0.9):
        row(f"continuous batching, 8 slots, load {load}", _stack(lambda r, n, x=load: batching(r, n, x)), 3000, trials)
    row("closed loop, 8 users", _stack(lambda r, n: closed_loop(r, n, 8)), 3000, trials)
    for phi in (0.5, 0.9):
        row(f"AR(1) log-normal phi {phi}", lambda r, t, n, phi=phi: queues.ar1_lognormal(r, t, n, phi), 3000, trials,
            queues.ar1_quantile(0.99), math.exp(0.5))
    for sigma in (1.5, 2.0):
        row(f"independent log-normal sigma {sigma} (mean gate)",
            lambda r, t, n, s=sigma: (r.lognormal(0, s, (t, n)), np.broadcast_to(np.arange(n, dtype=float), (t, n)).copy()),
            5000, trials, math.exp(sigma * 2.3263478740408408), math.exp(sigma**2 / 2))


if __name__ == "__main__":
    main()
