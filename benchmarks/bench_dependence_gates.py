"""Goodput, capacity and baseline regression on dependent requests (issue 32 item 2): printed tables,
before (the independent-request rules) and after (verdicts/shares.py, verdicts/regression.py).

    .venv/bin/python benchmarks/bench_dependence_gates.py              # every table (~10 min on 2 busy cores)
    .venv/bin/python benchmarks/bench_dependence_gates.py goodput      # one table: goodput, capacity, regression

Seeded; the truth sits exactly on the threshold for a false-pass row, 1 - c = 5%, acceptance
<= 5% + 3 SE. The models are tests/queue_runs.py's (M/M/1 FCFS, a closed loop, continuous batching).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import signal as sgn
from scipy import special as spc
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import queue_runs as queues  # noqa: E402

from pytest_perfgate.load.capacity import Term, decide_term  # noqa: E402
from pytest_perfgate.verdicts.bounds import clopper_pearson  # noqa: E402
from pytest_perfgate.verdicts.regression import quantile_shift_test  # noqa: E402
from pytest_perfgate.verdicts.shares import share_bounds  # noqa: E402

C = 0.95


def _se(trials: int) -> float:
    return 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


# ---------------------------------------------------------------- goodput
def _attain(rows: np.ndarray, a: float, floor: float) -> tuple[float, float]:
    new = old = 0
    for r in rows:
        good = r <= a
        new += share_bounds(good, C, memory=np.minimum(r / a, 10.0)).bounds.lower >= floor
        old += clopper_pearson(int(good.sum()), good.size, C).lower >= floor
    return old / len(rows), new / len(rows)


def _batching_rows(rng: np.random.Generator, trials: int, n: int, rate: float) -> np.ndarray:
    return np.asarray([(lambda s, f, e: f - s)(*queues.batching(rng, n, rate)) for _ in range(trials)])


def goodput_table() -> None:
    print("## Goodput attainment >= 90% (min at the true attainment: false pass; 97% true: power)\n")
    print("| model | utilisation | n | start | false pass before (Clopper-Pearson) | after (blocks) | power at 97% before / after |")
    print("|---|---|---|---|---|---|---|")
    trials = 400
    for rho, n, stat in [(0.3, 80, False), (0.3, 500, False), (0.5, 500, False), (0.5, 500, True), (0.7, 2000, True),
                         (0.9, 2000, False), (0.9, 5000, True), (0.95, 20000, True), (0.95, 100000, True)]:
        rng = np.random.default_rng(int(rho * 1000) + n)
        t = trials if n <= 20000 else 100
        _, _, soj = queues.mm1(rng, t, n, rho, 1.0, stationary=stat)
        fb, fa = _attain(soj, -math.log(0.1) / (1 - rho), 0.9)
        pb, pa = _attain(soj, -math.log(0.03) / (1 - rho), 0.9) if n <= 20000 else (math.nan, math.nan)
        print(f"| M/M/1 | {rho} | {n:,} | {'stationary' if stat else 'empty'} | {fb:.1%} | {fa:.1%} (limit {_se(t):.1%}) "
              f"| {pb:.1%} / {pa:.1%} |", flush=True)
    rng = np.random.default_rng(7)
    _, _, lat = queues.closed_loop(rng, trials, 2000, 8, 1.0)
    lat = lat[:, 8:]
    fb, fa = _attain(lat, float(sps.gamma.ppf(0.9, 8)), 0.9)
    pb, pa = _attain(lat, float(sps.gamma.ppf(0.97, 8)), 0.9)
    print(f"| closed loop, 8 users | 1 | 2,000 | full | {fb:.1%} | {fa:.1%} (limit {_se(trials):.1%}) | {pb:.1%} / {pa:.1%} |")
    for rate in (10.0, 14.0):
        rng = np.random.default_rng(int(rate))
        s, f, _ = queues.batching(rng, 400_000, rate)
        ttft = (f - s)[20_000:]
        a90, a97 = float(np.quantile(ttft, 0.9)), float(np.quantile(ttft, 0.97))
        rows = _batching_rows(rng, 200, 2000, rate)
        fb, fa = _attain(rows, a90, 0.9)
        pb, pa = _attain(rows, a97, 0.9)
        print(f"| continuous batching (16 slots), TTFT | {rate:g} req/s | 2,000 | empty | {fb:.1%} | {fa:.1%} "
              f"(limit {_se(200):.1%}) | {pb:.1%} / {pa:.1%} |", flush=True)
    rng = np.random.default_rng(8)
    for n, true, floor in ((80, 0.99, 0.8), (80, 0.9, 0.9), (500, 0.97, 0.9), (500, 0.9, 0.9)):
        x = rng.exponential(1.0, (1000, n))
        b, a = _attain(x, -math.log(1 - true), floor)
        print(f"| independent | - | {n} | - | attainment {true:.0%} vs min {floor:.0%}: before {b:.1%} | after {a:.1%} | |")
    print()


# ---------------------------------------------------------------- capacity
def _old_term_passes(x: np.ndarray, limit: float, c: float) -> bool:
    """The former rule: n / tau effective requests, tau by batches of floor(sqrt(n))."""
    def act(y: np.ndarray) -> float:
        n = y.size
        bs = math.isqrt(n)
        nb = n // bs
        v = float(np.var(y, ddof=1))
        if nb < 2 or bs < 2 or not v > 0:
            return 1.0
        return max(1.0, bs * float(np.var(y[: nb * bs].reshape(nb, bs).mean(1), ddof=1)) / v)

    over = float(np.count_nonzero(x >= limit))
    tau = max(act(np.minimum(x, 10 * limit)), act((x >= limit).astype(np.float64)))
    ne = x.size / tau
    k = over / tau
    return k < ne and float(spc.betainc(ne - k, k + 1, 1 - 0.01)) <= 1 - c


def capacity_table() -> None:
    print("## Capacity: P99 TTFT <= 2 s on M/M/1 (TTFT = sojourn), stationary start\n")
    print("| case | utilisation at the level | requests a level | trials | pass before | pass after | median tau after |")
    print("|---|---|---|---|---|---|---|")
    for rate, n, trials in [(48.0, 150_000, 100), (48.0, 400_000, 60), (20.0, 150_000, 100), (20.0, 6000, 400)]:
        mu = rate + math.log(100) / 2.0
        rng = np.random.default_rng(int(rate) * 7 + n)
        old = new = 0
        taus = []
        for _ in range(trials // 10):
            _, _, soj = queues.mm1(rng, 10, n, rate, mu, stationary=True)
            for row in soj:
                old += _old_term_passes(row, 2.0, C)
                r = decide_term(Term("ttft", 2.0), row, C)
                new += r.decision == "pass"
                taus.append(r.tau)
        print(f"| one term at 95%, capacity exactly {rate:g} req/s | {rate / mu:.3f} | {n:,} | {trials} | {old / trials:.1%} "
              f"| {new / trials:.1%} (limit {_se(trials):.1%}) | {np.median(taus):.0f} |", flush=True)
    print()
    print("Power: capacity 1.5 x the target R, grid 0.5R, 0.75R, R, terms P99 TTFT <= 2 s and P99 TPOT <= 100 ms")
    print("(TPOT i.i.d., its P99 at 60% of the limit), each term at 97.5% (Bonferroni), runs from empty:\n")
    print("| target R | utilisation at R | requests a level | trials | passes before | passes after |")
    print("|---|---|---|---|---|---|")
    for rate, n, trials in [(4.0, 3000, 300), (4.0, 6000, 300), (20.0, 6000, 300), (20.0, 12000, 300),
                            (20.0, 24000, 200), (48.0, 6000, 200), (48.0, 12000, 200), (48.0, 24000, 200),
                            (48.0, 48000, 100)]:
        mu = 1.5 * rate + math.log(100) / 2.0
        rng = np.random.default_rng(int(rate) * 11 + n)
        old = new = 0
        for _ in range(trials // 10):
            ok_old = np.ones(10, dtype=bool)
            ok_new = np.ones(10, dtype=bool)
            for lv in (0.5 * rate, 0.75 * rate, rate):
                _, _, soj = queues.mm1(rng, 10, n, lv, mu)
                tpot = rng.lognormal(math.log(0.06) - 2.326 * 0.3, 0.3, (10, n))
                for i in range(10):
                    for x, lim in ((soj[i], 2.0), (tpot[i], 0.1)):
                        ok_old[i] &= _old_term_passes(x, lim, 0.975)
                        ok_new[i] &= decide_term(Term("ttft", lim), x, 0.975).decision == "pass"
            old += int(ok_old.sum())
            new += int(ok_new.sum())
        print(f"| {rate:g} req/s | {rate / mu:.3f} | {n:,} | {trials} | {old / trials:.1%} | {new / trials:.1%} |", flush=True)
    print()


# ---------------------------------------------------------------- regression
def _ar1(rng: np.random.Generator, n: int, phi: float, sigma: float) -> np.ndarray:
    e = rng.normal(0.0, sigma * math.sqrt(1 - phi * phi), n)
    return np.asarray(sgn.lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.normal(0.0, sigma)])[0])


def _plain(cur: np.ndarray, ref: np.ndarray, factor: float, seed: int, b: int) -> float:
    rng = np.random.default_rng(seed)
    ref = ref * factor
    n = cur.size
    pooled, k = np.concatenate([cur, ref]), math.ceil(n * 0.99)
    obs = np.partition(cur, k - 1)[k - 1] - np.partition(ref, k - 1)[k - 1]
    perm = pooled[np.argsort(rng.random((b, pooled.size)), axis=1)]
    d = np.partition(perm[:, :n], k - 1, axis=1)[:, k - 1] - np.partition(perm[:, n:], k - 1, axis=1)[:, k - 1]
    return float((1 + np.count_nonzero(d >= obs)) / (b + 1))


def regression_table() -> None:
    print("## Baseline regression of a P99, tolerance 5%, lognormal sigma 0.5, 500 a run, 199 permutations\n")
    print("| case | trials | flagged before (plain permutation) | after (studentized) |")
    print("|---|---|---|---|")
    z = float(sps.norm.ppf(0.99))
    n, trials = 500, 1000
    for label, shift, sig, phi in [("independent, exactly +5%", 1.05, 0.5, 0.0),
                                   ("narrower current (sigma 0.3), same P99 x 1.05", None, 0.3, 0.0),
                                   ("AR(1) phi 0.5, exactly +5%", 1.05, 0.5, 0.5), ("AR(1) phi 0.9, exactly +5%", 1.05, 0.5, 0.9),
                                   ("power: independent, +40%", 1.4, 0.5, 0.0), ("power: AR(1) phi 0.5, +40%", 1.4, 0.5, 0.5)]:
        rng = np.random.default_rng(len(label) * 31 + int(phi * 10))
        old = new = 0
        for i in range(trials):
            lb = _ar1(rng, n, phi, 0.5) if phi else rng.normal(0.0, 0.5, n)
            lc = _ar1(rng, n, phi, sig) if phi else rng.normal(0.0, sig, n)
            cur = np.exp(math.log(1.05) + (0.5 - sig) * z + lc) if shift is None else np.exp(lc) * shift
            ref = np.exp(lb)
            old += _plain(cur, ref, 1.05, i, 199) <= 0.05
            new += quantile_shift_test(cur, ref, 0.99, 1.05, permutations=199, seed=i).p_worse <= 0.05
        print(f"| {label} | {trials} | {old / trials:.1%} | {new / trials:.1%} |", flush=True)
    print()


TABLES = {"goodput": goodput_table, "capacity": capacity_table, "regression": regression_table}

if __name__ == "__main__":
    t0 = time.time()
    for name in sys.argv[1:] or list(TABLES):
        TABLES[name]()
    print(f"({time.time() - t0:.0f} s)")
