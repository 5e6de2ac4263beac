"""A git repository with a run history over its commits (synthetic verdicts, seeded): the fixture of
the trend, change-point, merge-gate and trend-site tests."""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_perfgate.store import history

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True,
                          check=True).stdout.strip()


@dataclass
class TrendRepo:
    repo: Path
    results: Path
    commits: list[str]  # main's, oldest first

    @property
    def db(self) -> Path:
        return self.results / history.FILENAME


def verdict(gate: str, value: float, rel: float = 0.03, threshold: float = 0.2, outcome: str = "pass") -> dict[str, object]:
    z = 1.6448536269514722
    return {"gate": gate, "phase": "p1", "outcome": outcome, "metric": "ttft", "statistic": "p50",
            "observed": value, "lower": value * math.exp(-z * rel), "upper": value * math.exp(z * rel),
            "n": 1000, "unit": "ms", "direction": "max", "threshold": threshold, "confidence": 0.95,
            "method": "exact order statistics"}


def make(tmp: Path, *, n: int = 14, step_at: int = 9, step: float = 0.25, cv: float = 0.03, seed: int = 1,
         runs_per_commit: int = 1) -> TrendRepo:
    """``n`` commits on main; one run per commit of gates ``ttft_p50`` (slower by ``step`` from commit
    ``step_at`` on) and ``flat`` (no change); run effects of CV ``cv``."""
    repo, results = tmp / "repo", tmp / "repo" / "perfgate-results"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    rng = np.random.default_rng(seed)
    commits = []
    for i in range(n):
        (repo / "f.txt").write_text(f"{i}\n")
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", f"c{i}")
        sha = git(repo, "rev-parse", "HEAD")
        commits.append(sha)
        for k in range(runs_per_commit):
            u = rng.normal(0, cv, 2)
            slow = 0.1 * (1 + step if i >= step_at else 1.0) * math.exp(u[0])
            history.record(results / history.FILENAME, run_id=f"2026{i:04d}{k}-run", started=f"2026-01-01T{i:02d}:{k:02d}:00",
                           git_commit=sha, thresholds_file="t.toml", thresholds_sha256="x", engines=[],
                           verdicts=[(0, verdict("ttft_p50", slow)), (1, verdict("flat", 0.05 * math.exp(u[1])))])
    return TrendRepo(repo, results, commits)
