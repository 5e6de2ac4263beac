"""Phase 3's verdicts go through the ``perfgate`` fixture (issue 23): real pytest sessions (pytester)
that check the all-reduce gates the way perf_tests/test_phase3.py does, on seeded per-iteration times.

Each verdict lands in the stored data (``perfgate evaluate`` re-evaluates it to the same verdict),
is evaluated at ``--perfgate-confidence`` when given, and is compared with ``--perfgate-baseline``;
the terminal table names each message size of ``allreduce_p99``."""

from __future__ import annotations

from typing import Any

import pytest
from stored_sessions import gate_session, phase_verdicts, re_evaluate

THRESHOLDS = """
[phases.phase3]
[gates.allreduce_p99]
phase = "phase3"
metric = "allreduce_time"
statistic = "p99"
record_only = true
unit = "us"
[gates.cross_node_p99_increase]
phase = "phase3"
metric = "tpot"
statistic = "p99"
compare = "difference"
runs = ["cross_node", "single_node"]
max = "20 ms"
regression = "50%"
"""

TESTS = """
import os
import numpy as np
import pytest
from pytest_perfgate import distributed

SHIFT = float(os.environ.get("PG_SHIFT", "0.002"))  # the true cross-node overhead per token, seconds

@pytest.mark.gate("allreduce_p99")
def test_sizes(perfgate):
    rng = np.random.default_rng(1)
    doc = {"backend": "gloo", "layout": "sizes", "comm_env": {}}
    for nbytes in (8, 4096, 1 << 20):
        r = distributed.SizeResult(nbytes, 2, tuple(rng.lognormal(np.log(1e-4 * (1 + nbytes / 4096)), 0.3, 400)))
        perfgate.check(perfgate.samples(np.asarray(r.times_s), "s"), gate="allreduce_p99",
                       note=distributed.size_note(r, doc), label=distributed.size_label(r.nbytes))

@pytest.mark.gate("cross_node_p99_increase")
def test_cross_node(perfgate):
    rng = np.random.default_rng(2)
    single = rng.lognormal(np.log(0.004), 0.3, 1000)
    cross = rng.lognormal(np.log(0.004), 0.3, 1000) + SHIFT
    perfgate.check({"cross_node": perfgate.samples(cross, "s"), "single_node": perfgate.samples(single, "s")},
                   note="2 layers x 2 all-reduces of 8192 B per token; seeded")
"""


def _session(pytester: pytest.Pytester, *args: str, shift: float = 0.002) -> pytest.RunResult:
    return gate_session(pytester, THRESHOLDS, TESTS, {"PG_SHIFT": str(shift)}, *args)


def _verdicts(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return phase_verdicts(pytester, "phase3")


def test_phase3_verdicts_are_stored_and_re_evaluate(pytester: pytest.Pytester,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    r = _session(pytester)
    r.assert_outcomes(passed=2)
    vs = _verdicts(pytester)
    assert [v["gate"] for v in vs].count("allreduce_p99") == 3
    assert all(v.get("samples") for v in vs), "a verdict without stored data"
    # each message size is its own row: the table says which
    r.stdout.fnmatch_lines(["*allreduce_p99 [[]8 B[]]*", "*allreduce_p99 [[]4 KiB[]]*", "*allreduce_p99 [[]1 MiB[]]*"])
    cross = next(v for v in vs if v["gate"] == "cross_node_p99_increase")
    assert cross["outcome"] == "pass" and "seeded" in cross["note"]
    for gate in ("cross_node_p99_increase", "allreduce_p99"):
        got = re_evaluate(capsys, pytester.path / "perfgate-results", gate)
        assert got["matches"] is True, got


def test_phase3_takes_the_confidence_override(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    _session(pytester, "--perfgate-confidence", "0.8").assert_outcomes(passed=2)
    cross = next(v for v in _verdicts(pytester) if v["gate"] == "cross_node_p99_increase")
    assert cross["confidence"] == 0.8
    got = re_evaluate(capsys, pytester.path / "perfgate-results", "cross_node_p99_increase")
    assert got["matches"] is True and got["verdict"]["confidence"] == 0.8


def test_phase3_is_compared_with_the_baseline_run(pytester: pytest.Pytester) -> None:
    """Overhead 2 ms, then 12 ms: still under the 20 ms target, but a regression beyond 50%."""
    _session(pytester, shift=0.002).assert_outcomes(passed=2)
    r = _session(pytester, "--perfgate-baseline", "latest", shift=0.012)
    r.assert_outcomes(passed=1, failed=1)
    cross = [v for v in _verdicts(pytester) if v["gate"] == "cross_node_p99_increase"][-1]
    assert cross["outcome"] == "fail" and cross["upper"] < 0.020, cross["summary"]
    assert cross["vs_baseline"]["regressed"] is True
    assert "REGRESSED beyond the 50% regression tolerance" in cross["summary"]
