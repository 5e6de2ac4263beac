"""Comparison with a baseline run (``--perfgate-baseline REF``, ``perfgate diff A B``).

The test reuses each gate's own bounds. Both runs are evaluated at confidence
``c' = 1 - (1 - c) / 2`` (Bonferroni over the two runs) with the gate's method (exact
order-statistic bounds for percentiles, Clopper-Pearson for rates, t for means, per-run bounds
combined for comparisons). For a smaller-is-better gate the ratio current / baseline is then at least
``lower(current) / upper(baseline)`` with confidence ``c``: when that bound exceeds ``1 + regression``
the run has regressed by more than the tolerance (the minimum effect size). Bigger-is-better gates
mirror it (``upper(current) / lower(baseline) < 1 - regression``). Because both one-sided bounds are
exact, a run whose true statistic is exactly at the tolerance is flagged with probability at most
``1 - c``, whatever the distribution (tests/store/test_baseline.py simulates it).

Quantile gates (pNN) decide by the studentized permutation test of the quantile itself against
``(1 +/- regression) x`` the baseline (:mod:`pytest_perfgate.verdicts.regression`: each run's own
standard error, widened by its own dependence, so neither a change of shape nor a queue's memory
makes it over-claim), which sees +40% on a P99 at 500 requests a run
(87% at a 5% tolerance) where the per-run bounds above need >= 368 samples a run before any bound
exists; the bound is still reported, or what it needs when it does not exist. What the two runs'
own bounds show (each at ``c'``, widened by the permutation test's dependence) stands beside it: two
runs apart defeat the permutations (docs/statistics.md, "Runs apart").
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import backend, history

if TYPE_CHECKING:
    from ..config import Gate, Thresholds
    from ..verdicts.regression import QuantileShift
    from ..verdicts.verdict import Verdict

SMALLER_IS_BETTER_DIMENSIONS = ("time", "bytes")
SMALLER_IS_BETTER_METRICS = ("error_rate", "fragmentation", "quality_loss", "queue_time", "kv_cache_usage")


def smaller_is_better(gate: Gate) -> bool:
    """Max gates, and recorded gates of latency-like metrics."""
    if gate.direction is not None:
        return gate.direction == "max"
    from ..config.metrics import lookup

    m = lookup(gate.metric)
    return gate.metric in SMALLER_IS_BETTER_METRICS or (m is not None and m.dimension in SMALLER_IS_BETTER_DIMENSIONS)


@dataclass(frozen=True)
class BaselineRef:
    """Where baseline verdicts come from: a history (file or URL), optionally one run or one git commit.
    ``results``: where its data files are read, for a shared history (fetched there from the history
    when missing: :func:`history.materialize`); else the history file's folder."""

    db: history.Location
    label: str
    run_id: str | None = None
    commit: str | None = None
    branch: str | None = None  # a git branch: its recent runs with run effects (store/mergegate.py)
    cwd: Path | None = None  # the repository the branch is read in
    results: Path | None = None

    @property
    def results_dir(self) -> Path:
        return self.results if self.results is not None else Path(self.db).parent


