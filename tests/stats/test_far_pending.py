"""An inconclusive verdict on a drifting run whose limit is >= 2x every value names the run the far
rule needs (``blocked.far_pending``), not only the bulk's count (issue 39: `transformers serve`'s
TTFT P95 217 ms against the scaffold's 1.5 s, its largest 0.60 s, said "plan for ~713,809
requests"; the far rule decides it in a run of ~14,500 at that run's memory, if none comes near).
Since the drift is read as a local level (:mod:`pytest_perfgate.verdicts.shifts`) that run passes from
1,600 requests on; its first 1,000, too short for that, are the case here."""

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
    """The recorded run's first 1,000 requests (the largest 0.397 s)."""
    return np.load(RUNS / "transformers-serve-ttft.npz")["ttft_us"][:1000] / 1e6


def test_the_recorded_drifting_run_names_the_run_the_far_rule_needs(th: Thresholds) -> None:
    """The recorded run's first 1,000 requests at the sequential plan's first look (0.95): INCONCLUSIVE,
    and the note says how long a run the far rule needs at this memory, which is the rule's own length."""
    x = _ttft()
    sent = np.arange(float(x.size))
    verdict = evaluate(_p95(th, 1.5, 0.95), make_samples(x, "s", sent=sent))
    assert verdict.outcome == "inconclusive", verdict.note
    print(f"NOTE {verdict.note}")
    assert f"x the largest value: a run >= {blocked.far_length(1.5 / float(x.max())):.3g}x its memory long" in verdict.note
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
    assert blocked.far_pending(x, 0.75, "max", dep) is None  # 1.9x the largest value
    assert blocked.far_pending(x, 1.5, "min", dep) is None
    assert blocked.far_pending(x, 1.5, "max", dataclasses.replace(dep, far_span=1e6)) is None
    near = evaluate(_p95(th, 0.75, 0.95), make_samples(x, "s", sent=np.arange(float(x.size))))
    assert "far_needed" not in near.details and "its memory long (~" not in near.note
