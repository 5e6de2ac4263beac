"""A gate's history over commits on a branch: its runs in commit order, their change points, and
the recent runs of a branch as the baseline of a merge gate (run effects included).

Reads the history only through :mod:`.history`'s public functions (``verdicts``). Commit order
comes from git (``git rev-list --first-parent`` of the branch, in the repository the command runs
in); without git, or for runs whose commit is on no branch asked for, the runs' start times order
them (``branch = "all runs"``).
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verdicts.changepoints import ALPHA, Change, detect
from ..verdicts.runeffects import RunEstimate
from . import history

ALL_RUNS = "all runs"
WINDOW = 20  # a branch baseline: runs at its last WINDOW commits
USABLE = ("pass", "fail", "inconclusive", "recorded")


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def branch_commits(branch: str, cwd: Path, limit: int | None = None) -> list[str] | None:
    """Full SHAs of the branch's first-parent history, oldest first (None: not a git ref here)."""
    args = ["rev-list", "--first-parent"] + ([f"--max-count={int(limit)}"] if limit else []) + [branch, "--"]
    out = _git(args, cwd)
    if out is None and "/" not in branch:  # a CI checkout has main only as origin/main
        out = _git([*args[:-2], f"origin/{branch}", "--"], cwd)
    if out is None:
        return None
    return list(reversed(out.split()))


def is_branch(ref: str, cwd: Path) -> bool:
    """A local branch, or a remote-tracking one (origin/main, or main fetched only as origin/main)."""
    for full in (f"refs/heads/{ref}", f"refs/remotes/{ref}", f"refs/remotes/origin/{ref}"):
        if _git(["show-ref", "--verify", "--quiet", full], cwd) is not None:
            return True
    return False


def default_branches(cwd: Path) -> list[str]:
    """The current branch, then main / master when they exist (empty without git)."""
    out: list[str] = []
    head = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
    if head and head.strip() not in ("", "HEAD"):
        out.append(head.strip())
    for b in ("main", "master"):
        if b not in out and is_branch(b, cwd):
            out.append(b)
    return out


@dataclass(frozen=True)
class Point:
    run_id: str
    commit: str
    started: str
    outcome: str
    observed: float
    lower: float | None
    upper: float | None
    confidence: float
    threshold: float | None

    def estimate(self) -> RunEstimate | None:
        return RunEstimate.from_bounds(self.observed, self.lower, self.upper, self.confidence, self.run_id,
                                       self.commit or self.run_id)


@dataclass(frozen=True)
class Series:
    gate: str
    branch: str
    points: tuple[Point, ...]
    unit: str = ""
    direction: str | None = None
    metric: str = ""
    statistic: str = ""
    changes: tuple[Change, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "branch": self.branch, "unit": self.unit, "direction": self.direction,
                "metric": self.metric, "statistic": self.statistic,
                "points": [dict(p.__dict__) for p in self.points],
                "changes": [c.to_dict() for c in self.changes]}


def _real(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _point(row: Mapping[str, Any]) -> Point | None:
    obs = _real(row.get("observed"))
    if row.get("outcome") not in USABLE or obs is None or obs <= 0:
        return None
    return Point(str(row["run_id"]), str(row.get("git_commit") or ""), str(row.get("started") or ""),
                 str(row["outcome"]), obs, _real(row.get("lower")), _real(row.get("upper")),
                 _real(row.get("confidence")) or 0.95, _real(row.get("threshold")))


def gates(db: history.Location) -> list[str]:
    return sorted({str(r["gate"]) for r in history.verdicts(db)})


def series(db: history.Location, gate: str, branch: str = ALL_RUNS, commits: Sequence[str] | None = None) -> Series:
    """The gate's runs on ``branch`` (``commits``: its first-parent SHAs, oldest first; None: every
    run, by start time), the last verdict of each run, in commit order then start time."""
    rows = history.verdicts(db, gate=gate)
    last: dict[str, Mapping[str, Any]] = {}
    for r in rows:  # oldest first: a run's last verdict of the gate wins
        last[str(r["run_id"])] = r
    pts = [p for p in (_point(r) for r in last.values()) if p is not None]
    if commits is not None:
        order = {c: i for i, c in enumerate(commits)}
        pts = sorted((p for p in pts if p.commit in order), key=lambda p: (order[p.commit], p.started))
    else:
        pts.sort(key=lambda p: p.started)
    row = rows[-1] if rows else {}  # a history row (its metric columns)
    return Series(gate, branch, tuple(pts), str(row.get("unit") or ""), row.get("direction"),
                  str(row.get("metric") or ""), str(row.get("statistic") or ""))


def with_changes(s: Series, *, alpha: float = ALPHA, seed: int = 0) -> Series:
    """The series with its change points (:func:`~..verdicts.changepoints.detect`; runs without a
    commit count as a commit each)."""
    est = [e for e in (p.estimate() for p in s.points) if e is not None]
    return Series(s.gate, s.branch, s.points, s.unit, s.direction, s.metric, s.statistic,
                  tuple(detect(est, alpha=alpha, seed=seed)))


def branch_series(db: history.Location, gate: str, branches: Sequence[str], cwd: Path, *, alpha: float = ALPHA) -> list[Series]:
    """One series with change points per branch git knows here; every run by start time without git."""
    out = []
    for b in branches:
        commits = branch_commits(b, cwd)
        if commits is None:
            continue
        s = series(db, gate, b, commits)
        if s.points:
            out.append(with_changes(s, alpha=alpha))
    if not out:
        s = series(db, gate)
        if s.points:
            out.append(with_changes(s, alpha=alpha))
    return out


@dataclass(frozen=True)
class BranchBaseline:
    """A branch's recent runs of a gate: the baseline of a merge gate."""

    branch: str
    runs: tuple[RunEstimate, ...]
    first: str  # oldest commit with a run in the window
    last: str  # newest

    @property
    def label(self) -> str:
        return f"{self.branch} {self.first[:12]}..{self.last[:12]}"


def branch_baseline(db: history.Location, gate: str, branch: str, cwd: Path, *, window: int = WINDOW,
                    exclude_run: str | None = None) -> BranchBaseline | None:
    """Runs of ``gate`` at the last ``window`` first-parent commits of ``branch`` (None: not a branch
    here, or no run there)."""
    commits = branch_commits(branch, cwd, limit=window)
    if not commits or not history.exists(db):
        return None
    s = series(db, gate, branch, commits)
    est = [e for p in s.points if p.run_id != exclude_run for e in [p.estimate()] if e is not None]
    if not est:
        return None
    return BranchBaseline(branch, tuple(est), est[0].commit, est[-1].commit)
