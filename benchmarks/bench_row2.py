"""Issue 39 row 2: a quantile's ``D`` raised for its estimate's own uncertainty (the Madras-Sokal
variance of the integrated autocorrelation time, ``dependence.spread_factor``) against no raise and a
finite-run floor ``D / (1 - kappa D / n)``, on the same seeded runs. Printed as a markdown table
(benchmarks/results-issue39-row2.txt).

    PYTHONPATH=$PWD:$PWD/tests:$PWD/tests/stats nice -n 10 .venv/bin/python benchmarks/bench_row2.py [trials] [none|kKAPPA|zZ ...]

Chunked prefill: ``3 x trials // 2`` runs of n 3,000 (seeds 95, 1095, 2095, ``trials // 2`` each; the
test draws seed 95); M/M/1: ``trials`` runs of n 3,000 (seed 7).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import queues  # tests/stats/queues.py
import tails  # tests/stats/tails.py
from bench_heavy_tails import gate

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.verdicts import blocked, dependence

ORIGINAL = blocked.for_quantile


@contextmanager
def method(z: float, kappa: float = 0.0) -> Iterator[None]:
    """``dependence.SPREAD_Z = z``; ``kappa > 0``: the floor ``D / (1 - kappa D / n)`` on top."""
    old = dependence.SPREAD_Z
    dependence.SPREAD_Z = z

    def floored(x: np.ndarray, q: float, dep: dependence.Dependence, sojourn: bool = True) -> dependence.Dependence:
        got = ORIGINAL(x, q, dep, sojourn)
        if not got.dependent:
            return got
        left = 1.0 - kappa * got.tau / x.size
        return dataclasses.replace(got, tau=got.tau / left if left > 0.05 else got.tau * 20.0)

    if kappa > 0:
        blocked.for_quantile = floored  # type: ignore[assignment]
    try:
        yield
    finally:
        dependence.SPREAD_Z, blocked.for_quantile = old, ORIGINAL  # type: ignore[assignment]


def rates(v: np.ndarray, sent: np.ndarray, q: float, limit: float) -> tuple[float, float, float]:
    """(pass rate, median D, median D of the passing runs)."""
    out = [evaluate(gate(q, limit), make_samples(v[i], "s", sent=sent[i])) for i in range(v.shape[0])]
    ok = [e.outcome == "pass" for e in out]
    d = np.asarray([e.details.get("dependence_tau", 1.0) for e in out])
    return float(np.mean(ok)), float(np.median(d)), float(np.median(d[ok])) if any(ok) else math.nan


def _method(arg: str) -> tuple[str, float, float]:
    """``none``, ``k30`` (the floor at kappa 30), ``z1.645`` (the spread raise at z 1.645)."""
    if arg.startswith("k"):
        return f"kappa {arg[1:]}", 0.0, float(arg[1:])
    if arg.startswith("z"):
        return f"spread z {arg[1:]}", float(arg[1:]), 0.0
    return "none", 0.0, 0.0


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    methods = [_method(a) for a in sys.argv[2:] or ["none", "k30", "z1", "z1.645"]]
    parts = [tails.chunked_prefill(np.random.default_rng(s), trials // 2, 3000) for s in (95, 1095, 2095)]
    ch = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    mm = {rho: queues.mm1(np.random.default_rng(7), trials, 3000, rho) for rho in (0.5, 0.7)}
    rows: list[tuple[str, tuple[np.ndarray, np.ndarray], float, float, float]] = [
        ("chunked prefill 11 req/s", ch, 0.95, tails.CHUNKED_TTFT[0.95], 1.0),
        ("chunked prefill 11 req/s", ch, 0.99, tails.CHUNKED_TTFT[0.99], 1.0),
        ("chunked prefill 11 req/s", ch, 0.95, tails.CHUNKED_TTFT[0.95], 1.5)]
    for rho in (0.5, 0.7):
        for q in (0.99, 0.95):
            for x in (1.0, 1.5):
                rows.append((f"M/M/1 rho {rho}", mm[rho], q, queues.mm1_quantile(q, rho), x))
    print("| model | n | gate | runs | " + " | ".join(name for name, _, _ in methods) + " |")
    print("|---|---|---|---|" + "---|" * len(methods))
    for name, (v, sent), q, limit, x in rows:
        t0 = time.perf_counter()
        cells = []
        for _, z, kappa in methods:
            with method(z, kappa):
                r, d, dp = rates(v, sent, q, x * limit)
            cells.append(f"{100 * r:.1f}% (D {d:.1f}, pass {dp:.1f})")
        kind = "false pass" if x == 1 else "power"
        se = 100 * (0.05 + 3 * math.sqrt(0.05 * 0.95 / v.shape[0]))
        print(f"| {name} | {v.shape[1]:,} | P{round(q * 100)} at {x:g}x ({kind}) | {v.shape[0]} (budget {se:.1f}%) | "
              + " | ".join(cells) + f" | {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
