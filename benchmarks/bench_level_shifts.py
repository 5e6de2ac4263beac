"""Issue 39: runs whose level shifts, and limits far beyond every value. P99 pass rates before (D the
larger of the whole run's tau and the tail indicator's) and after (level shifts: the memory within
the levels, :mod:`pytest_perfgate.verdicts.shifts`; a limit >= 2x every value of a run >= 50x its
memory long: the tail's clustering, ``blocked.far_limit``). Printed table, not a test.

    .venv/bin/python benchmarks/bench_level_shifts.py [TRIALS]     # ~3 min at 200 on 2 cores

At a limit: the false pass (<= 5% + 3 SE); the level-shift models' limit is the run's own
percentile over its requests (tests/stats/regimes.py), what a verdict on such a run claims.
Output of a run: benchmarks/results-level-shifts.txt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "stats"), str(ROOT / "tests")]
import queue_runs  # noqa: E402
import queues  # noqa: E402
import regimes  # noqa: E402

from pytest_perfgate.verdicts import blocked  # noqa: E402
from pytest_perfgate.verdicts import bounds as st  # noqa: E402
from pytest_perfgate.verdicts import dependence as dp  # noqa: E402

Q = 0.99


def _before(x: np.ndarray, thr: float) -> str:
    dep = dp.estimate(x, shifts=False)
    if not dep.dependent:
        return st.quantile_decision(x, Q, 0.95, "max", thr)[0]
    d = max(dep.tau, blocked.indicator_tau(x >= st.empirical_quantile(x, Q)))
    return blocked.decision(x, Q, 0.95, "max", thr, dp.Dependence(dep.n, dep.block, dep.method, d))[0]


def _after(x: np.ndarray, thr: float) -> str:
    dep = dp.estimate(x)
    if not dep.dependent:
        return st.quantile_decision(x, Q, 0.95, "max", thr)[0]
    return blocked.decision(x, Q, 0.95, "max", thr, blocked.for_quantile(x, Q, dep))[0]


def _row(name: str, v: np.ndarray, thr: object) -> None:
    t = np.broadcast_to(np.asarray(thr, dtype=np.float64), (v.shape[0],))
    cells = [f"{np.mean([f(r, float(u)) == 'pass' for r, u in zip(v, t, strict=True)]):.1%}" for f in (_before, _after)]
    print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def _stalls(rng: np.random.Generator, trials: int, n: int, every: int = 4000, length: int = 50,
            size: float = 50.0) -> np.ndarray:
    x = rng.exponential(1.0, (trials, n))
    for t in range(trials):
        i = 0
        while True:
            i += int(rng.geometric(1 / every))
            if i >= n:
                break
            x[t, i:i + length] += size
            i += length
    return x


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rng = np.random.default_rng(39)
    print(f"P99 gate, pass rate over {trials} seeded runs a row; before | after\n")
    print("| model, limit | before | after |\n|---|---|---|")
    for n in (1000, 3000):
        lev = regimes.deciles(trials, n)
        v = regimes.series(rng, lev)
        b = regimes.run_quantile(lev[0], Q)
        for k in (1.0, 1.5, 10.0):
            _row(f"issue's decile levels, n {n:,}, {k:g}x the run's P99", v, k * b)
        lev = regimes.switching(rng, trials, n)
        v = regimes.series(rng, lev)
        b2 = np.asarray([regimes.run_quantile(r, Q) for r in lev])
        _row(f"regime switching (1 / 1.6, stays ~300), n {n:,}, at the run's P99", v, b2)
        _row(f"regime switching, n {n:,}, 1.5x", v, 1.5 * b2)
        lev = regimes.drift(trials, n)
        v = regimes.series(rng, lev)
        b = regimes.run_quantile(lev[0], Q)
        _row(f"drift 1 -> 1.6, n {n:,}, at the run's P99", v, b)
        _row(f"drift, n {n:,}, 1.5x", v, 1.5 * b)
    big = queues.mmc(np.random.default_rng(2), 4, 100_000, 0.8, 4)[0].ravel()
    for n in (1000, 3000):
        _row(f"M/M/4 0.8, n {n:,}, at the limit", queues.mmc(rng, trials, n, 0.8, 4)[0], float(np.quantile(big, Q)))
    for rho, n in ((0.3, 2000), (0.5, 3000), (0.7, 1000), (0.7, 5000), (0.9, 1000), (0.9, 5000), (0.95, 2000), (0.97, 3000)):
        v, _ = queues.mm1(rng, trials, n, rho)
        _row(f"M/M/1 {rho}, n {n:,}, at the limit", v, queues.mm1_quantile(Q, rho))
        if n >= 2000 and rho <= 0.7:
            _row(f"M/M/1 {rho}, n {n:,}, 1.5x", v, 1.5 * queues.mm1_quantile(Q, rho))
    for phi, n in ((0.5, 3000), (0.9, 3000), (0.97, 1000), (0.99, 1000)):
        v, _ = queues.ar1_lognormal(rng, trials, n, phi)
        _row(f"AR(1) log-normal phi {phi}, n {n:,}, at the limit", v, queues.ar1_quantile(Q))
    for users, n in ((4, 1000), (4, 3000), (8, 1000), (8, 3000)):
        _, _, lat = queue_runs.closed_loop(rng, trials, n, users, 1.0)
        b = float(sps.gamma.ppf(Q, users))
        _row(f"closed loop of {users}, n {n:,}, at the limit", lat, b)
        _row(f"closed loop of {users}, n {n:,}, 3x", lat, 3 * b)
    v = queues.mg1(rng, trials, 3000, 0.8, sigma=1.5)[0]
    bigm = queues.mg1(np.random.default_rng(3), 2, 300_000, 0.8, sigma=1.5)[0].ravel()
    _row("M/G/1 log-normal sigma 1.5, 0.8, n 3,000, at the limit", v, float(np.quantile(bigm, Q)))
    s = _stalls(np.random.default_rng(5), 2, 2_000_000).ravel()
    _row("stalls of 50 requests (+50) every ~4,000, n 3,000, at the limit", _stalls(rng, trials, 3000), float(np.quantile(s, Q)))


if __name__ == "__main__":
    main()
