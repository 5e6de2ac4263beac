"""Fault injection against real sockets and real servers: every fault becomes an errored request
record with its cause, the run goes on until its budget, and the gate says "error" with the causes
counted -- never a pass on no data, never an accidental "inconclusive"."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import closed_port, tiny_server_args

from pytest_perfgate import contract
from pytest_perfgate.calib import ScriptedServer
from pytest_perfgate.config import Thresholds, parse_thresholds
from pytest_perfgate.contract import Request
from pytest_perfgate.engines import registry
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig, send_offsets_ns
from pytest_perfgate.runtime.timeouts import scaled
from pytest_perfgate.verdicts.samples import SampleError
from pytest_perfgate.verdicts.verdict import evaluate

pytest_plugins = ["pytester"]

TOML = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "faults.toml").read_text()


@pytest.fixture(scope="module")
def th() -> Thresholds:
    return parse_thresholds(tomllib.loads(TOML), Path("thresholds.toml"))


def make_engine(url: str, timeout: float = 2.0, transport: str = "auto", start: bool = True, **args: Any) -> Any:
    eng = registry.create("e", "openai", {"base_url": url, "model": "scripted", "timeout": timeout, "transport": transport,
                                          **args})
    if start:
        eng.start()
    return eng


def req(fault: dict[str, Any] | None = None, max_tokens: int = 8) -> Request:
    return Request("one two three", max_tokens, extra={"perfgate": fault} if fault else {})


#: a liveness bound only (fails when a run never ends); every budget the tests check is by construction
LIVENESS_S = 120


def run_hanging(url: str, config: LoadConfig) -> tuple[RunResult, float]:
    """A run against a server that accepts and never answers (0.5 s per-request timeout), and its seconds."""
    eng = make_engine(url, timeout=0.5)
    try:
        t = time.monotonic()
        run = run_load(eng, [req({"fault": "hang"})], config)
        return run, time.monotonic() - t
    finally:
        eng.stop()


def check_error_verdict(th: Thresholds, run: RunResult, cause: str) -> None:
    """The gate's verdict on an all-failed run: "error", causes counted, no fallback triggered."""
    n = len(run.measured)
    v = evaluate(th.gate("ttft"), run, thresholds=th)
    assert v.outcome == "error", v.summary()
    assert not v.passed and v.triggered == ()
    assert f"{n}/{n} requests failed ({n} x {cause}" in v.summary()  # then the URL and the detail
    ev = evaluate(th.gate("errors"), run, thresholds=th)
    assert ev.outcome == "fail" and ev.observed == 1.0  # the error-rate gate is decided on the failures


# (fault sent in the request body, cause, chunks that must be kept in each record)
STREAM_FAULTS = [
    ({"fault": "status", "status": 404, "body": "The model `nope` does not exist."}, "HTTP 404", 0),
    ({"fault": "status", "status": 400, "body": "This model's maximum context length is 512 tokens"}, "HTTP 400", 0),
    ({"fault": "status", "status": 500}, "HTTP 500", 0),
    ({"fault": "status", "status": 503, "body": "overloaded"}, "HTTP 503", 0),
    ({"fault": "cut", "cut_after": 3}, "connection closed mid-stream", 3),
    ({"fault": "malformed", "cut_after": 2}, "malformed SSE", 2),
    ({"fault": "invalid_json", "cut_after": 2}, "invalid JSON in SSE event", 2),
    ({"fault": "empty"}, "empty stream", 0),
    ({"fault": "no_finish"}, "stream ended without [DONE] or a finish_reason", 8),
    ({"fault": "wrong_usage", "usage_delta": 5}, "usage disagrees", 8),
    ({"fault": "hang"}, "timeout", 0),
    ({"fault": "hang_mid", "cut_after": 2}, "timeout", 2),
]


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
@pytest.mark.parametrize(("fault", "cause", "kept"), STREAM_FAULTS, ids=[f"{f['fault']}-{c}" for f, c, _ in STREAM_FAULTS])
def test_stream_fault_becomes_errored_record(
    scripted: ScriptedServer, th: Thresholds, transport: str, fault: dict[str, Any], cause: str, kept: int
) -> None:
    hang = fault["fault"].startswith("hang")
    eng = make_engine(scripted.base_url, timeout=0.4 if hang else 5.0, transport=transport)
    try:
        n = 2 if hang else 4
        run = run_load(eng, [req(fault)], LoadConfig(num_requests=n))
    finally:
        eng.stop()
    assert len(run.measured) == n  # the run went on after every failure
    for r in run.measured:
        assert r.error is not None and r.error.startswith(cause + ":"), r.error
        assert len(r.chunk_ns) == kept  # what arrived before the fault is kept
        if kept:
            assert r.chunk_ns == sorted(r.chunk_ns) and r.chunk_ns[0] >= r.sent_ns > 0
    assert dict(run.errors()) == {cause: n}
    check_error_verdict(th, run, cause)
    # the ttft data of an all-failed run is a clear error too, never an empty pass
    with pytest.raises(SampleError, match=re.escape(f"no successful requests: {n} x {cause}")):
        run.perfgate_data("ttft")
    json.dumps(run.to_dict(), allow_nan=False)  # the records serialize, partial data included


