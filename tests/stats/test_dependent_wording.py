"""Issue 39: an inconclusive comparison of two dependent runs says its count in the requests the user
sends. Two 150-request runs, a P90 ratio: before, "need >= 36 samples a run (0 more in the smaller)
before any bound exists" although 150 were run (their dependence left fewer than 36 independent)."""

from __future__ import annotations

import dataclasses

import numpy as np
import queues

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Thresholds
from pytest_perfgate.config.units import parse_quantity


def test_a_dependent_comparison_counts_the_requests_it_needs(th: Thresholds) -> None:
    g = th.gate("p99_reduction")
    gate = dataclasses.replace(g, statistic=dataclasses.replace(g.statistic, text="p90", q=0.9), compare="ratio",
                               threshold=parse_quantity("1.5"), direction="max")
    v, sent = queues.ar1_lognormal(np.random.default_rng(4), 2, 150, 0.97)
    a, b = (make_samples(v[i], "s", sent=sent[i]) for i in range(2))
    verdict = evaluate(gate, (a, b), thresholds=th)
    assert verdict.outcome == "inconclusive" and verdict.needed is not None and verdict.needed > 150
    worth = verdict.details["independent"]
    assert (f"need >= {verdict.needed:,} requests a run ({verdict.needed - 150:,} more in the smaller) before any bound "
            f"exists: at their dependence the 150 requests count as about {worth:.3g} of the 36") in verdict.summary()
    assert "the 36 independent samples a run's bound needs take" in verdict.note


def test_a_dependent_projection_states_no_chance_and_calls_its_count_a_floor(th: Thresholds) -> None:
    """Fresh runs of the projected size decided 5-88% of the time on M/M/1 0.5-0.7 where the verdict
    said 91-100% (a short run's own D is too low to project from): the chance is no longer stated."""
    v, sent = queues.mm1(np.random.default_rng(4), 1, 1000, 0.5)
    gate = dataclasses.replace(th.gate("ttft_p99"), threshold=parse_quantity(f"{1.5 * queues.mm1_quantile(0.99, 0.5)!r} s"))
    verdict = evaluate(gate, make_samples(v[0], "s", sent=sent[0]))
    assert verdict.outcome == "inconclusive" and verdict.needed
    assert "that many decide" not in verdict.summary() and "needed_chance" not in verdict.details
    assert "treat it as a floor" in verdict.note and "plan for ~" in verdict.note
