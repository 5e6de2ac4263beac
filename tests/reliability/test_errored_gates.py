"""A server killed mid-run, through the plugin: nothing measured is lost, the error-rate gate FAILs
(a Clopper-Pearson bound over its max, like any proportion gate), every latency gate is an ERROR
that keeps its own unit and threshold in all four outputs (terminal, summary.md, report.html,
gates.xml read back with junitparser) and in the history, and the terminal names the causes with
the URL. The victim is a real process: the scripted server (cheap), and one real vLLM server."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator

import pytest
from engine_tables import openai_engine
from junitparser import Error, Failure, JUnitXml, Properties
from reliability_helpers import closed_port, tiny_server_args
from slo_gates import SLO_GATES

from pytest_perfgate.runtime.timeouts import scaled

pytest_plugins = ["pytester"]

# the metric's own unit and threshold of every latency gate, as each output writes them
LATENCY = {"ttft_p95": ("ms", "max 1500 ms", "1500"), "itl_p99": ("ms", "max 200 ms", "200"),
           "tpot_p99": ("ms", "max 100 ms", "100"), "out_tput": ("tok/s", "min 10.0 tok/s", "10"),
           "e2e_p90": ("s", "max 3.00 s", "3")}

# The test kills the server from the run's stop callback, called after each finished request (an
# event, not a time): 8 requests measured, then the server is gone.
KILLING_TEST = """
import os, signal
import pytest
from pytest_perfgate.contract import Request
from pytest_perfgate.load.schedule import LoadConfig

killed = []

def kill_after_8(partial):
    if len(partial.records) >= 8 and not killed:
        killed.append(1)
        if os.environ.get("VICTIM_PGID"):
            os.killpg(int(os.environ["VICTIM_PGID"]), signal.SIGKILL)
        else:
            os.kill(int(os.environ["VICTIM_PID"]), signal.SIGKILL)
    return False

@pytest.mark.gate("ttft_p95", "itl_p99", "tpot_p99", "out_tput", "err", "e2e_p90")
def test_slo(perfgate, perfgate_engines):
    prompt = REQUEST_PROMPT
    run = perfgate_engines.run("srv", [Request(prompt, 8, prompt_tokens=PROMPT_TOKENS)],
                               LoadConfig(mode="concurrency", concurrency=2, num_requests=24), stop=kill_after_8)
    assert killed
    perfgate.check_all(run)