def _git_commit(ref: str, cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", ref + "^{commit}"], cwd=cwd,
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None


def _is_branch(ref: str, cwd: Path) -> bool:
    from .trend import is_branch

    return is_branch(ref, cwd)


def resolve(ref: str, results_dir: Path, cwd: Path, history_at: history.Location | None = None) -> BaselineRef:
    """``REF``: a results directory or history file, ``latest``, a run id (or unique prefix) in this
    results directory's history (or in ``history_at``, the session's shared history), a git branch
    (its recent runs: :mod:`.mergegate`), or another git ref
    (the latest run recorded at that commit)."""
    ref = ref.strip()
    if not ref:
        raise history.HistoryError("--perfgate-baseline: empty reference")
    given = Path(ref) if Path(ref).is_absolute() else Path(cwd) / ref
    if ref != "latest" and given.exists():
        file = history.path_of(given)
        if not file.exists():
            raise history.HistoryError(f"--perfgate-baseline {ref}: {file} does not exist (not a perfgate results directory)")
        return BaselineRef(file, f"{ref} (latest run there)")
    local = history.path_of(results_dir)
    shared = history_at is not None and history_at != local
    db: history.Location = history_at if shared and history_at is not None else local
    at, results = backend.label(db), (Path(results_dir) if shared else None)
    if shared and backend.is_url(db):
        _reachable(db)  # a baseline from a history that cannot be opened: said before anything is measured
    if ref == "latest":
        if not history.exists(db):
            raise history.HistoryError(f"--perfgate-baseline latest: no run history yet in {at}")
        return BaselineRef(db, "latest run", results=results)
    if history.exists(db):
        try:
            r = history.run(db, ref)
            return BaselineRef(db, f"run {r.run_id}", run_id=r.run_id, results=results)
        except history.HistoryError:
            pass
    sha = _git_commit(ref, cwd)
    if sha is None and "/" not in ref and _is_branch(ref, cwd):  # a CI checkout: main only as origin/main
        sha = _git_commit(f"origin/{ref}", cwd)
    if sha is not None:
        if not history.exists(db):
            raise history.HistoryError(f"--perfgate-baseline {ref}: commit {sha[:12]} but no run history in {at}")
        if _is_branch(ref, cwd):  # main: its recent runs, not one (a merge gate with run effects)
            return BaselineRef(db, f"branch {ref}", commit=sha, branch=ref, cwd=Path(cwd), results=results)
        return BaselineRef(db, f"git {ref} ({sha[:12]})", commit=sha, results=results)
    raise history.HistoryError(
        f"--perfgate-baseline {ref}: not a results directory or history file, not 'latest', "
        f"not a run id in {at}, and not a git ref")


def _reachable(db: history.Location) -> None:
    """A history that cannot be opened is that error, not "no such run"."""
    backend.open_history(db, create=False).close()


def find(ref: BaselineRef, gate: str, exclude_run: str | None = None, *, errors: bool = False) -> dict[str, Any] | None:
    """The latest stored verdict row of ``gate`` under ``ref`` that has data (not an error or invalid, unless
    ``errors``: ``perfgate evaluate`` reaches the data of an errored gate too)."""
    if not history.exists(ref.db):
        return None
    rows = history.verdicts(ref.db, run_id=ref.run_id, gate=gate, commit=ref.commit)
    for row in reversed(rows):
        if row["run_id"] != exclude_run and row["samples"] and (errors or row["outcome"] not in ("error", "invalid")):
            return dict(row)
    return None


@dataclass(frozen=True)
class Comparison:
    gate: str
    baseline_run: str
    baseline_label: str
    observed: float
    baseline_observed: float
    change: float  # observed / baseline_observed - 1
    bound: float  # confidence bound of the ratio current/baseline (lower for smaller-is-better)
    smaller_is_better: bool
    confidence: float
    tolerance: float | None
    regressed: bool  # beyond the tolerance (or beyond 0 when no tolerance), at the confidence
    text: str
    inconclusive: bool = False  # worse, and the bounds can neither show nor rule out a regression
    # a branch baseline (store/mergegate.py): its commit range, runs, and the between-run spread used
    baseline_commits: str = ""
    baseline_runs: int = 0
    between_run_cv: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.__dict__.items()}


