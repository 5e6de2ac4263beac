"""store/trend.py: a gate's runs over a branch's commits, their change points, a branch baseline."""

from __future__ import annotations

from pathlib import Path

from trendrepo import git, make

from pytest_perfgate.store import trend


def test_series_in_commit_order_with_the_change_named(tmp_path: Path) -> None:
    r = make(tmp_path)
    (s,) = trend.branch_series(r.db, "ttft_p50", ["main"], r.repo)
    assert [p.commit for p in s.points] == r.commits and s.branch == "main"
    (c,) = s.changes
    assert (c.before, c.after) == (r.commits[8], r.commits[9])
    assert c.lower < 0.25 < c.upper and c.confidence > 0.99
    (flat,) = trend.branch_series(r.db, "flat", ["main"], r.repo)
    assert flat.changes == ()


def test_without_git_runs_are_ordered_by_start_time(tmp_path: Path) -> None:
    r = make(tmp_path, n=6)
    (s,) = trend.branch_series(r.db, "flat", ["no-such-branch"], tmp_path)
    assert s.branch == trend.ALL_RUNS and len(s.points) == 6
    assert [p.started for p in s.points] == sorted(p.started for p in s.points)


def test_branch_baseline_names_its_commit_range(tmp_path: Path) -> None:
    r = make(tmp_path, n=8, step_at=99)
    git(r.repo, "checkout", "-q", "-b", "pr")
    b = trend.branch_baseline(r.db, "flat", "main", r.repo, window=5, exclude_run="20260007" + "0-run")
    assert b is not None and len(b.runs) == 4 and (b.first, b.last) == (r.commits[3], r.commits[6])
    assert b.label == f"main {r.commits[3][:12]}..{r.commits[6][:12]}"
    assert trend.is_branch("main", r.repo) and not trend.is_branch("nope", r.repo)
    assert trend.default_branches(r.repo) == ["pr", "main"]
    assert trend.branch_baseline(r.db, "flat", "nope", r.repo) is None


def test_a_branch_known_only_as_origin_branch(tmp_path: Path) -> None:
    """A CI checkout of a pull request has main only as refs/remotes/origin/main."""
    from pytest_perfgate.store import baseline

    r = make(tmp_path, n=5, step_at=99)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(r.repo), str(clone))
    git(clone, "checkout", "-q", "-b", "pr")
    git(clone, "branch", "-q", "-D", "main")
    assert trend.branch_commits("main", clone) == r.commits
    ref = baseline.resolve("main", r.results, clone)
    assert ref.branch == "main" and ref.commit == r.commits[-1]
    assert baseline.resolve("origin/main", r.results, clone).branch == "origin/main"
