"""An inconclusive verdict on a drifting run whose limit is >= 2x every value names the run the far
rule needs (``blocked.far_pending``), not only the bulk's count (issue 39: `transformers serve`'s
TTFT P95 217 ms against the scaffold's 1.5 s, its largest 0.60 s, said "plan for ~713,809
requests"; the far rule decides it in a run of ~14,500 at that run's memory, if none comes near)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Gate, Thresholds
from pytest_perfgate.config.units import parse_quantity
from pytest_perfgate.verdicts import blocked
from pytest_perfgate.verdicts import dependence as dp

RUNS = Path(__file__).parents[1] / "fixtures" / "runs"


def _p95(th: Thresholds, limit_s: float, confidence: float) -> Gate:
    g = th.gate("ttft_p99")
    st = dataclasses.replace(g.statistic, text="p95", q=0.95)
    return dataclasses.replace(g, statistic=st, threshold=parse_quantity(f"{limit_s!r} s"), confidence=confidence)


def _ttft() -> np.ndarray:
    return np.load(RUNS / "transformers-serve-ttft.npz")["ttft_us"] / 1e6


def test_the_recorded_drifting_run_names_the_run_the_far_rule_needs(th: Thresholds) -> None:
    """The recorded run at the sequential plan's last look (0.99375): INCONCLUSIVE, and the note says
    how long a run the far rule needs at this memory, which is the rule's own length."""
    x = _ttft()
    sent = np.arange(float(x.size))
    verdict = evaluate(_p95(th, 1.5, 0.99375), make_samples(x, "s", sent=sent))
    assert verdict.outcome == "inconclusive", verdict.note
    print(f"NOTE {verdict.note}")
    assert "x the largest value: a run >= 44.7x its memory long" in verdict.note
    need = verdict.details["far_needed"]
    assert x.size < need < verdict.details["needed_likely"]
    dep = blocked.for_quantile(x, 0.95, dp.estimate(x, send_times=sent))
    ratio = 1.5 / float(x.max())
    assert need == math.ceil(blocked.far_length(ratio) * x.size / dep.far_span)
    longer = dataclasses.replace(dep, far_span=need * dep.far_span / x.size)  # the named run, same memory
    assert blocked.far_limit(x, 1.5, "max", longer) and not blocked.far_limit(x, 1.5, "max", dep)


def test_no_far_note_where_the_rule_cannot_apply(th: Thresholds) -> None:
    """A limit under 2x the largest value, a min gate, or a run already long enough: no note."""
    x = _ttft()
    dep = blocked.for_quantile(x, 0.95, dp.estimate(x, send_times=np.arange(float(x.size))))
    assert blocked.far_pending(x, 1.1, "max", dep) is None  # 1.8x the largest value
    assert blocked.far_pending(x, 1.5, "min", dep) is None
    assert blocked.far_pending(x, 1.5, "max", dataclasses.replace(dep, far_span=1e6)) is None
    near = evaluate(_p95(th, 1.1, 0.99375), make_samples(x, "s", sent=np.arange(float(x.size))))
    assert "far_needed" not in near.details and "its memory long (~" not in near.note
