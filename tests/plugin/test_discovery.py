"""thresholds.toml discovery that does not depend on pytest's rootdir (issue 21, item 9): the order
is --perfgate-thresholds, ini ``perfgate_thresholds``, the inifile's directory, the invocation
directory and its parents (up to the inifile's directory, the rootdir or a ``.git``), the rootdir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_perfgate.session.startup import PluginConfig

TH = """
[phases.phase1]
title = "p"
[gates.g]
phase = "phase1"
metric = "ttft"
statistic = "p50"
max = "1 s"
"""

TEST = """
import pytest
from pytest_perfgate import make_samples

@pytest.mark.gate("g")
def test_g(perfgate):
    perfgate.check(make_samples([1.0] * 60, "ms"), "g")
"""


def _opt(**kw: Any) -> SimpleNamespace:
    base = {"perfgate_thresholds": None, "perfgate_out": None, "perfgate_confidence": None,
            "perfgate_inconclusive": None, "perfgate_engine": None}
    return SimpleNamespace(**{**base, **kw})


def _ini(values: dict[str, str] | None = None) -> Any:
    return lambda name: (values or {}).get(name, "")


def test_out_dir_outside_the_project_twice(tmp_path: Path) -> None:
    """`pytest tests/perf --perfgate-out /abs/dir` passes the second time too, when the existing
    results directory has moved pytest's rootdir to a common ancestor without thresholds.toml."""
    proj, out = tmp_path / "proj", tmp_path / "results"
    (proj / "tests" / "perf").mkdir(parents=True)
    (proj / "thresholds.toml").write_text(TH)
    (proj / "tests" / "perf" / "test_slo.py").write_text(TEST)
    cmd = [sys.executable, "-m", "pytest", "tests/perf", "--perfgate-out", str(out), "-q", "-p", "no:cacheprovider"]
    for attempt in (1, 2):
        r = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"run {attempt}:\n{r.stdout}\n{r.stderr}"
        assert "1 passed" in r.stdout
    assert (out / "decisions.json").is_file()


def test_order_explicit_then_ini_then_inifile_dir(tmp_path: Path) -> None:
    repo, sub = tmp_path / "repo", tmp_path / "repo" / "sub"
    sub.mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    for d in (repo, sub):
        (d / "thresholds.toml").write_text(TH)
    (sub / "other.toml").write_text(TH)
    ini = repo / "pyproject.toml"
    # 1. the option, relative to the invocation directory
    pc = PluginConfig.resolve(_opt(perfgate_thresholds="other.toml"), _ini(), sub, repo, ini)
    assert pc.thresholds_path == sub / "other.toml"
    # 2. the ini value, relative to the inifile's directory (not the rootdir)
    pc = PluginConfig.resolve(_opt(), _ini({"perfgate_thresholds": "sub/other.toml"}), sub, tmp_path, ini)
    assert pc.thresholds_path == repo / "sub" / "other.toml"
    # 3. the inifile's directory before the invocation directory
    pc = PluginConfig.resolve(_opt(), _ini(), sub, repo, ini)
    assert pc.thresholds_path == repo / "thresholds.toml"
    assert pc.out_dir == repo / "perfgate-results"  # beside the inifile


def test_invocation_dir_and_parents_up_to_git_root(tmp_path: Path) -> None:
    """No inifile, rootdir moved to /: the invocation directory, then its parents up to the
    repository root (the first directory holding .git), never above it."""
    above, repo = tmp_path, tmp_path / "repo"
    deep = repo / "services" / "a"
    deep.mkdir(parents=True)
    (repo / ".git").mkdir()
    (above / "thresholds.toml").write_text(TH)  # above the repository: never taken
    pc = PluginConfig.resolve(_opt(), _ini(), deep, Path("/"), None)
    assert pc.thresholds_path is None
    assert [p.parent for p in pc.searched] == [deep.resolve(), deep.parent.resolve(), repo.resolve(), Path("/")]
    assert "looked in" in pc.not_found() and str(repo.resolve()) in pc.not_found()
    (repo / "thresholds.toml").write_text(TH)
    pc = PluginConfig.resolve(_opt(), _ini(), deep, Path("/"), None)
    assert pc.thresholds_path == repo.resolve() / "thresholds.toml"
    assert pc.out_dir == deep / "perfgate-results"  # no inifile: the invocation directory
    (deep / "thresholds.toml").write_text(TH)  # the nearest wins
    assert PluginConfig.resolve(_opt(), _ini(), deep, Path("/"), None).thresholds_path == deep.resolve() / "thresholds.toml"


def test_rootdir_last_and_out_relative_to_invocation(tmp_path: Path) -> None:
    root, inv = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    inv.mkdir()
    (root / "thresholds.toml").write_text(TH)
    pc = PluginConfig.resolve(_opt(perfgate_out="out"), _ini(), inv, root, None)
    assert pc.thresholds_path == root / "thresholds.toml"
    assert pc.out_dir == inv / "out"
