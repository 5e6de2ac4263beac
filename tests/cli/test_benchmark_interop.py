"""pytest-benchmark interop: gates on raw per-round timings, verdicts in --benchmark-json, and each
plugin working without the other."""

from __future__ import annotations

import json

import pytest

THRESHOLDS = """
[phases.p1]
[gates.fast_enough]
phase = "p1"
metric = "allreduce_time"
statistic = "p50"
max = "1 ms"
"""

TEST = """
import time
import pytest

@pytest.mark.gate("fast_enough")
def test_bench(benchmark, perfgate):
    benchmark.pedantic(time.sleep, args=(0.0002,), rounds=60, iterations=1)
    v = perfgate.check(benchmark)
    assert v.n == 60 == len(benchmark.stats.stats.data)
    assert v.observed == sorted(benchmark.stats.stats.data)[29]  # the empirical p50 of the raw rounds
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    return pytester


# pytest-benchmark's own timer option, scripted: every reading is 0.2 ms after the one before, so
# each round measures exactly 0.2 ms however busy the machine (a real sleep's rounds would measure the
# machine's wake-up latency too, and a "p50 <= 1 ms" pass would be the machine's, not the plugin's)
SCRIPTED_TIMER = """
STEP = 0.0002
_now = [0.0]


def tick():
    _now[0] += STEP
    return _now[0]
"""


def test_gate_on_raw_rounds_and_verdict_in_benchmark_json(project: pytest.Pytester) -> None:
    pytest.importorskip("pytest_benchmark")  # a test extra: `pip install -e .[test]`
    project.makepyfile(test_b=TEST, scripted_timer=SCRIPTED_TIMER)
    project.syspathinsert()
    r = project.runpytest("-p", "no:cacheprovider", "--benchmark-json=bench.json",
                          "--benchmark-timer=scripted_timer.tick", "-q")
    r.assert_outcomes(passed=1)
    doc = json.loads((project.path / "bench.json").read_text())
    (b,) = doc["benchmarks"]
    pg = b["extra_info"]["perfgate"]["fast_enough"]
    assert pg["outcome"] == "pass" and pg["n"] == 60 and pg["method"] == "order-statistic"
    assert pg["observed"] == pytest.approx(0.0002, rel=1e-6) == b["stats"]["median"]  # the scripted rounds
    stored = json.loads((project.path / "perfgate-results" / "decisions.json").read_text())
    assert stored["phases"]["p1"]["verdicts"][0]["samples"].endswith("fast_enough.jsonl.gz")


def test_perfgate_without_pytest_benchmark(project: pytest.Pytester) -> None:
    project.makepyfile(test_p="""
import pytest
@pytest.mark.gate("fast_enough")
def test_plain(perfgate):
    perfgate.check(perfgate.samples([0.1, 0.2, 0.3] * 20, "ms"))

def test_no_benchmark_fixture(request):
    assert "benchmark" not in request.fixturenames
""")
    r = project.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark", "-q")
    r.assert_outcomes(passed=2)


def test_pytest_benchmark_without_perfgate(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_benchmark")
    pytester.makepyfile(test_b="""
def test_bench(benchmark):
    benchmark(sum, range(100))
""")
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:perfgate", "--benchmark-json=b.json", "-q")
    r.assert_outcomes(passed=1)
    assert "perfgate" not in json.loads((pytester.path / "b.json").read_text())["benchmarks"][0]["extra_info"]
