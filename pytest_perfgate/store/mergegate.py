"""A merge gate against a branch: this run compared with the branch's recent runs, run effects
included (``--perfgate-baseline main`` naming a branch, or a gate's ``regression = { vs = "main",
tolerance = "5%" }``).

The baseline is every stored run of the gate at the branch's last :data:`~.trend.WINDOW` first-parent
commits (store/trend.py); the test is :func:`~..verdicts.runeffects.regression_test`: the current run
against the baseline runs' mean, with the between-run spread estimated from them (fewer than 3 runs:
the verdict says the spread is unknown and what would decide). The comparison names the branch's
commit range, its runs and the between-run CV it used.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..verdicts.runeffects import RunEstimate, regression_test
from .baseline import BaselineRef, Comparison, smaller_is_better
from .trend import WINDOW, branch_baseline, branch_commits, series

if TYPE_CHECKING:
    from ..config import Gate, Thresholds


def _repeats(ref: BaselineRef, gate: str, exclude_run: str | None, baseline_commits: set[str]) -> list[RunEstimate]:
    """Earlier stored runs of ``gate`` at the checked-out commit (the suite run again on the same
    code: each adds a current run, so the current side's run effect shrinks as tau^2 / m); none when
    that commit is one of the baseline's (a run on the branch itself)."""
    head = branch_commits("HEAD", ref.cwd or Path.cwd(), limit=1)
    if not head or head[0] in baseline_commits:
        return []
    s = series(ref.db, gate, "HEAD", head)
    return [e for p in s.points if p.run_id != exclude_run for e in [p.estimate()] if e is not None]


def compare_branch(gate: Gate, current: Any, ref: BaselineRef, *, confidence: float,
                   thresholds: Thresholds | None = None, exclude_run: str | None = None,
                   tolerance: float | None = None, window: int = WINDOW) -> Comparison | None:
    """Compare the current run's data for ``gate`` with the recent runs of ``ref.branch`` (None when
    the run has no positive value or the branch has no stored run of the gate)."""
    from ..verdicts.verdict import evaluate

    if ref.branch is None:
        return None
    vc = evaluate(gate, current, confidence=confidence, thresholds=thresholds)
    if vc.outcome == "error":
        return None
    cur = RunEstimate.from_bounds(vc.observed, vc.lower, vc.upper, confidence, exclude_run or "current")
    base = branch_baseline(ref.db, gate.name, ref.branch, ref.cwd or Path.cwd(), window=window,
                           exclude_run=exclude_run)
    if cur is None or base is None:
        return None
    current_runs = [cur, *_repeats(ref, gate.name, exclude_run, {r.commit for r in base.runs})]
    tol = gate.regression if tolerance is None else tolerance
    sib = smaller_is_better(gate)
    res = regression_test(current_runs, base.runs, tolerance=tol or 0.0, confidence=confidence, smaller_is_better=sib)
    bound = 1 + (res.lower if sib else res.upper)
    commits = f"{base.first}..{base.last}"
    text = (f"vs {ref.branch} (commits {base.first[:12]}..{base.last[:12]}, {len(base.runs)} runs): "
            f"{vc.metric} {vc.statistic} {vc.fmt(vc.observed)} vs {vc.fmt(math.exp(res.baseline.mean))}; {res.text}")
    cv = res.baseline.cv if math.isfinite(res.baseline.tau) else None
    return Comparison(gate.name, commits, base.label, vc.observed, math.exp(res.baseline.mean), res.change,
                      bound if math.isfinite(bound) else math.nan, sib, confidence, tol, res.regressed, text,
                      res.inconclusive, baseline_commits=commits, baseline_runs=len(base.runs), between_run_cv=cv)
