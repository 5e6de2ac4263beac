"""The tables of docs/statistics.md "Run-to-run variation" and "Change points": seeded simulations of
the run-effects regression test (verdicts/runeffects.py) and of the change-point detector
(verdicts/changepoints.py) against Apache Otava's method (tests/stats/otava_ref.py).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_history_stats.py [--trials N] [--series N]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "stats"))
from otava_ref import change_points as otava  # noqa: E402
from runsim import runs  # noqa: E402

from pytest_perfgate.verdicts.changepoints import detect  # noqa: E402
from pytest_perfgate.verdicts.runeffects import regression_test  # noqa: E402

TOL, C, K, WITHIN = 0.05, 0.95, 10, 0.02
KINDS = ("normal", "heavy", "drift")


def regression_rates(kind: str, cv: float, true: float, trials: int, seed: int) -> tuple[float, float]:
    """(flagged by the run-effects test, flagged by one run vs the last baseline run, within-run only)."""
    rng = np.random.default_rng(seed)
    ours = old = 0
    z = 1.6448536269514722
    for _ in range(trials):
        rs = runs(rng, np.r_[np.zeros(K), math.log1p(true)], cv, kind, WITHIN)
        ours += regression_test(rs[K:], rs[:K], tolerance=TOL, confidence=C).regressed
        old += (rs[K].y - rs[K - 1].y - math.log1p(TOL)) / math.hypot(WITHIN, WITHIN) > z
    return ours / trials, old / trials


def change_rates(kind: str, cv: float, step: float, trials: int, seed: int, n: int = 100,
                 at: int = 60) -> tuple[list[float], list[float], list[float]]:
    """Per method (ours, Otava's): false change points per series of n commits, detection within 2
    commits, the exact commit named."""
    rng = np.random.default_rng(seed)
    fa, hit, exact = [0, 0], [0, 0], [0, 0]
    for i in range(trials):
        lv = np.zeros(n)
        lv[at:] += math.log1p(step)
        rs = runs(rng, lv, cv, kind, WITHIN)
        found = ([c.index for c in detect(rs, permutations=499, seed=i)], otava(np.exp([r.y for r in rs])))
        for j, cps in enumerate(found):
            near = [c for c in cps if abs(c - at) <= 2] if step else []
            fa[j] += len(cps) - min(1, len(near))
            hit[j] += bool(near)
            exact[j] += at in cps
    return [x / trials for x in fa], [x / trials for x in hit], [x / trials for x in exact]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("--series", type=int, default=200)
    ns = ap.parse_args()
    print(f"## Run effects: {K} baseline runs, 1 current run, within-run SE {WITHIN:.0%}, tolerance {TOL:.0%}, "
          f"c = {C}, {ns.trials} trials a cell (3 SE at 5%: {3 * math.sqrt(0.05 * 0.95 / ns.trials):.4f})\n")
    print("| run effects | CV | false regression at +5% (ours / one-run bound) | power +10% | +20% | +40% |")
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        for cv in (0.0, 0.05, 0.10, 0.20, 0.30):
            f = regression_rates(kind, cv, TOL, ns.trials, 1)
            p = [regression_rates(kind, cv, t, ns.trials // 4, 2)[0] for t in (0.10, 0.20, 0.40)]
            print(f"| {kind} | {cv:.0%} | {f[0]:.4f} / {f[1]:.4f} | {p[0]:.3f} | {p[1]:.3f} | {p[2]:.3f} |")
            sys.stdout.flush()
    print(f"\n## Change points: 100 commits, one run each, within-run SE {WITHIN:.0%}, step at commit 60, "
          f"{ns.series} series a cell; ours at alpha 0.01 (499 permutations), Otava p < 0.001, window 50\n")
    print("| run effects | CV | false change points / 100 stationary commits (ours / Otava) | "
          "step 5%: found (ours / Otava) | 10% | 20% | exact commit at 10% (ours / Otava) |")
    print("|---|---|---|---|---|---|---|")
    for kind, cv in (("normal", 0.03), ("normal", 0.05), ("normal", 0.10), ("heavy", 0.05), ("drift", 0.05)):
        fa0 = change_rates(kind, cv, 0.0, ns.series, 3)[0]
        cells, exact10 = [], [0.0, 0.0]
        for st in (0.05, 0.10, 0.20):
            _, hit, exact = change_rates(kind, cv, st, ns.series // 2, 4)
            cells.append(f"{hit[0]:.2f} / {hit[1]:.2f}")
            if st == 0.10:
                exact10 = exact
        print(f"| {kind} | {cv:.0%} | {fa0[0]:.2f} / {fa0[1]:.2f} | {' | '.join(cells)} | "
              f"{exact10[0]:.2f} / {exact10[1]:.2f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