def test_http_error_body_is_in_the_cause(scripted: ScriptedServer) -> None:
    eng = make_engine(scripted.base_url)
    try:
        run = run_load(eng, [req({"fault": "status", "status": 400, "body": "maximum context length is 512"})],
                       LoadConfig(num_requests=1))
    finally:
        eng.stop()
    assert "maximum context length is 512" in (run.records[0].error or "")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1", "nonsense", "http://[::1", "http://127.0.0.1:notaport"])
def test_bad_base_url_is_an_engine_error(url: str) -> None:
    from pytest_perfgate.contract import EngineError

    with pytest.raises(EngineError, match=r"\[engines\.\w+\] base_url"):
        make_engine(url, timeout=5)


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("refused", "connection refused"),
        ("http://no-such-host.invalid:8000", "cannot connect"),
    ],
)
def test_connection_faults(th: Thresholds, url: str, cause: str) -> None:
    if url == "refused":
        url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(contract.EngineError, match=re.escape(f"nothing answered at {url} within 0.3 s: {cause}")):
        make_engine(url, timeout=5, ready_timeout=0.3)  # not "ready": the start names the URL and the cause
    eng = make_engine(url, timeout=5, start=False)  # the requests of an engine never started fail one by one
    try:
        run = run_load(eng, [req()], LoadConfig(mode="concurrency", concurrency=2, num_requests=6))
    finally:
        eng.stop()
    # the cause says each failed at once (refused, not resolvable), not at the 5-s per-request timeout
    assert len(run.measured) == 6
    assert all(r.error and r.error.startswith(cause + ":") for r in run.measured), [r.error for r in run.measured]
    check_error_verdict(th, run, cause)


def test_unparseable_base_url_is_an_engine_error_not_a_crash() -> None:
    """A base_url that is not a URL fails when the engine is built, as an EngineError (via the manager)."""
    from pytest_perfgate.config import EngineSpec
    from pytest_perfgate.engines.manager import EngineManager

    mgr = EngineManager({"x": EngineSpec("x", "openai", {"base_url": "http://[::1", "model": "m"})}, say=lambda s: None)
    with pytest.raises(contract.EngineError, match="engine 'x' failed to start.*IPv6"):
        mgr.get("x")
    with pytest.raises(contract.EngineError, match="engine 'x' failed to start"):  # cached: not started twice
        mgr.get("x")


def test_mixed_faults_run_continues_gate_lists_every_cause(scripted: ScriptedServer, th: Thresholds) -> None:
    reqs = [req(), req({"fault": "status", "status": 500}), req(), req({"fault": "cut", "cut_after": 1}),
            req(), req({"fault": "no_finish"})]
    eng = make_engine(scripted.base_url)
    try:
        run = run_load(eng, reqs, LoadConfig(mode="concurrency", concurrency=3, num_requests=12))
    finally:
        eng.stop()
    assert len(run.measured) == 12 and len(run.successful) == 6
    v = evaluate(th.gate("ttft"), run, thresholds=th)
    assert v.outcome == "error"
    assert "6/12 requests failed (" in v.summary()
    for part in ("2 x HTTP 500", "2 x connection closed mid-stream", "2 x stream ended without [DONE] or a finish_reason"):
        assert part in v.summary()
    assert v.details == {"HTTP 500": 2.0, "connection closed mid-stream": 2.0,
                         "stream ended without [DONE] or a finish_reason": 2.0}
    # within a configured error budget the gate is judged, its failed requests counted as over the
    # limit (censored, issue 22): 6 of 12 over a P50's 10 s can show neither side
    tolerant = evaluate(th.gate("tolerant"), run, thresholds=th)
    assert tolerant.outcome == "inconclusive", tolerant.summary()
    assert "6 failed request(s) counted as over the limit" in tolerant.summary()
    er = evaluate(th.gate("errors"), run, thresholds=th)
    assert er.outcome == "fail" and er.observed == pytest.approx(0.5)