def compare(gate: Gate, current: Any, baseline: Any, *, confidence: float, thresholds: Thresholds | None = None,
            tolerance: float | None = None, baseline_run: str = "", baseline_label: str = "",
            permutations: int | None = None) -> Comparison | None:
    """Compare the data of two runs for ``gate`` (None when either is an error or has no positive value).
    ``permutations``: of a quantile gate's permutation test (default: the gate's 1,999; the seeded
    simulations use fewer)."""
    from ..verdicts.verdict import evaluate

    c2 = 1 - (1 - confidence) / 2
    vc = evaluate(gate, current, confidence=c2, thresholds=thresholds)
    vb = evaluate(gate, baseline, confidence=c2, thresholds=thresholds)
    if "error" in (vc.outcome, vb.outcome):
        return None
    tol = gate.regression if tolerance is None else tolerance
    sib = smaller_is_better(gate)
    if not (vb.observed > 0 and math.isfinite(vb.observed) and math.isfinite(vc.observed)):
        return None
    change = vc.observed / vb.observed - 1
    bound, other = _ratio_bounds(vc, vb, sib)  # the bound that shows a regression, the one that rules it out
    limit = 1 + (tol or 0.0) if sib else 1 - (tol or 0.0)
    regressed = bound > limit if sib else bound < limit
    ruled_out = other <= limit if sib else other >= limit
    worse = change > 0 if sib else change < 0
    pct = f"{abs(change) * 100:.1f}% {'worse' if worse else 'better'}" if abs(change) >= 5e-4 else "unchanged"
    what = f"{vc.metric} {vc.statistic}"
    rel = ">=" if sib else "<="
    bound_txt = (f"ratio {rel} {bound:.3f} at {confidence:.0%}" if math.isfinite(bound)
                 else _no_bound(gate, c2))
    shift = _quantile_shift(gate, current, baseline, limit, sib, c2, permutations)
    if shift is not None:  # the quantile itself, by permutation: power where the per-run bounds have none
        # what the per-run bounds (each at its own dependence) show stands too: a permutation of two runs
        # apart (every current value beyond every baseline one) often re-creates the split, so its p stayed
        # near 0.07 however far (a p50 25x slower at n = 100 passed on CI); the union's size: docs/statistics.md
        test = shift.test
        regressed = shift.shown or test.p_worse <= 1 - confidence
        ruled_out = shift.ruled_out or test.p_within <= 1 - confidence
        bound_txt = (f"{bound_txt}; studentized permutation test of the {vc.statistic} against {limit:.3g} x baseline "
                     f"({test.permutations} permutations): p = {test.p_worse:.3g} for worse, "
                     f"{test.p_within:.3g} for not worse")
        if shift.shown and test.p_worse > 1 - confidence:
            bound_txt += "; the runs' own bounds at their dependence show it"
    inconclusive = not regressed and not ruled_out and (worse or tol is not None)
    if regressed:
        verdict = (f"REGRESSED beyond the {tol:.0%} regression tolerance" if tol is not None
                   else "worse than the baseline (no regression tolerance set)")
    elif inconclusive:  # worse by the point estimates, but the bounds cannot tell at this n
        beyond = f"beyond the {tol:.0%} regression tolerance" if tol is not None else ""
        other_txt = f"ratio {'<=' if sib else '>='} {other:.3g}" if math.isfinite(other) else "no ratio bound"
        verdict = (f"inconclusive: a regression {beyond} can neither be shown nor ruled out at this n "
                   f"({other_txt}); more samples may decide").replace("  ", " ")
    elif tol is not None:
        verdict = f"within the {tol:.0%} regression tolerance"
    else:
        verdict = "no regression shown"
    text = (f"vs baseline {baseline_label or baseline_run}: {what} {vc.fmt(vc.observed)} vs {vb.fmt(vb.observed)} "
            f"({pct}; {bound_txt}): {verdict}")
    return Comparison(gate.name, baseline_run, baseline_label, vc.observed, vb.observed, change, bound, sib,
                      confidence, tol, regressed, text, inconclusive)


@dataclass(frozen=True)
class _Shift:
    """A quantile gate's comparison: the permutation test, and what the two runs' own bounds (at
    ``1 - (1 - c) / 2`` each, each widened by its own dependence, the permutation test's taus) show."""

    test: QuantileShift
    shown: bool  # the bounds' ratio beyond the factor: worse beyond the tolerance
    ruled_out: bool  # the bounds' other ratio within it


def _quantile_shift(gate: Gate, current: Any, baseline: Any, factor: float, sib: bool, c2: float,
                    permutations: int | None = None) -> _Shift | None:
    """The permutation test of a quantile gate's statistic (verdicts/regression.py) and the runs'
    own bounds, None for other gates or data (proportions, ratios of sums, comparisons, fewer than
    2 samples a run)."""
    from ..verdicts.blocked import for_quantile, quantile_bounds
    from ..verdicts.dependence import estimate
    from ..verdicts.regression import PERMUTATIONS, quantile_shift_test
    from ..verdicts.samples import Samples, as_data

    st = gate.statistic
    if gate.compare or st.kind != "quantile" or st.q is None:
        return None
    cur, ref = as_data(current, gate.metric), as_data(baseline, gate.metric)
    if not (isinstance(cur, Samples) and isinstance(ref, Samples)) or cur.denominators is not None \
            or ref.denominators is not None or cur.n < 2 or ref.n < 2:
        return None
    # plain samples (no send times) are taken in list order, usually the arrival order (issue 39: AR(1)
    # phi 0.9 as plain lists raised a false alarm in 25% of runs when they were taken as independent)
    xs = (cur.ordered(), ref.ordered())
    deps = [for_quantile(x, st.q, d.dependence() if d.sent is not None else estimate(x), d.label != "itl")
            for x, d in zip(xs, (cur, ref), strict=True)]
    test = quantile_shift_test(xs[0], xs[1], st.q, factor, larger_is_worse=sib,
                               taus=(deps[0].per_independent, deps[1].per_independent),
                               permutations=PERMUTATIONS if permutations is None else permutations)
    bc, bb = (quantile_bounds(x, st.q, c2, dep) for x, dep in zip(xs, deps, strict=True))
    shown = bc.lower > factor * bb.upper if sib else bc.upper < factor * bb.lower
    ruled_out = bc.upper <= factor * bb.lower if sib else bc.lower >= factor * bb.upper
    return _Shift(test, bool(shown), bool(ruled_out))


