"""Plugin behaviour, end to end through pytester."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def decisions(p: pytest.Pytester) -> dict:  # type: ignore[type-arg]
    return json.loads((p.path / "perfgate-results" / "decisions.json").read_text())


def test_phase_marker_selects_gate_and_fallback_tests(project: pytest.Pytester) -> None:
    r = project.runpytest("-m", "phase1", "--strict-markers", "-rs")
    r.assert_outcomes(passed=2, skipped=1, deselected=1)
    r.stdout.fnmatch_lines(["*fallback tiered_kv_cache: not triggered: gate long_context_ttft passed*"])
    r.stdout.fnmatch_lines(["*= perfgate =*", "phase*gate*statistic*observed*CI*threshold*outcome*fallback*",
                            "phase1*long_context_ttft*ttft p99*100 ms*PASS*", "*wrote*decisions.json"])


def test_failing_gate_names_fallback_and_runs_fallback_test(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_MS", "212")
    r = project.runpytest("-m", "phase1")
    r.assert_outcomes(passed=2, failed=1, deselected=1)
    r.stdout.fnmatch_lines([
        "FAILED long_context_ttft: ttft p99 212 ms > max 150 ms (n=400, 95% sure it is above)",
        '*-> fallback: tiered_kv_cache "Plan A: tiered KV cache (GPU hot, CPU warm tokens)" (docs/fallbacks.md#tiered-kv-cache)*',
    ])
    r.stdout.fnmatch_lines(["triggered fallbacks:", "  tiered_kv_cache \"Plan A*"])
    d = decisions(project)["phases"]["phase1"]
    assert d["outcome"] == "fallback"  # the gate failed and its fallback plan was validated
    assert d["triggered_fallbacks"] == ["tiered_kv_cache"]
    assert d["fallback_tests"][0]["outcome"] == "passed"
    assert {v["gate"]: v["outcome"] for v in d["verdicts"]} == {"long_context_ttft": "fail", "acceptance": "pass"}
    assert d["thresholds_sha256"] and d["run_id"] and d["timestamp"]


def test_decisions_persist_across_sessions(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_MS", "212")
    project.runpytest("-m", "phase1", "-k", "ttft").assert_outcomes(failed=1, deselected=3)
    # a later session runs only the fallback test: the recorded decision triggers it
    r = project.runpytest("-k", "plan_a", "-rs")
    r.assert_outcomes(passed=1, deselected=3)
    # phase 2 reads phase 1's recorded outcome
    project.makepyfile(test_phase2="""
        import pytest
        @pytest.mark.gate("mm_throughput")
        def test_mm(perfgate):
            d = perfgate.decision("phase1")
            assert d["outcome"] in ("failed", "fallback")
            assert d["verdicts"][0]["observed"] == pytest.approx(0.212)
            perfgate.check(perfgate.samples([31.0], "tok/s"))
    """)
    r = project.runpytest("-m", "phase2", "test_phase2.py")
    r.assert_outcomes(passed=1)
    doc = decisions(project)
    assert set(doc["phases"]) == {"phase1", "phase2"}  # merged, not replaced
    assert doc["phases"]["phase2"]["verdicts"][0]["note"].startswith("single measurement")


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (('max = "150 ms"', 'max = "150 parsecs"'), "*thresholds.toml: [[]gates.long_context_ttft[]] max = '150 parsecs': unknown unit 'parsecs'*"),
        (('metric = "ttft"', 'metric = "ttfz"'), "*[[]gates.long_context_ttft[]] metric: unknown metric 'ttfz'*"),
        (('depends_on = ["phase1"]', 'depends_on = ["phase3"]'), "*[[]phases.phase2[]] depends_on: unknown phase 'phase3'*"),
        (('title = "FP16 pipeline"', 'title = "FP16'), "*thresholds.toml: TOML syntax error*"),
    ],
)
def test_bad_thresholds_is_a_usage_error(project: pytest.Pytester, edit: tuple[str, str], expect: str) -> None:
    path = project.path / "thresholds.toml"
    path.write_text(path.read_text().replace(*edit))
    r = project.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"ERROR: perfgate: {expect}"])
    assert "Traceback" not in r.stderr.str() + r.stdout.str()


def test_unknown_gate_marker_names_the_test(project: pytest.Pytester) -> None:
    project.makepyfile(test_bad="""
        import pytest
        @pytest.mark.gate("no_such_gate")
        def test_x(perfgate):
            pass
    """)
    r = project.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*test_bad.py::test_x: unknown gate 'no_such_gate'*"])


def test_inconclusive_fail_and_warn(project: pytest.Pytester) -> None:
    project.makepyfile(test_inc="""
        import pytest
        @pytest.mark.gate("long_context_ttft")
        def test_few(perfgate):
            perfgate.check(perfgate.samples([100.0] * 50, "ms"))
    """)
    r = project.runpytest("test_inc.py")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["INCONCLUSIVE long_context_ttft: ttft p99 100 ms vs max 150 ms (n=50, not sure either way: "
                            "need >= 299 samples in all (249 more)*"])
    r = project.runpytest("test_inc.py", "--perfgate-inconclusive=warn")
    assert r.parseoutcomes()["passed"] == 1 and "failed" not in r.parseoutcomes()
    r.stdout.fnmatch_lines(["*PerfgateWarning: gate long_context_ttft*inconclusive*"])


def test_several_checks_per_test_all_recorded(project: pytest.Pytester) -> None:
    project.makepyfile(test_multi="""
        import pytest
        @pytest.mark.gate("long_context_ttft", "acceptance")
        def test_both(perfgate):
            perfgate.evaluate(perfgate.proportion(10, 100), gate="acceptance")
            perfgate.check(perfgate.samples([100.0] * 400, "ms"), gate="long_context_ttft")
    """)
    r = project.runpytest("test_multi.py")
    r.assert_outcomes(passed=1)
    verdicts = decisions(project)["phases"]["phase1"]["verdicts"]
    assert [v["gate"] for v in verdicts] == ["acceptance", "long_context_ttft"]
    assert decisions(project)["phases"]["phase1"]["outcome"] == "failed"


def test_confidence_option(project: pytest.Pytester) -> None:
    r = project.runpytest("-k", "ttft", "--perfgate-confidence", "0.99")
    r.assert_outcomes(failed=1, deselected=3)  # 400 samples can't support P99 at 99% (needs 459)
    r.stdout.fnmatch_lines(["INCONCLUSIVE long_context_ttft*need >= 459 samples*"])
    r = project.runpytest("-k", "ttft", "--perfgate-confidence", "0.99", "-v")  # -v: the bounds too
    r.stdout.fnmatch_lines(["*one-sided 99% bounds*need >= 459 samples*"])


def test_junit_properties_and_gates_xml(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    junitparser = pytest.importorskip("junitparser")
    monkeypatch.setenv("TTFT_MS", "212")
    project.runpytest("-m", "phase1", "--junitxml=junit.xml", "-o", "junit_family=xunit1")
    suite = next(iter(junitparser.JUnitXml.fromfile(str(project.path / "junit.xml"))))
    case = next(c for c in suite if c.name == "test_ttft")
    assert case.result and "tiered_kv_cache" in case.result[0].message
    props = {p.get("name"): p.get("value") for p in case._elem.iter("property")}
    assert props["perfgate.long_context_ttft.outcome"] == "fail"
    assert props["perfgate.long_context_ttft.triggered"] == "tiered_kv_cache"
    assert props["perfgate.long_context_ttft.n"] == "400"
    gates = junitparser.JUnitXml.fromfile(str(project.path / "perfgate-results" / "gates.xml"))
    suites = {s.name: s for s in gates}
    assert set(suites) == {"phase1"}
    ttft = next(c for c in suites["phase1"] if c.name == "long_context_ttft")
    assert "tiered_kv_cache" in ttft.result[0].text


def test_outputs_written(project: pytest.Pytester) -> None:
    project.runpytest("-m", "phase1", "--perfgate-out", "out")
    out = Path(project.path / "out")
    assert {"decisions.json", "gates.xml", "summary.md", "report.html"} <= {p.name for p in out.iterdir()}


def test_no_thresholds_file_plugin_is_quiet(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    r = pytester.runpytest()
    r.assert_outcomes(passed=1)
    assert "= perfgate =" not in r.stdout.str()
    assert not (pytester.path / "perfgate-results").exists()


def test_xdist_verdicts_reach_controller(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("TTFT_MS", "212")
    r = project.runpytest_subprocess("-m", "phase1", "-n", "2", "-p", "xdist", "--dist", "loadgroup")
    r.assert_outcomes(passed=2, failed=1)  # acceptance + plan A: same worker as the gate that triggers it
    d = decisions(project)["phases"]["phase1"]
    assert {v["gate"] for v in d["verdicts"]} == {"long_context_ttft", "acceptance"}
    assert d["triggered_fallbacks"] == ["tiered_kv_cache"]


def test_dependent_phase_is_told_when_its_dependency_failed(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_MS", "212")
    project.runpytest("-m", "phase1", "-k", "ttft")
    project.makepyfile(test_phase2="""
        import pytest
        @pytest.mark.gate("mm_throughput")
        def test_mm(perfgate):
            perfgate.check(perfgate.samples([31.0], "tok/s"))
    """)
    r = project.runpytest("-m", "phase2", "test_phase2.py")
    assert r.parseoutcomes()["passed"] == 1
    r.stdout.fnmatch_lines(["*PerfgateWarning: phase phase2 depends on phase1, whose recorded outcome is FAILED*"])


def test_unknown_engine_option_is_a_usage_error(project: pytest.Pytester) -> None:
    r = project.runpytest("--perfgate-engine", "speculative=nope")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--perfgate-engine speculative=nope: no [[]engines.nope[]] in thresholds.toml*"])
