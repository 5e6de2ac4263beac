"""A capacity gate end to end through pytest (``perfgate.check(sweep, gate)``): the verdict in
decisions.json with its curve, the sweep plots in report.html, no data lost (scripted M/M/1 runs,
no engine)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import mm1_runs
import pytest

from pytest_perfgate.runtime.timeouts import scaled

THRESHOLDS = """
[perfgate]
confidence = 0.95

[phases.phase1]
title = "p1"

[gates.serve_capacity]
phase = "phase1"
metric = "request_throughput"
statistic = "sustained"
min = "2 req/s"
slo = { ttft_p50 = "2 s", tpot_p50 = "100 ms" }
"""

TEST = """
import numpy as np
import pytest
from mm1_runs import mm1_run

from pytest_perfgate.load.sweep import Sweep


@pytest.mark.gate("serve_capacity")
def test_capacity(perfgate):
    rng = np.random.default_rng(5)
    perfgate.check(Sweep("rate", {r: mm1_run(rng, r, 3.5) for r in (1.0, 2.0, 4.0)}))
"""


def test_a_capacity_gate_through_pytest(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_cap=TEST)
    shutil.copy(mm1_runs.__file__, pytester.path)  # the helper beside the test file (its folder is on sys.path)
    out = pytester.path / "results"
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--perfgate-out={out}", "-W", "error::UserWarning")
    res.assert_outcomes(passed=1)
    assert "could not store" not in res.stdout.str()
    doc = json.loads((out / "decisions.json").read_text())
    v = doc["phases"]["phase1"]["verdicts"][0]
    assert v["gate"] == "serve_capacity" and v["outcome"] == "pass" and v["observed"] == 2.0
    assert [p["level"] for p in v["curve"]] == [1.0, 2.0, 4.0] and v["details"]["knee"] == 2.0
    html = (out / "report.html").read_text()
    assert "latency vs load" in html and "Pareto front" in html
    # the stored data keeps every level's run: `perfgate evaluate` reruns the capacity search on them
    ev = subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", "evaluate", "latest", "serve_capacity",
                         "--results", str(out), "--json"], capture_output=True, text=True, cwd=pytester.path,
                        timeout=scaled(120))
    got = json.loads(ev.stdout)
    assert ev.returncode == 0 and got["matches"] is True, ev.stderr
    assert got["verdict"]["observed"] == 2.0 and got["verdict"]["details"]["knee"] == 2.0