def test_hanging_server_per_request_timeout_and_run_budget(scripted: ScriptedServer, th: Thresholds) -> None:
    """A server that accepts and never answers: each request times out, the run stops at its
    time budget (not at its request budget), every record says why.

    By construction, not by the clock: a worker sends only while the budget lasts and stops only
    once it has seen it spent, so the run spans at least its 1.5 s; each request holds its worker
    for at least its 0.5-s timeout, so each of the 2 workers sends at most 1.5 / 0.5 + 1 = 4."""
    run, took = run_hanging(scripted.base_url, LoadConfig(mode="concurrency", concurrency=2, num_requests=10_000,
                                                         max_seconds=1.5))
    assert run.end_ns - run.start_ns >= 1.5e9  # the time budget, spent
    n = len(run.measured)
    assert 2 <= n <= 8  # both workers sent; far below the request budget
    assert took < scaled(LIVENESS_S)  # liveness only: the run ends
    assert all((r.error or "").startswith("timeout: no complete answer within 0.5 s") for r in run.measured)
    check_error_verdict(th, run, "timeout")


def test_open_loop_run_budget_with_hanging_server(scripted: ScriptedServer, th: Thresholds) -> None:
    """Open loop: requests go at the seeded schedule's times while the budget lasts, however late
    the loop gets to each; by construction none is sent at a time past the budget, and the run
    spans at least its budget (it ends when the schedule's next time finds the budget spent)."""
    run, took = run_hanging(scripted.base_url, LoadConfig(mode="poisson", rate=20, num_requests=10_000, max_seconds=1.0))
    offsets = send_offsets_ns(run.config)
    assert offsets is not None
    due = int((offsets < 1e9).sum())  # requests the schedule puts inside the 1-s budget (~20)
    assert run.end_ns - run.start_ns >= 1e9
    assert 1 <= len(run.measured) <= due
    assert [(r.scheduled_ns or 0) - run.start_ns for r in run.measured] == offsets[:len(run.measured)].tolist()
    assert took < scaled(LIVENESS_S)  # liveness only
    check_error_verdict(th, run, "timeout")