def _no_bound(gate: Gate, c2: float) -> str:
    """What an absent ratio bound needs, in words (a quantile: the samples a run needs)."""
    from ..verdicts.regression import bound_size

    st = gate.statistic
    if st.kind == "quantile" and st.q is not None:
        return (f"no ratio bound from the runs' own bounds: each run needs >= {bound_size(st.q, c2)} samples "
                f"for its {st.text} bounds at {c2:.4g}")
    return "no ratio bound: too few samples in a run for its own bound"


def _ratio_bounds(vc: Verdict, vb: Verdict, smaller_is_better: bool) -> tuple[float, float]:
    """Bounds of current/baseline: (the one beyond which a regression is shown, the one within which
    it is ruled out); infinite where a bound is missing (too few samples)."""
    def ratio(num: float, den: float, missing: float) -> float:
        return num / den if den > 0 and math.isfinite(den) and math.isfinite(num) else missing

    if smaller_is_better:
        return ratio(vc.lower, vb.upper, -math.inf), ratio(vc.upper, vb.lower, math.inf)
    return ratio(vc.upper, vb.lower, math.inf), ratio(vc.lower, vb.upper, -math.inf)


def apply(v: Verdict, cmp: Comparison, gate: Gate) -> Verdict:
    """The verdict with the comparison in its note and details; failed when the gate has a
    ``regression`` tolerance and the run regressed beyond it (even if the absolute target is met)."""
    from dataclasses import replace

    details = dict(v.details)
    details.update({"baseline_run_observed": cmp.baseline_observed, "baseline_change": cmp.change,
                    "baseline_ratio_bound": cmp.bound if math.isfinite(cmp.bound) else float("nan"),
                    "baseline_regressed": 1.0 if cmp.regressed else 0.0})
    if cmp.tolerance is not None:
        details["baseline_tolerance"] = cmp.tolerance
    details = {k: x for k, x in details.items() if math.isfinite(x)}
    note = (v.note + "; " if v.note else "") + cmp.text
    outcome = v.outcome
    if cmp.regressed and gate.regression is not None and outcome in ("pass", "recorded", "inconclusive"):
        if outcome == "pass":
            details["target_met"] = 1.0
        outcome = "fail"
    return replace(v, outcome=outcome, note=note, details=details)


def load_baseline(ref: BaselineRef, gate: str, exclude_run: str | None = None) -> tuple[dict[str, Any], Any] | None:
    """(row, stored data) of the baseline verdict of ``gate``, or None when there is none."""
    from .records import load

    row = find(ref, gate, exclude_run)
    if row is None:
        return None
    path = ref.results_dir / row["samples"]
    if ref.results is not None and not path.exists():  # a shared history keeps the data files: fetched here
        history.materialize(ref.db, row["run_id"], ref.results_dir)
    return row, load(path)


def compare_stored(gate: Gate, current: Any, ref: BaselineRef, *, confidence: float,
                   thresholds: Thresholds | None = None, exclude_run: str | None = None,
                   tolerance: float | None = None) -> Comparison | None:
    got = load_baseline(ref, gate.name, exclude_run)
    if got is None:
        return None
    row, stored = got
    return compare(gate, current, stored.data, confidence=confidence, thresholds=thresholds, tolerance=tolerance,
                   baseline_run=row["run_id"], baseline_label=f"{ref.label}, run {row['run_id']}"
                   if ref.run_id is None else ref.label)


