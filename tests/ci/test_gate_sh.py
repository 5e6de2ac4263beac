"""ci/gate.sh on CPU: exit status, artifacts, GitHub step summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "ci" / "gate.sh"

THRESHOLDS = """
[phases.phase1]
title = "demo"
[fallbacks.plan_a]
title = "Plan A"
doc = "docs/fallbacks.md#plan-a"
[gates.ttft]
phase = "phase1"
metric = "ttft"
statistic = "p50"
max = "150 ms"
fallback = ["plan_a"]
"""

SUITE = """
import os, pytest
@pytest.mark.gate("ttft")
def test_ttft(perfgate):
    perfgate.check(perfgate.samples([float(os.environ["TTFT_MS"])] * 50, "ms"))
"""


def run_gate(tmp_path: Path, ttft_ms: float) -> tuple[subprocess.CompletedProcess[str], Path]:
    (tmp_path / "thresholds.toml").write_text(THRESHOLDS)
    (tmp_path / "suite").mkdir(exist_ok=True)
    (tmp_path / "suite" / "test_demo.py").write_text(SUITE)
    summary = tmp_path / "step_summary.md"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHON": sys.executable,
        "PERFGATE_TESTS": "suite",
        "PERFGATE_THRESHOLDS": str(tmp_path / "thresholds.toml"),
        "PERFGATE_OUT": "results",
        "GITHUB_STEP_SUMMARY": str(summary),
        "TTFT_MS": str(ttft_ms),
    }
    p = subprocess.run(["bash", str(GATE), "phase1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return p, summary


def test_passing_gate_exits_zero(tmp_path: Path) -> None:
    p, summary = run_gate(tmp_path, 100)
    assert p.returncode == 0, p.stdout + p.stderr
    arts = tmp_path / "results" / "artifacts"
    assert {"junit.xml", "gates.xml", "decisions.json", "summary.md", "report.html"} <= {f.name for f in arts.iterdir()}
    assert "PASSED" in summary.read_text()
    assert "perfgate gate: phase1 PASSED" in p.stdout


def test_failing_gate_exits_one_and_names_fallback(tmp_path: Path) -> None:
    p, summary = run_gate(tmp_path, 200)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Plan A" in summary.read_text() and "FAILED" in summary.read_text()
    doc = json.loads((tmp_path / "results" / "artifacts" / "decisions.json").read_text())
    assert doc["phases"]["phase1"]["triggered_fallbacks"] == ["plan_a"]


def test_bad_thresholds_is_not_a_pass(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir(exist_ok=True)
    (tmp_path / "suite" / "test_demo.py").write_text(SUITE)
    bad = tmp_path / "bad.toml"
    bad.write_text(THRESHOLDS.replace('"150 ms"', '"150 parsecs"'))
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "PERFGATE_TESTS": "suite",
           "PERFGATE_THRESHOLDS": str(bad), "PERFGATE_OUT": "results", "TTFT_MS": "100"}
    p2 = subprocess.run(["bash", str(GATE)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p2.returncode == pytest.ExitCode.USAGE_ERROR
    assert "unknown unit 'parsecs'" in p2.stderr


def test_absolute_out_outside_the_project_works_twice(tmp_path: Path) -> None:
    """gate.sh's own form, `pytest ... --perfgate-out /abs/dir`, with thresholds.toml found (no
    PERFGATE_THRESHOLDS): the second run too, when the existing results directory moves pytest's
    rootdir out of the project (issue 21, item 9)."""
    proj, out = tmp_path / "proj", tmp_path / "results"
    (proj / "suite").mkdir(parents=True)
    (proj / "thresholds.toml").write_text(THRESHOLDS)
    (proj / "suite" / "test_demo.py").write_text(SUITE)
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "PERFGATE_TESTS": "suite", "PERFGATE_OUT": str(out),
           "TTFT_MS": "100"}
    for attempt in (1, 2):
        p = subprocess.run(["bash", str(GATE), "phase1"], cwd=proj, env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"run {attempt}: {p.stdout}{p.stderr}"
        assert "perfgate gate: phase1 PASSED" in p.stdout