def test_all_failed_run_through_the_plugin_is_a_clear_failure(pytester: pytest.Pytester, scripted: ScriptedServer) -> None:
    """Every request fails: the test fails with the causes counted, decisions.json and gates.xml
    say error/failed, nothing says pass or inconclusive."""
    pytester.makefile(".toml", thresholds=TOML + f"""
[engines]
srv = {{ kind = "openai", base_url = "{scripted.base_url}", model = "scripted", timeout = 5 }}
""")
    pytester.makepyfile(test_run="""
        import pytest
        from pytest_perfgate.contract import Request
        from pytest_perfgate.load.schedule import LoadConfig

        @pytest.mark.gate("ttft")
        def test_all_fail(perfgate, perfgate_engines):
            reqs = [Request("a b", 4, extra={"perfgate": {"fault": "status", "status": 503}}),
                    Request("a b", 4, extra={"perfgate": {"fault": "cut", "cut_after": 1}})]
            run = perfgate_engines.run("srv", reqs, LoadConfig(num_requests=6))
            perfgate.check(run)
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["ERROR ttft: ttft * not evaluated: 6/6 requests failed "
                            f"(3 x HTTP 503 from {scripted.base_url}/v1/completions: scripted failure, "
                            f"3 x connection closed mid-stream ({scripted.base_url}/v1/completions)*); error budget 0%*"])
    out = pytester.path / "perfgate-results"
    d = json.loads((out / "decisions.json").read_text())["phases"]["p"]
    assert d["outcome"] == "failed" and d["triggered_fallbacks"] == []
    assert [v["outcome"] for v in d["verdicts"]] == ["error"]
    import xml.etree.ElementTree as ET

    case = ET.parse(out / "gates.xml").getroot().find(".//testcase[@name='ttft']")
    assert case is not None and (case.find("failure") is not None or case.find("error") is not None)
    assert "PASS" not in (out / "summary.md").read_text().split("| ttft |")[-1].splitlines()[0]


# ---------------------------------------------------------------- a real vLLM server killed mid-run
@pytest.mark.needs_engine
def test_vllm_server_killed_mid_run(th: Thresholds) -> None:
    from pytest_perfgate.models import make_models

    models = make_models()
    eng = registry.create("victim", "vllm-server", tiny_server_args(str(models.target)))
    eng.start()
    pgid = os.getpgid(eng._proc.pid)
    killed = threading.Event()

    def progress(done: int, total: int, seconds: float) -> None:
        if done == 6 and not killed.is_set():  # runs on the engine loop, between requests
            killed.set()
            os.killpg(pgid, signal.SIGKILL)

    try:
        prompt = tuple(range(10, 74))
        # max_seconds: liveness only (the run ends); the 34 requests after the kill fail at once
        run = run_load(eng, [Request(prompt, 48, prompt_tokens=64)],
                       LoadConfig(mode="concurrency", concurrency=2, num_requests=40, max_seconds=scaled(600)), progress)
    finally:
        eng.stop()  # copes with a dead server
    assert killed.is_set()
    assert len(run.measured) == 40  # the run went on to its request budget
    ok = run.successful
    assert len(ok) >= 5 and all(r.output_tokens == 48 for r in ok)  # measured before the kill: kept
    causes = run.errors()
    assert sum(causes.values()) == 40 - len(ok)
    assert set(causes) <= {"connection closed mid-stream", "connection refused", "cannot connect"}, causes
    assert causes["connection refused"] >= 30
    v = evaluate(th.gate("ttft"), run, thresholds=th)
    assert v.outcome == "error" and "connection refused" in v.summary()
    tolerant = evaluate(th.gate("ttft"), RunResult(ok, config=run.config), thresholds=th)
    assert tolerant.outcome in ("pass", "inconclusive", "fail")  # the kept data still evaluates



def test_gate_tests_that_fail_without_a_verdict_record_an_error(pytester: pytest.Pytester) -> None:
    """An engine that can't start, a measurement that raises (nothing listening: not ready): the gate gets
    an "error" verdict with the cause and the phase is failed -- not "passed" for lack of data."""
    pytester.makefile(".toml", thresholds=TOML + f"""
[engines]
nokey = {{ kind = "openai", base_url = "http://127.0.0.1:{closed_port()}", model = "m", api_key_env = "PERFGATE_NO_SUCH_VARIABLE" }}
down = {{ kind = "openai", base_url = "http://127.0.0.1:{closed_port()}", model = "m", ready_timeout = 0.5 }}
""")
    pytester.makepyfile(test_x="""
        import pytest
        from pytest_perfgate.contract import Request
        from pytest_perfgate.load.schedule import LoadConfig

        @pytest.mark.gate("ttft")
        @pytest.mark.engine("nokey")
        def test_engine_fails(perfgate, perfgate_engine):
            pass

        @pytest.mark.gate("tolerant")
        def test_draw_raises(perfgate, perfgate_engines):
            def draw():
                return perfgate_engines.run("down", [Request("a", 2)], LoadConfig(num_requests=1)).perfgate_data("ttft")
            perfgate.sample_until_decided(draw)

        @pytest.mark.gate("errors", "ttft")
        def test_gate_failure_is_not_doubled(perfgate):
            perfgate.check(perfgate.proportion(1, 10), gate="errors")
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(failed=2, errors=1)
    d = json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())["phases"]["p"]
    assert d["outcome"] == "failed"
    got = {(v["test"].split("::")[1], v["gate"]): v for v in d["verdicts"]}
    assert set(got) == {("test_engine_fails", "ttft"), ("test_draw_raises", "tolerant"),
                        ("test_gate_failure_is_not_doubled", "errors")}
    e1 = got[("test_engine_fails", "ttft")]
    assert e1["outcome"] == "error" and "PERFGATE_NO_SUCH_VARIABLE" in e1["note"] and "(setup)" in e1["note"]
    e2 = got[("test_draw_raises", "tolerant")]
    assert e2["outcome"] == "error" and "nothing answered at http://127.0.0.1:" in e2["note"]  # the start says so
    assert "connection refused" in e2["note"]
    assert got[("test_gate_failure_is_not_doubled", "errors")]["outcome"] == "fail"
    r.stdout.fnmatch_lines(["*ttft*ERROR*", "*tolerant*ERROR*"])


def test_run_budget_cancels_requests_the_per_request_timeout_would_let_hang(
    scripted: ScriptedServer, th: Thresholds
) -> None:
    """Per-request timeout 10 min, run budget 1 s + 0.5 s drain: the run ends at the drain and the
    requests still hanging are errors that say so. By construction: each of the 4 workers sends
    once at the start and its request holds it past the budget, so exactly 4; only the drain's cut
    writes "run budget exhausted" (the 10-min timeout would say "timeout"), and it fires no earlier
    than budget + drain."""
    eng = make_engine(scripted.base_url, timeout=600)
    try:
        t = time.monotonic()
        run = run_load(eng, [req({"fault": "hang"}), req({"fault": "hang_mid", "cut_after": 2})],
                       LoadConfig(mode="concurrency", concurrency=4, num_requests=100, max_seconds=1.0,
                                  drain_seconds=0.5))
        took = time.monotonic() - t
    finally:
        eng.stop()
    assert took < scaled(LIVENESS_S)  # liveness only, and far below the 600-s per-request timeout
    assert run.end_ns - run.start_ns >= 1.5e9
    assert len(run.measured) == 4
    assert all((r.error or "").startswith("run budget exhausted: cancelled 0.5 s after the run's time budget (1 s)")
               for r in run.measured), [r.error for r in run.measured]
    check_error_verdict(th, run, "run budget exhausted")
