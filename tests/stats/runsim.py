"""Seeded series of runs with run effects (normal, heavy-tailed, drifting), for the run-effects
regression test and the change-point detectors (tests/stats/test_run_effects.py,
tests/stats/test_change_points.py, benchmarks/bench_history_stats.py)."""

from __future__ import annotations

import math

import numpy as np

from pytest_perfgate.verdicts.runeffects import RunEstimate

Array = np.ndarray


def run_effects(rng: np.random.Generator, n: int, cv: float, kind: str) -> Array:
    """n run effects on the log scale with SD log(1 + cv^2)^0.5 (the statistic's CV is ``cv``):
    ``normal``; ``heavy`` Student t with 3 df scaled to that SD (one run in ~70 beyond 3 SD);
    ``drift`` AR(1) with phi 0.8 (the machine's state wanders slowly between consecutive runs)."""
    sd = math.sqrt(math.log1p(cv * cv))
    if sd == 0:
        return np.zeros(n)
    if kind == "normal":
        return rng.normal(0, sd, n)
    if kind == "heavy":
        return rng.standard_t(3, n) * sd / math.sqrt(3.0)
    if kind == "drift":
        phi = 0.8
        e = rng.normal(0, sd * math.sqrt(1 - phi * phi), n)
        out = np.empty(n)
        out[0] = rng.normal(0, sd)
        for i in range(1, n):
            out[i] = phi * out[i - 1] + e[i]
        return out
    raise ValueError(kind)


def runs(rng: np.random.Generator, levels: Array, cv: float, kind: str, within: float = 0.02) -> list[RunEstimate]:
    """One run per level (log scale): level + run effect + within-run error of SD ``within``; each run
    reports ``within`` as its standard error."""
    u = run_effects(rng, len(levels), cv, kind)
    e = rng.normal(0, within, len(levels))
    return [RunEstimate(float(x), within, f"r{i}", f"{i:040x}") for i, x in enumerate(levels + u + e)]
