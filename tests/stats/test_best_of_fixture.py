"""``Perfgate.best_of`` (the fixture's best of K, used by the draft switch and memory's allocator
settings) picks and decides exactly like ``verdicts.verdict.best_of``, whose false-pass rate at the
boundary is simulated in test_draft_selection.py, and records the verdict at 1 - (1 - c) / K."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_perfgate import Perfgate, Proportion, Verdict, load_thresholds
from pytest_perfgate.session.perfgate import RunState
from pytest_perfgate.verdicts.verdict import best_of

ROOT = Path(__file__).resolve().parents[2]


def _fixture(tmp_path: Path, confidence: float | None = None) -> tuple[Perfgate, list[Verdict]]:
    th = load_thresholds(ROOT / "thresholds.toml")
    recorded: list[Verdict] = []

    def record(v: Verdict, engines: list[Mapping[str, Any]], extras: Mapping[str, Any]) -> None:
        recorded.append(v)

    return Perfgate(RunState(th, tmp_path, "run", None), (), record, confidence), recorded


def test_the_same_pick_and_verdict_as_the_plain_best_of(tmp_path: Path) -> None:
    rng = np.random.default_rng(31)
    for trial in range(300):
        k = int(rng.integers(2, 5))
        cands = {f"draft{i}": Proportion(int(rng.binomial(400, p)), 400, f"draft{i}")
                 for i, p in enumerate(rng.uniform(0.6, 0.8, k))}
        c = float(rng.choice([0.9, 0.95]))
        pg, recorded = _fixture(tmp_path, c)
        pick, v = pg.best_of(cands, "draft_acceptance", check=False)
        ref_pick, ref = best_of(cands, pg.gate("draft_acceptance"), thresholds=pg.thresholds, confidence=c)
        if len({x.successes for x in cands.values()}) == k:  # no tie on the point estimate
            assert pick == ref_pick, trial
        assert (v.outcome, v.lower, v.upper, v.confidence) == (ref.outcome, ref.lower, ref.upper, ref.confidence)
        assert recorded == [v] and v.confidence == 1 - (1 - c) / k
        assert f"best of {k} candidates ({pick})" in v.note


def test_note_and_label_reach_the_recorded_verdict(tmp_path: Path) -> None:
    """``note=`` (a line, or a function of the verdict: e.g. the single-node fallback's halving cost
    from the measured throughput) and ``label=`` (which of several verdicts of one gate)."""
    pg, recorded = _fixture(tmp_path)
    s = pg.samples(np.linspace(1e-4, 2e-4, 300), "s")
    v = pg.evaluate(s, "allreduce_p99", note="gloo sizes, world 2", label="4 KiB")
    assert v.note.endswith("4 KiB: gloo sizes, world 2") and recorded == [v]
    w = pg.evaluate(s, "allreduce_p99", note=lambda x: f"p99 {x.observed * 1e6:.0f} us measured")
    assert w.note.endswith(f"p99 {w.observed * 1e6:.0f} us measured")