"""


@pytest.fixture
def victim() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The scripted server in a process of its own, and its base URL."""
    port = closed_port()
    proc = subprocess.Popen([sys.executable, "-m", "pytest_perfgate.calib.scripted_server", "--port", str(port),
                             "--ttft", "0.005", "--itl", "0.002"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "scripted server on" in proc.stdout.readline()
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def run_killed_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, engine: str,
                       prompt: str = '"one two three"', prompt_tokens: str = "None") -> pytest.RunResult:
    pytester.makefile(".toml", thresholds=SLO_GATES + engine)
    pytester.makepyfile(test_slo=KILLING_TEST.replace("REQUEST_PROMPT", prompt).replace("PROMPT_TOKENS", prompt_tokens))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    r.assert_outcomes(failed=1)
    return r


def check_outputs(pytester: pytest.Pytester, r: pytest.RunResult, url: str) -> dict[str, dict]:  # type: ignore[type-arg]
    """The four outputs and the history agree: err FAILs, the latency gates are ERRORs in their units."""
    out = pytester.path / "perfgate-results"
    got = {v["gate"]: v for v in json.loads((out / "decisions.json").read_text())["phases"]["slo"]["verdicts"]}
    assert got["err"]["outcome"] == "fail" and got["err"]["method"] == "clopper-pearson"
    assert got["err"]["lower"] > 0.01  # the bound, not the point estimate, is over the max
    n, failed = got["err"]["n"], round(got["err"]["observed"] * got["err"]["n"])
    assert n == 24 and 8 <= n - failed < 24  # measured before the kill: kept; after: failed
    for g, (unit, threshold, _) in LATENCY.items():
        v = got[g]
        assert v["outcome"] == "error" and v["unit"] == unit and v["display"]["threshold"] == threshold[4:], v
        assert f"{failed}/24 requests failed" in v["note"] and "connection refused" in v["note"]
        assert v["display"]["observed"].endswith(" " + unit)  # measured on the requests that succeeded
    # terminal: every latency row in its own unit; the causes named once, with the URL
    text = r.stdout.str()
    for g, (_, threshold, _) in LATENCY.items():
        (row,) = [ln for ln in text.splitlines() if re.match(rf"(slo\s+)?{g}\s", ln)]
        assert threshold in row and "ERROR" in row and "%" not in row, row
    (err_row,) = [ln for ln in text.splitlines() if re.match(r"(slo\s+)?err\s", ln)]
    assert "max 1.00%" in err_row and "FAIL" in err_row
    notes = " ".join(text.split("error ttft_p95, itl_p99, tpot_p99, out_tput, e2e_p90: ", 1)[1].split())
    assert f"connection refused ({url}/v1/completions)" in notes
    assert f"connection refused ({url}/v1/completions)" in text.split("FAILURES")[1].split("perfgate ===")[0]
    assert "FAILED err: error_rate rate " in text  # every failing gate's sentence, the fail first
    # summary.md
    md = (out / "summary.md").read_text()
    assert "| slo | - | FAILED | 1 fail, 5 error |" in md and "none checked" not in md
    for g, (_, threshold, _) in LATENCY.items():
        (row,) = [ln for ln in md.splitlines() if ln.startswith(f"| {g.replace('_', chr(92) + '_')} |")]
        assert threshold in row and "| error |" in row and "%" not in row, row
    # report.html
    html = (out / "report.html").read_text()
    for _, threshold, _ in LATENCY.values():
        assert f'<td class="num">{threshold}</td>' in html
    assert "max 150%" not in html and "min 1000%" not in html
    # gates.xml, read back with junitparser
    (suite,) = list(JUnitXml.fromfile(str(out / "gates.xml")))
    assert (suite.tests, suite.failures, suite.errors) == (6, 1, 5)
    cases = {c.name: c for c in suite}
    assert isinstance(cases["err"].result[0], Failure)
    for g, (unit, _, threshold) in LATENCY.items():
        props = {p.name: p.value for p in cases[g].child(Properties)}  # type: ignore[no-untyped-call]
        assert isinstance(cases[g].result[0], Error)
        assert props["unit"] == unit and float(props["threshold"]) == float(threshold), props
    assert sum(c.time for c in cases.values()) <= suite.time + 1e-3  # each gate its own time, not the test's x6
    # history: the units kept
    with sqlite3.connect(out / "history.sqlite") as con:
        stored = {g: json.loads(v) for g, v in con.execute("SELECT gate, verdict FROM verdicts")}
    assert {g: stored[g]["unit"] for g in LATENCY} == {g: u for g, (u, _, _) in LATENCY.items()}
    print(f"figures: {n - failed}/24 requests succeeded; {got['ttft_p95']['note']}; "
          f"{len(text.splitlines())} terminal lines")  # pytest -s collects the figures
    return got


def test_scripted_server_killed_mid_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                        victim: tuple[subprocess.Popen[str], str]) -> None:
    proc, url = victim
    monkeypatch.setenv("VICTIM_PID", str(proc.pid))
    r = run_killed_session(pytester, monkeypatch, openai_engine("srv", url, "scripted", timeout=5))
    assert proc.wait(timeout=scaled(30)) != 0  # killed
    got = check_outputs(pytester, r, url)
    # nothing measured is lost: the stored data of an errored gate holds every request, and
    # `perfgate evaluate` reaches it and gives the live verdict again
    out = pytester.path / "perfgate-results"
    from pytest_perfgate.store.records import load

    stored = load(out / got["ttft_p95"]["samples"])
    records = stored.runs[0].records
    assert len([x for x in records if not x.warmup]) == 24
    assert sum(1 for x in records if x.error is None and x.chunk_ns) == 24 - round(got["err"]["observed"] * 24)
    ev = subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", "evaluate", "latest", "ttft_p95",
                         "--results", str(out)], cwd=pytester.path, capture_output=True, text=True)
    assert ev.returncode == 1 and "same verdict as the live run" in ev.stdout, ev.stdout + ev.stderr


@pytest.mark.needs_engine
def test_vllm_server_killed_mid_run_through_the_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same session against a real vLLM server, its process group killed after 8 requests."""
    from pytest_perfgate.engines import registry
    from pytest_perfgate.models import make_models

    eng = registry.create("victim", "vllm-server", tiny_server_args(str(make_models().target)))
    eng.start()
    try:
        monkeypatch.setenv("VICTIM_PGID", str(os.getpgid(eng._proc.pid)))
        r = run_killed_session(pytester, monkeypatch, openai_engine("srv", str(eng.base_url), eng.served_model_name(),
                                                                    timeout=60),
                               prompt="tuple(range(10, 42))", prompt_tokens="32")
    finally:
        eng.stop()  # copes with a dead server
    check_outputs(pytester, r, str(eng.base_url))


def test_warm_up_says_what_it_does(pytester: pytest.Pytester) -> None:
    """``perfgate_engines.warm_up`` is not silence: a line as it starts, one when it is done."""
    from pytest_perfgate.calib import Script, ScriptedServer
    from pytest_perfgate.models.make import make_models

    with ScriptedServer(Script(ttft=0.001, itl=0.001)) as srv:
        pytester.makefile(".toml", thresholds=SLO_GATES + openai_engine("srv", srv.base_url, "scripted",
                                                                         tokenizer=str(make_models().tokenizer)))
        pytester.makepyfile(test_warm="""
            def test_warm(perfgate_engines):
                perfgate_engines.warm_up("srv", 2)
        """)
        r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-s")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["*perfgate: [[]srv[]] warm-up: 2 request(s), not measured*",
                            "*perfgate: [[]srv[]] warm-up done: 2/2 answered in * s*"])
