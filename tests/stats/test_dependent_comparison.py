"""Two-run comparisons of dependent runs (issue 32 item 2): a P99 reduction of two M/M/1 runs
(utilisation 0.7, 3,000 requests each, stationary, send times kept), the treatment exactly 40% under
the reference (min 40%: the boundary). Each run's bound comes from its own dependence
(QuantileMethod.side_bounds: verdicts/blocked.py in arrival order); without send times the same
values are independent draws to the verdict, which is what the comparison claimed before."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from simhelp import assert_rate

from pytest_perfgate.config import Thresholds
from pytest_perfgate.verdicts.samples import make_samples
from pytest_perfgate.verdicts.verdict import evaluate

sys.path.insert(0, str(Path(__file__).parents[1]))
import queue_runs as queues  # noqa: E402

C = 0.95


def test_p99_reduction_at_the_boundary_on_dependent_runs(th: Thresholds) -> None:
    trials, n, rho = 300, 3000, 0.7
    rng = np.random.default_rng(61)
    st, _, soj_t = queues.mm1(rng, trials, n, rho, 1.0, stationary=True)
    sr, _, soj_r = queues.mm1(rng, trials, n, rho, 1.0, stationary=True)
    gate = th.gate("p99_reduction")
    new = old = 0
    for i in range(trials):
        t, r = soj_t[i] * 0.6, soj_r[i]  # the treatment's P99 is exactly 0.6 x the reference's
        v = evaluate(gate, (make_samples(t, "s", sent=st[i]), make_samples(r, "s", sent=sr[i])), confidence=C)
        new += v.outcome == "pass"
        old += evaluate(gate, (make_samples(t, "s"), make_samples(r, "s")), confidence=C).outcome == "pass"
    print(f"P99 reduction at exactly 40%, M/M/1 rho {rho}, {n} a run: each run's own dependence {new / trials:.3f}, "
          f"as independent draws {old / trials:.3f}")
    assert old / trials > 0.1
    assert_rate("P99 reduction, dependent runs", new / trials, trials)


def test_p99_reduction_power_on_dependent_runs(th: Thresholds) -> None:
    """A clear reduction (the treatment at 0.3 x: 70% against min 40%) passes on dependent runs long
    enough for each run's own P99 bound at 97.5% (n / D >= 368 effective requests: at utilisation 0.7
    3,000 requests are about 100 independent ones and no run-level bound exists; 20,000 decide)."""
    trials, n, rho = 100, 20000, 0.7
    rng = np.random.default_rng(62)
    st, _, soj_t = queues.mm1(rng, trials, n, rho, 1.0, stationary=True)
    sr, _, soj_r = queues.mm1(rng, trials, n, rho, 1.0, stationary=True)
    gate = th.gate("p99_reduction")
    got = np.mean([evaluate(gate, (make_samples(soj_t[i] * 0.3, "s", sent=st[i]), make_samples(soj_r[i], "s", sent=sr[i])),
                            confidence=C).outcome == "pass" for i in range(trials)])
    print(f"P99 reduction 70% vs min 40%, M/M/1 rho {rho}, {n} a run: passes {got:.3f}")
    assert got >= 0.8
