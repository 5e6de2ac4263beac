"""Nothing measured is lost: real pytest runs killed mid-way (SIGTERM, SIGKILL, a crashing test)
leave valid result files with every verdict measured up to then; two concurrent runs writing the
same results directory both land; xdist workers' verdicts and properties reach the controller."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_perfgate.runtime.timeouts import scaled

pytest_plugins = ["pytester"]

THRESHOLDS = """
[phases.phase1]
[phases.phase2]
[gates.g1]
phase = "phase1"
metric = "ttft"
statistic = "p50"
max = "150 ms"
[gates.g2]
phase = "phase2"
metric = "ttft"
statistic = "p50"
max = "150 ms"
"""

TESTS = """
import os, signal, time
from pathlib import Path
import pytest

@pytest.fixture(scope="session")
def session_resource():
    yield
    Path("torn-down").write_text("yes")  # proves session fixtures (engines) were torn down

@pytest.mark.gate("g1")
@pytest.mark.parametrize("i", range(3))
def test_measured(perfgate, session_resource, i):
    perfgate.check(perfgate.samples([100.0 + i] * 20, "ms"))

@pytest.mark.gate("g1")
def test_slow(perfgate, session_resource):
    Path("started-slow").write_text("1")
    if os.environ.get("CRASH"):
        os.kill(os.getpid(), signal.SIGKILL)  # a test that takes the whole process down
    time.sleep(120)
    perfgate.check(perfgate.samples([1.0] * 20, "ms"))
"""


def _popen(path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
    )


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    t, timeout = time.monotonic(), scaled(timeout)
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() - t < timeout, "the run never reached the slow test"
        time.sleep(0.05)


def _results(path: Path) -> tuple[dict, ET.Element]:  # type: ignore[type-arg]
    out = path / "perfgate-results"
    doc = json.loads((out / "decisions.json").read_text())
    xml = ET.parse(out / "gates.xml").getroot()
    assert not list(out.glob(".*.tmp")), "a temporary file was left behind"
    return doc, xml


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_gates=TESTS)
    return pytester


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_run_finishes_session_and_keeps_results(project: pytest.Pytester, sig: signal.Signals) -> None:
    proc = _popen(project.path)
    _wait_for(project.path / "started-slow", proc)
    time.sleep(0.3)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=scaled(60))
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "KeyboardInterrupt" in out
    assert (project.path / "torn-down").exists(), "session fixtures were not torn down"
    doc, xml = _results(project.path)
    verdicts = doc["phases"]["phase1"]["verdicts"]
    assert [v["test"].split("::")[1] for v in verdicts] == [f"test_measured[{i}]" for i in range(3)]
    assert all(v["outcome"] == "pass" for v in verdicts)
    assert len(xml.findall(".//testcase")) == 3
    md = (project.path / "perfgate-results" / "summary.md").read_text()
    assert "g1" in md and (project.path / "perfgate-results" / "report.html").stat().st_size > 0


def test_crashing_test_keeps_everything_measured_before(project: pytest.Pytester) -> None:
    """The process dies (SIGKILL from inside a test): no hook runs, yet decisions.json and the
    reports hold the three verdicts measured before, and parse."""
    proc = _popen(project.path, env={"CRASH": "1"})
    out, _ = proc.communicate(timeout=scaled(60))
    assert proc.returncode == -signal.SIGKILL, out
    assert not (project.path / "torn-down").exists()
    doc, xml = _results(project.path)
    assert len(doc["phases"]["phase1"]["verdicts"]) == 3
    assert {c.get("name") for c in xml.findall(".//testcase")} == {"g1", "g1[2]", "g1[3]"}
    html = (project.path / "perfgate-results" / "report.html").read_text()
    assert html.rstrip().endswith("</html>")


def test_two_concurrent_runs_share_a_results_directory(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    for phase, gate in (("1", "g1"), ("2", "g2")):
        pytester.makepyfile(**{f"test_phase{phase}": f"""
            import pytest
            @pytest.mark.gate("{gate}")
            @pytest.mark.parametrize("i", range(25))
            def test_g(perfgate, i):
                perfgate.check(perfgate.samples([100.0 + i] * 20, "ms"))
        """})
    procs = [_popen(pytester.path, "-m", f"phase{p}", f"test_phase{p}.py") for p in ("1", "2")]
    outs = [p.communicate(timeout=scaled(120))[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    doc = json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())
    assert set(doc["phases"]) == {"phase1", "phase2"}
    assert len(doc["phases"]["phase1"]["verdicts"]) == 25 and len(doc["phases"]["phase2"]["verdicts"]) == 25
    assert not list((pytester.path / "perfgate-results").glob("*.corrupt.json"))
    ET.parse(pytester.path / "perfgate-results" / "gates.xml")


def test_xdist_workers_properties_verdicts_and_records(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(test_gates="""
        import pytest
        @pytest.mark.gate("g1")
        @pytest.mark.parametrize("i", range(6))
        def test_measured(perfgate, i):
            perfgate.check(perfgate.samples([100.0 + i] * 20, "ms"))
    """)
    r = project.runpytest_subprocess("-p", "xdist", "-n", "2", "--junitxml=junit.xml", "-o", "junit_family=xunit1",
                                     "-p", "no:cacheprovider")
    r.assert_outcomes(passed=6)
    r.stdout.fnmatch_lines(["*= perfgate =*", "*phase1*g1*PASS*"])
    doc, xml = _results(project.path)
    tests = sorted(v["test"] for v in doc["phases"]["phase1"]["verdicts"])
    assert tests == sorted(f"test_gates.py::test_measured[{i}]" for i in range(6))
    assert len(xml.findall(".//testcase")) == 6
    junit = ET.parse(project.path / "junit.xml").getroot()
    props = [p.get("name") for p in junit.iter("property")]
    assert props.count("perfgate.g1.outcome") == 6 and props.count("perfgate.verdict") == 6
