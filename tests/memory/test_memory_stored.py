"""Memory's max-safe-batch ratio goes through the ``perfgate`` fixture (issue 23): real pytest
sessions (pytester) that check the gate the way perf_tests/test_memory.py does, on scripted sweeps
(the repeats' max safe batches; the sweep's child processes are tested in test_sweep.py).

The verdict lands in the stored data (``perfgate evaluate`` re-evaluates it to the same verdict,
Bonferroni confidence and all), is evaluated at ``--perfgate-confidence`` when given, and is compared
with ``--perfgate-baseline``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stored_sessions import gate_session, phase_verdicts, re_evaluate

THRESHOLDS = """
[phases.memory]
[gates.max_safe_batch_ratio]
phase = "memory"
metric = "value"
statistic = "p50"
compare = "ratio"
runs = ["best_setting", "default"]
min = 2.0
regression = "20%"
params = { estimator = "hodges_lehmann" }
"""

TESTS = """
import json
import os
import pytest
from pytest_perfgate import memory

BATCHES = json.loads(os.environ["PG_BATCHES"])  # setting -> max safe batch per repeat

def sweep():
    return memory.SweepResult.from_dict({
        "settings": [{"name": name, "env": {"PYTORCH_CUDA_ALLOC_CONF": name} if name != "default" else {}}
                     for name in BATCHES],
        "runs": [{"setting": name, "repeat": i, "seconds": 1.0, "result": {"max_safe_batch": b}}
                 for name, bs in BATCHES.items() for i, b in enumerate(bs)]})

@pytest.mark.gate("max_safe_batch_ratio")
def test_batch(perfgate, perfgate_memory):
    perfgate_memory.check(perfgate, sweep())
"""

DEFAULT = [16, 17, 16, 18, 16, 17]
GOOD = {"default": DEFAULT, "roadmap": [40, 41, 44, 40, 42, 43], "expandable": [36, 37, 35, 38, 36, 39]}


def _session(pytester: pytest.Pytester, batches: dict[str, list[int]], *args: str) -> pytest.RunResult:
    return gate_session(pytester, THRESHOLDS, TESTS, {"PG_BATCHES": json.dumps(batches)}, *args)


def _verdict(pytester: pytest.Pytester) -> dict[str, Any]:
    return phase_verdicts(pytester, "memory")[-1]


def _evaluate(capsys: pytest.CaptureFixture[str], results: Path) -> dict[str, Any]:
    return re_evaluate(capsys, results, "max_safe_batch_ratio")


def test_batch_ratio_is_stored_and_re_evaluates(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    _session(pytester, GOOD).assert_outcomes(passed=1)
    v = _verdict(pytester)
    assert v["outcome"] == "pass" and v["samples"], v["summary"]
    assert v["method"] == "hodges-lehmann ratio, exact mann-whitney bound"
    assert "best of 2 candidates (roadmap)" in v["note"] and v["confidence"] == pytest.approx(0.975)
    got = _evaluate(capsys, pytester.path / "perfgate-results")
    assert got["matches"] is True, got


def test_batch_ratio_takes_the_confidence_override(pytester: pytest.Pytester,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _session(pytester, GOOD, "--perfgate-confidence", "0.9").assert_outcomes(passed=1)
    v = _verdict(pytester)
    assert v["confidence"] == pytest.approx(0.95)  # 1 - (1 - 0.9) / 2: Bonferroni over the 2 settings
    assert _evaluate(capsys, pytester.path / "perfgate-results")["matches"] is True


def test_batch_ratio_is_compared_with_the_baseline_run(pytester: pytest.Pytester) -> None:
    """A best setting at 5x the default, then at 2.6x: still over the 2x target, but a regression
    beyond the gate's 20% tolerance, caught by the baseline check alone."""
    best5 = {"default": DEFAULT, "roadmap": [80, 82, 84, 81, 83, 85], "expandable": [36, 37, 35, 38, 36, 39]}
    _session(pytester, best5).assert_outcomes(passed=1)
    best26 = {"default": DEFAULT, "roadmap": [43, 44, 45, 43, 44, 46], "expandable": [36, 37, 35, 38, 36, 39]}
    _session(pytester, best26, "--perfgate-baseline", "latest").assert_outcomes(failed=1)
    v = _verdict(pytester)
    assert v["outcome"] == "fail" and v["lower"] > 2.0, v["summary"]  # the target itself is met
    assert v["vs_baseline"]["regressed"] is True
    assert "REGRESSED beyond the 20% regression tolerance" in v["summary"]
