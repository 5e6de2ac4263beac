"""Goodput's bound with the request rate's uncertainty and the short-run refusal, and the plain-list
regression's power (issue 39, "Over the budget" rows 3-5): printed tables, before and after.

    nice -n 10 .venv/bin/python benchmarks/bench_goodput39.py > benchmarks/results-issue39-goodput.txt

Seeded. A false-pass row puts the gate exactly at the true value (1 - c = 5%, acceptance <= 5% + 3 SE
at the trials run); a power row gives the true value a margin. Goodput gate: min = the true goodput
(request rate x true attainment). Before = the attainment's share bound (verdicts/shares.py) times
the run's measured request rate, taken as known; after = load/goodput.py's ratio of sums with the
rate's uncertainty, refused below 50 x the run's memory (tau). Models: tests/queue_runs.py.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import queue_runs as queues  # noqa: E402

from pytest_perfgate.load.goodput import goodput_bounds  # noqa: E402
from pytest_perfgate.verdicts.regression import quantile_shift_test  # noqa: E402
from pytest_perfgate.verdicts.shares import share_bounds  # noqa: E402

C = 0.95
Arr = np.ndarray


def _limit(trials: int) -> float:
    return 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


def _rates(sent: Arr, done: Arr, lat: Arr, a: float, floor: float, gate: float) -> tuple[float, ...]:
    """(attainment before, after, goodput before, after, refused, median tau) over the rows."""
    ab = aa = gb = ga = ref = 0
    taus = []
    for s, d, x in zip(sent, done, lat, strict=True):
        good, mem = x <= a, np.minimum(x / a, 10.0)
        seconds = float(d.max() - s[0])
        old = share_bounds(good, C, memory=mem).bounds.lower
        new = goodput_bounds(good, mem, s, seconds, C)
        ab += old >= floor
        aa += new.attainment.lower >= floor
        gb += old * good.size / seconds >= gate
        ga += new.bounds[0] >= gate
        ref += bool(new.refused)
        taus.append(new.tau)
    t = len(sent)
    return ab / t, aa / t, gb / t, ga / t, ref / t, float(np.median(taus))


def _iid(rng: np.random.Generator, trials: int, n: int, p: float, poisson: bool = True) -> tuple[Arr, Arr, Arr, float]:
    """Independent requests at 10 req/s (Poisson or a fixed schedule), latency Exp(mean 50 ms) x 4 when
    bad (a share 1 - p): (sent, done, latency, the SLO limit)."""
    gaps = rng.exponential(0.1, (trials, n)) if poisson else np.full((trials, n), 0.1)
    gaps[:, 0] = 0.0
    sent = np.cumsum(gaps, axis=1)
    bad = rng.random((trials, n)) >= p
    lat = rng.uniform(0.01, 0.2, (trials, n)) + np.where(bad, 0.3, 0.0)
    return sent, sent + lat, lat, 0.25


def boundary_table() -> None:
    print("## Goodput gate at the true goodput (false pass), c = 0.95\n")
    print("| model | n | start | trials | goodput before (rate known) | after | attainment before / after "
          "| refused (n < 50 tau) | median tau | limit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, poisson in ((80, True), (500, True), (1000, True), (3000, True), (1000, False)):
        trials = 400
        sent, done, lat, a = _iid(np.random.default_rng(n + poisson), trials, n, 0.9, poisson)
        r = _rates(sent, done, lat, a, 0.9, 9.0)
        print(f"| independent, {'Poisson' if poisson else 'fixed schedule'} 10 req/s | {n:,} | - | {trials} "
              f"| {r[2]:.1%} | **{r[3]:.1%}** | {r[0]:.1%} / {r[1]:.1%} | {r[4]:.1%} | {r[5]:.0f} | {_limit(trials):.1%} |",
              flush=True)
    for rho, n, stat, trials in ((0.9, 1000, True, 400), (0.9, 1000, False, 400), (0.9, 2000, False, 300),
                                 (0.9, 5000, True, 300), (0.7, 2000, True, 300), (0.5, 500, False, 300),
                                 (0.5, 500, True, 300), (0.3, 500, False, 300)):
        rng = np.random.default_rng(int(rho * 100) + n + stat)
        sent, done, soj = queues.mm1(rng, trials, n, rho, 1.0, stationary=stat)
        r = _rates(sent, done, soj, -math.log(0.1) / (1 - rho), 0.9, 0.9 * rho)
        print(f"| M/M/1 utilisation {rho} | {n:,} | {'stationary' if stat else 'empty'} | {trials} | {r[2]:.1%} "
              f"| **{r[3]:.1%}** | {r[0]:.1%} / {r[1]:.1%} | {r[4]:.1%} | {r[5]:.0f} | {_limit(trials):.1%} |", flush=True)
    users, n, trials = 8, 2000, 300
    sent, done, lat = queues.closed_loop(np.random.default_rng(81), trials, n, users, 1.0)
    r = _rates(sent[:, users:], done[:, users:], lat[:, users:], float(sps.gamma.ppf(0.9, users)), 0.9, 0.9)
    print(f"| closed loop, {users} users, no think time | {n:,} | full | {trials} | {r[2]:.1%} | **{r[3]:.1%}** "
          f"| {r[0]:.1%} / {r[1]:.1%} | {r[4]:.1%} | {r[5]:.0f} | {_limit(trials):.1%} |\n", flush=True)


def more_iid() -> None:
    """The n = 1,000 Poisson row again on two more seeds of 1,000 runs each (its 8.2% of 400 checked)."""
    print("## Independent Poisson requests at the true goodput, n 1,000, more runs\n")
    print("| seed | trials | goodput before (rate known) | after |")
    print("|---|---|---|---|")
    for seed in (11, 12):
        sent, done, lat, a = _iid(np.random.default_rng(seed), 1000, 1000, 0.9, True)
        r = _rates(sent, done, lat, a, 0.9, 9.0)
        print(f"| {seed} | 1000 | {r[2]:.1%} | **{r[3]:.1%}** |", flush=True)
    print()


def power_table() -> None:
    print("## Power: a goodput gate with a margin (min = 0.9 x the request rate)\n")
    print("| model | true attainment | n | trials | goodput passes before | after | refused |")
    print("|---|---|---|---|---|---|---|")
    for n, p in ((500, 0.97), (1000, 0.97), (3000, 0.97), (80, 0.99), (500, 0.99), (1000, 0.99)):
        sent, done, lat, a = _iid(np.random.default_rng(7 * n + int(p * 100)), 200, n, p)
        r = _rates(sent, done, lat, a, 0.9, 9.0)
        print(f"| independent, Poisson 10 req/s | {p:.0%} | {n:,} | 200 | {r[2]:.1%} | {r[3]:.1%} | {r[4]:.1%} |", flush=True)
    for rho, n, trials in ((0.5, 500, 200), (0.5, 1000, 200), (0.5, 3000, 200), (0.7, 1000, 200), (0.7, 3000, 200),
                           (0.7, 10000, 100), (0.9, 5000, 100), (0.9, 20000, 100)):
        rng = np.random.default_rng(int(rho * 1000) + n)
        sent, done, soj = queues.mm1(rng, trials, n, rho, 1.0, stationary=False)
        r = _rates(sent, done, soj, -math.log(0.01) / (1 - rho), 0.9, 0.9 * rho)
        print(f"| M/M/1 utilisation {rho}, from empty | 99% | {n:,} | {trials} | {r[2]:.1%} | {r[3]:.1%} "
              f"| {r[4]:.1%} (median tau {r[5]:.0f}) |", flush=True)
    print()


def regression_table() -> None:
    """Plain lists (no send times) in list order: what the dependence estimate costs on independent runs."""
    print("## Regression of a P99 on plain lists (no send times), 500 a run, lognormal sigma 0.5, 199 permutations\n")
    print("| case | trials | taken as independent (before) | list order (after) | runs called dependent |")
    print("|---|---|---|---|---|")
    from pytest_perfgate.verdicts.blocked import for_quantile
    from pytest_perfgate.verdicts.dependence import estimate

    for label, shift, trials in (("independent, exactly +5% (false alarm)", 1.05, 400), ("independent, +40% (power)", 1.4, 400)):
        rng = np.random.default_rng(int(shift * 100))
        old = new = dep = 0
        for i in range(trials):
            ref, cur = np.exp(rng.normal(0, 0.5, 500)), np.exp(rng.normal(0, 0.5, 500)) * shift
            taus = tuple(for_quantile(x, 0.99, estimate(x)).per_independent for x in (cur, ref))
            dep += any(t > 1 for t in taus)
            new += quantile_shift_test(cur, ref, 0.99, 1.05, permutations=199, seed=i, taus=(taus[0], taus[1])).p_worse <= 0.05
            old += quantile_shift_test(cur, ref, 0.99, 1.05, permutations=199, seed=i, taus=(1.0, 1.0)).p_worse <= 0.05
        print(f"| {label} | {trials} | {old / trials:.1%} | {new / trials:.1%} | {dep / trials:.1%} |", flush=True)
    print()


if __name__ == "__main__":
    start = time.time()
    which = sys.argv[1:] or ["boundary", "iid1000", "power", "regression"]
    for name in which:
        {"boundary": boundary_table, "iid1000": more_iid, "power": power_table, "regression": regression_table}[name]()
    print(f"({time.time() - start:.0f} s)")
