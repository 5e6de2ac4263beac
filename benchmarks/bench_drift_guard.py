"""Issue 39: can one run tell a drifting server from a queue with long memory? Measured before
choosing a local-level (drift) model for the quantile verdicts. Printed table, not a test.

    .venv/bin/python benchmarks/bench_drift_guard.py [TRIALS]     # ~10 min at 200 on 2 cores

A drift rule would read a run's memory within a local level (the claim then covers the run's own mix
of levels, as for level shifts: :mod:`pytest_perfgate.verdicts.shifts`) when the level explains the
memory away. Two local levels of the run's normal scores, each with the shift search's guard:

* ``seg``: the shift search's own greedy binary segmentation taken to its most segments (20 shifts,
  segments >= max(50, n / 40)), no penalty: the residual's tau ``t``; accepted when the whole run's
  tau falls >= ``F``-fold and every segment is >= ``G`` x ``t`` long;
* ``mov``: a centred moving mean of ``w = n / 20`` scores: accepted when tau falls >= ``F``-fold and
  ``w >= G x t``.

For each stationary model (whose claim must be the long-run one: a rule that accepts its runs judges
them on their own levels and passes them near their stationary P99 far more than 5%), the share of
runs the rule accepts; for the recorded drifting runs (tests/fixtures/runs/), whether it accepts their
first 1,600 / 3,200 / 10,000 requests. Then the adopted rule (``shifts`` at F 12, G 10, >= 10 shifts:
``dependence.estimate(...).drift``) and, where the model's P99 is known, the P99 gate's pass rate at
it (confidence 0.95, one look; the budget 5% + 3 SE). Output of a run: benchmarks/results-drift-guard.txt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "stats"), str(ROOT / "tests")]
import queue_runs  # noqa: E402
import queues  # noqa: E402

from pytest_perfgate.verdicts import blocked  # noqa: E402
from pytest_perfgate.verdicts import bounds as st  # noqa: E402
from pytest_perfgate.verdicts import dependence as dp  # noqa: E402
from pytest_perfgate.verdicts import shifts as sh  # noqa: E402

RULES = [(8.0, 10.0), (8.0, 15.0), (4.0, 15.0), (12.0, 10.0)]  # (F, G)


def stats_of(x: np.ndarray) -> tuple[float, float, float, float, float]:
    """(tau, seg residual tau, shortest segment, moving-mean residual tau, window)."""
    s = dp.normal_scores(np.asarray(x, dtype=np.float64))
    n = s.size
    tau = dp.tau_of(s)
    least = sh.min_segment(n)
    order = sh.greedy(s, least, min(sh.MAX_SHIFTS, n // least - 1))
    cuts = tuple(sorted(c for c, _ in order))
    t_seg = dp.tau_of(sh.residual(s, cuts))
    edges = (0, *cuts, n)
    shortest = min(b - a for a, b in zip(edges[:-1], edges[1:], strict=False))
    w = max(50, n // 20)
    t_mov = dp.tau_of(s - ndimage.uniform_filter1d(s, w, mode="nearest"))
    return tau, t_seg, shortest, t_mov, w


def accepts(st: tuple[float, float, float, float, float]) -> list[tuple[bool, bool]]:
    tau, t_seg, shortest, t_mov, w = st
    return [(tau >= f * t_seg and shortest >= g * t_seg, tau >= f * t_mov and w >= g * t_mov) for f, g in RULES]


def _pass(x: np.ndarray, thr: float) -> bool:
    dep = dp.estimate(x)
    if not dep.dependent:
        return st.quantile_decision(x, 0.99, 0.95, "max", thr)[0] == "pass"
    return blocked.decision(x, 0.99, 0.95, "max", thr, blocked.for_quantile(x, 0.99, dep))[0] == "pass"


def row(label: str, runs: list[np.ndarray], p99: float | None = None) -> None:
    got = np.array([[a for pair in accepts(stats_of(x)) for a in pair] for x in runs], dtype=float)
    rates = got.mean(axis=0) * 100
    cells = " | ".join(f"{rates[2 * i]:5.1f}% {rates[2 * i + 1]:5.1f}%" for i in range(len(RULES)))
    adopted = np.mean([dp.estimate(x).drift for x in runs]) * 100
    passed = "-" if p99 is None else f"{np.mean([_pass(x, p99) for x in runs]) * 100:.1f}%"
    print(f"| {label:30s} | {len(runs):4d} | {cells} | {adopted:5.1f}% | {passed} |", flush=True)


def main(trials: int) -> None:
    rng = np.random.default_rng(39_07)
    head = " | ".join(f"F {f:g} G {g:g}: seg mov" for f, g in RULES)
    print(f"| run | runs | {head} | adopted: read as a drift | P99 at the true P99: pass |")
    for name in ("embedded-vllm-tpot", "transformers-serve-ttft"):
        z = np.load(ROOT / "tests" / "fixtures" / "runs" / f"{name}.npz")
        x = z[z.files[0]].astype(np.float64)
        for n in (1600, 3200, 10000):
            row(f"recorded {name} [:{n}]", [x[:n]])
    for n in (3000, 10000):
        for rho in (0.5, 0.7, 0.9, 0.95, 0.99):
            x, _ = queues.mm1(rng, trials, n, rho)
            row(f"M/M/1 {rho} n {n}", list(x), queues.mm1_quantile(0.99, rho))
        for phi in (0.99, 0.999):
            x, _ = queues.ar1_lognormal(rng, trials, n, phi)
            row(f"AR(1) log-normal {phi} n {n}", list(x), queues.ar1_quantile(0.99))
        x, _ = queues.mg1(rng, trials, n, 0.7)
        row(f"M/G/1 0.7 log-normal 1 n {n}", list(x))
        runs = []
        for _ in range(max(10, trials // 4)):
            sent, first, _e = queue_runs.batching(rng, n + 500, 12.0)
            runs.append((first - sent)[500:])
        row(f"batching 16 slots 0.7 n {n}", runs)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
