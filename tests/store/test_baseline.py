"""Baseline comparison: the exact ratio bound's false-alarm rate at the tolerance, its power, and how
``--perfgate-baseline REF`` is resolved."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_perfgate.config import Thresholds
from pytest_perfgate.store import baseline, history
from pytest_perfgate.verdicts.samples import Proportion, make_samples

TOL = 0.10
C = 0.95


def _flag_rate(th: Thresholds, factor: float, trials: int, n: int, seed: int) -> float:
    g = th.gate("lat")  # ttft p90, max 150 ms, regression 10%
    rng = np.random.default_rng(seed)
    flagged = 0
    for _ in range(trials):
        base = make_samples(rng.lognormal(np.log(50), 0.4, n), "ms")
        cur = make_samples(rng.lognormal(np.log(50 * factor), 0.4, n), "ms")
        cmp = baseline.compare(g, cur, base, confidence=C, thresholds=th)
        assert cmp is not None
        flagged += cmp.regressed
    return flagged / trials


def test_false_alarm_rate_at_the_tolerance_is_at_most_one_minus_c(th: Thresholds) -> None:
    """Current p90 exactly 10% above the baseline's (the boundary): flagged <= 1-c + 3 SE."""
    trials = 400
    rate = _flag_rate(th, 1 + TOL, trials, 300, seed=11)
    se = math.sqrt((1 - C) * C / trials)
    assert rate <= (1 - C) + 3 * se, rate


def test_power_a_50_percent_regression_is_caught(th: Thresholds) -> None:
    """p90 50% worse, 300 requests per run (lognormal sigma 0.4): caught in >= 90% of runs (measured 99%;
    40% worse: 91%, 30%: 54%; the price of an exact distribution-free bound)."""
    assert _flag_rate(th, 1.5, 100, 300, seed=12) >= 0.9


def test_no_change_is_not_flagged(th: Thresholds) -> None:
    assert _flag_rate(th, 1.0, 100, 300, seed=13) == 0.0


def test_bigger_is_better_rates(th: Thresholds) -> None:
    g = th.gate("acc")  # min 20%, regression 5%
    drop = baseline.compare(g, Proportion(600, 1000), Proportion(750, 1000), confidence=C, thresholds=th)
    assert drop is not None and drop.regressed and not drop.smaller_is_better and drop.bound < 0.95
    same = baseline.compare(g, Proportion(745, 1000), Proportion(750, 1000), confidence=C, thresholds=th)
    assert same is not None and not same.regressed


def test_apply_fails_a_passing_gate_and_shows_both_numbers(th: Thresholds) -> None:
    from pytest_perfgate.verdicts.failures import headline
    from pytest_perfgate.verdicts.verdict import evaluate

    g = th.gate("lat")
    rng = np.random.default_rng(3)
    base = make_samples(rng.lognormal(np.log(50), 0.2, 400), "ms")
    cur = make_samples(rng.lognormal(np.log(80), 0.2, 400), "ms")
    v = evaluate(g, cur, thresholds=th)
    assert v.outcome == "pass"  # well under the 150 ms target
    cmp = baseline.compare(g, cur, base, confidence=C, thresholds=th, baseline_run="r0", baseline_label="run r0")
    assert cmp is not None and cmp.regressed
    out = baseline.apply(v, cmp, g)
    assert out.outcome == "fail"
    s = out.summary()
    assert "< max 150 ms" in s and "REGRESSED beyond the 10% regression tolerance" in s and "vs baseline run r0" in s
    assert "< max 150 ms" in headline(out) and "vs baseline (regression tolerance 10%)" in headline(out)
    # without a tolerance the comparison is reported, the gate is not failed
    g0 = th.gate("ttft")
    relaxed = baseline.apply(v, cmp, type(g0)(**{**g0.__dict__, "regression": None}))
    assert relaxed.outcome == "pass"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_refs_resolve(tmp_path: Path) -> None:
    out = tmp_path / "results"
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "one")
    sha = _git(tmp_path, "rev-parse", "HEAD")
    db = history.path_of(out)
    for rid, commit in (("20260101T000000Z-aaaaaa", sha), ("20260102T000000Z-bbbbbb", "other")):
        history.record(db, run_id=rid, started=rid, git_commit=commit, thresholds_file=None, thresholds_sha256=None,
                       engines=[], verdicts=[(0, {"gate": "lat", "phase": "p1", "outcome": "pass",
                                                  "samples": f"samples/{rid}/0000-lat.jsonl.gz"})])
    assert baseline.resolve("latest", out, tmp_path).run_id is None
    r = baseline.resolve("20260101T", out, tmp_path)
    assert r.run_id == "20260101T000000Z-aaaaaa"
    g = baseline.resolve("HEAD", out, tmp_path)
    assert g.commit == sha and baseline.find(g, "lat")["run_id"] == "20260101T000000Z-aaaaaa"  # type: ignore[index]
    assert baseline.find(baseline.resolve("latest", out, tmp_path), "lat")["run_id"] == "20260102T000000Z-bbbbbb"  # type: ignore[index]
    assert baseline.find(baseline.resolve("latest", out, tmp_path), "lat", exclude_run="20260102T000000Z-bbbbbb")[
        "run_id"] == "20260101T000000Z-aaaaaa"  # type: ignore[index]
    assert baseline.resolve(str(out), tmp_path / "elsewhere", tmp_path).db == db  # a results directory
    with pytest.raises(history.HistoryError, match="not a git ref"):
        baseline.resolve("no-such-thing", out, tmp_path)
    with pytest.raises(history.HistoryError, match="no run history yet"):
        baseline.resolve("latest", tmp_path / "empty", tmp_path)
