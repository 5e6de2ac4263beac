"""Change points over commits (verdicts/changepoints.py) against Apache Otava's method
(tests/stats/otava_ref.py) on the same seeded series: false change points per 100 stationary commits
with realistic run effects, detection of 10% and 20% steps, and what a change reports. The full
table: docs/statistics.md ("Change points"), benchmarks/bench_history_stats.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from otava_ref import change_points as otava
from runsim import runs

from pytest_perfgate.verdicts.changepoints import ALPHA, detect, drift_phi
from pytest_perfgate.verdicts.runeffects import RunEstimate

N, AT = 100, 60


def _series(rng: np.random.Generator, step: float, cv: float, kind: str = "normal") -> list[RunEstimate]:
    lv = np.zeros(N)
    lv[AT:] += math.log1p(step)
    return runs(rng, lv, cv, kind)


@pytest.mark.parametrize(("kind", "cv"), [("normal", 0.05), ("heavy", 0.05), ("drift", 0.05)])
def test_stationary_series_false_alarms(kind: str, cv: float) -> None:
    rng = np.random.default_rng(11)
    trials, ours_any, ours_n, otava_n = 60, 0, 0, 0
    for i in range(trials):
        rs = _series(rng, 0.0, cv, kind)
        found = detect(rs, permutations=199, seed=i)
        ours_any += bool(found)
        ours_n += len(found)
        otava_n += len(otava(np.exp([r.y for r in rs])))
    print(f"RATE change points {kind} CV {cv:.0%}: ours {ours_n / trials:.2f} / 100 commits, "
          f"otava {otava_n / trials:.2f}")
    if kind != "drift":  # exchangeable run effects: the stated rate holds
        assert ours_any / trials <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / trials)
    else:  # drifting ones: fewer than Otava's, under one a gate's 100 commits
        assert ours_n / trials < 1.0 and ours_n <= otava_n


@pytest.mark.parametrize(("step", "least"), [(0.10, 0.7), (0.20, 0.9)])
def test_detects_steps_as_well_as_otava(step: float, least: float) -> None:
    rng = np.random.default_rng(12)
    trials, ours, theirs = 40, 0, 0
    for i in range(trials):
        rs = _series(rng, step, 0.05)
        ours += any(abs(c.index - AT) <= 2 for c in detect(rs, permutations=199, seed=i))
        theirs += any(abs(c - AT) <= 2 for c in otava(np.exp([r.y for r in rs])))
    print(f"RATE detection of a {step:.0%} step, CV 5%: ours {ours / trials:.2f}, otava {theirs / trials:.2f}")
    assert ours / trials >= least and ours >= theirs - 3


def test_a_change_names_its_commits_size_and_confidence() -> None:
    rng = np.random.default_rng(4)
    rs = _series(rng, 0.25, 0.03)
    (c,) = detect(rs, seed=1)
    assert (c.index, c.before, c.after) == (AT, rs[AT - 1].commit, rs[AT].commit)
    assert c.lower < 0.25 < c.upper and c.lower > 0.15
    assert c.confidence >= 0.99 and c.n_before == AT and c.n_after == N - AT
    assert c.to_dict()["after"] == rs[AT].commit


def test_splits_only_between_commits_and_few_runs() -> None:
    """Several runs of one commit are never split apart; too short a series has no change point."""
    ys = [0.0, 0.0, 0.3, 0.3, 0.3, 0.3]
    rs = [RunEstimate(y, 0.01, f"r{i}", "c1" if i < 4 else "c2") for i, y in enumerate(ys)]
    assert all(c.index == 4 for c in detect(rs, permutations=99))
    assert detect(rs[:3]) == []


def test_drift_phi_reads_the_run_effects_not_a_step() -> None:
    rng = np.random.default_rng(2)
    iid = [r.y for r in _series(rng, 0.3, 0.05)]
    drifting = [r.y for r in _series(rng, 0.0, 0.05, "drift")]
    assert drift_phi(np.array(iid)) < 0.35 < drift_phi(np.array(drifting))
