"""Errors that read and count right: an errored gate keeps its own unit and threshold, the
error-rate gate is decided on the failures (Clopper-Pearson, like any proportion gate), causes name
the server's reason and the URL, several failing gates each say why; and the verdict-side items
of issue 21's list 11 (diff wording, "regressed", per-gate time, did-you-mean, warm-up line, trend
axis)."""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from slo_gates import SLO_GATES

from pytest_perfgate.config import Thresholds, parse_thresholds
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.result import RunResult, describe_error, server_reason
from pytest_perfgate.verdicts import bounds as stats
from pytest_perfgate.verdicts.failures import GateFailure
from pytest_perfgate.verdicts.samples import RequestCounts, make_samples
from pytest_perfgate.verdicts.verdict import evaluate

TOML = SLO_GATES + """
[gates.lat]
phase = "slo"
metric = "ttft"
statistic = "p90"
max = "150 ms"
regression = "5%"
[gates.lat_free]
phase = "slo"
metric = "ttft"
statistic = "p90"
max = "150 ms"
"""
URL = "http://127.0.0.1:8000"
REJECTED = "HTTP 422: {\"error\":{\"message\":\"Unexpected fields {'ignore_eos'}\",\"code\":422}}"


@pytest.fixture
def th() -> Thresholds:
    return parse_thresholds(tomllib.loads(TOML), Path("thresholds.toml"))


def ok(i: int, ttft_ms: float = 20.0) -> RequestRecord:
    t0 = int(ttft_ms * 1e6)
    return RequestRecord(index=i, sent_ns=0, chunk_ns=[t0, t0 + 1_000_000, t0 + 2_000_000], chunk_tokens=[1, 1, 1],
                         end_ns=t0 + 2_000_000, output_tokens=3)


def run_of(n_ok: int, errors: list[str], url: str = URL) -> RunResult:
    recs = [ok(i) for i in range(n_ok)] + [RequestRecord(index=n_ok + i, sent_ns=0, error=e) for i, e in enumerate(errors)]
    return RunResult(recs, engine_info={"name": "e", "base_url": url, "api": "completions"}, start_ns=0,
                     end_ns=1_000_000_000)


def test_errored_gate_keeps_its_unit_and_threshold(th: Thresholds) -> None:
    run = run_of(12, [REJECTED] * 12)
    v = evaluate(th.gate("ttft_p95"), run, thresholds=th)
    assert v.outcome == "error" and v.unit == "ms" and v.fmt(v.threshold) == "1500 ms"
    assert v.fmt(v.observed) == "20.0 ms"  # the 12 that succeeded, shown, not gated
    d = v.to_dict()
    assert d["display"]["threshold"] == "1500 ms" and d["ci"] == "not evaluated: 12/24 requests failed"
    assert ("12/24 requests failed (12 x HTTP 422 from http://127.0.0.1:8000/v1/completions: "
            "Unexpected fields {'ignore_eos'}); error budget 0%") in v.summary()
    assert "(not gated)" in v.summary()
    t = evaluate(th.gate("out_tput"), run, thresholds=th)
    assert t.outcome == "error" and t.unit == "tok/s" and t.fmt(t.threshold) == "10.0 tok/s"
    dead = evaluate(th.gate("ttft_p95"), run_of(0, ["connection refused: 127.0.0.1:8000 ([Errno 111])"] * 3),
                    thresholds=th)
    assert dead.outcome == "error" and dead.unit == "ms" and math.isnan(dead.observed)
    assert "3 x connection refused (http://127.0.0.1:8000/v1/completions))" in dead.summary()


def test_error_rate_gate_fails_on_its_clopper_pearson_bound(th: Thresholds) -> None:
    g = th.gate("err")
    v = evaluate(g, run_of(14, [REJECTED] * 10), thresholds=th)
    b = stats.clopper_pearson(10, 24, 0.95)
    assert v.outcome == "fail" and v.method == "clopper-pearson" and v.n == 24
    assert (v.observed, v.lower, v.upper) == pytest.approx((b.observed, b.lower, b.upper))
    assert "10 x HTTP 422 from http://127.0.0.1:8000/v1/completions" in v.summary()
    everything = evaluate(g, run_of(0, [REJECTED] * 6), thresholds=th)
    assert everything.outcome == "fail" and everything.observed == 1.0
    clean = evaluate(g, run_of(400, []), thresholds=th)
    assert clean.outcome == "pass"  # 0/400: upper bound 0.75% < 1%
    nothing = evaluate(g, RunResult([]), thresholds=th)
    assert nothing.outcome == "error" and "no request was sent" in nothing.note


def _fail_rate(th: Thresholds, p: float, n: int, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    g = th.gate("err")
    fails = 0
    for _ in range(trials):
        k = int(rng.binomial(n, p))
        run = run_of(n - k, ["HTTP 500: x"] * k)
        # independent failures land anywhere in the run (all at its end would be a burst: dependence)
        run.records = [dataclasses.replace(r, sent_ns=int(t)) for r, t in zip(run.records, rng.permutation(n) + 1, strict=True)]
        fails += evaluate(g, run, thresholds=th).outcome == "fail"
    return fails / trials


def test_error_rate_decisions_simulated(th: Thresholds) -> None:
    """Seeded: a server failing exactly 1% of 600 requests fails the max-1% gate in <= 5% of runs
    (+3 SE); one failing 4% fails it in >= 90%."""
    trials = 300
    at_max = _fail_rate(th, 0.01, 600, trials, seed=21)
    assert at_max <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials), at_max
    assert _fail_rate(th, 0.04, 600, 100, seed=22) >= 0.9


def test_server_reasons_and_urls() -> None:
    assert server_reason('{"error": {"message": "Unrecognized request argument supplied: ignore_eos"}}') == \
        "Unrecognized request argument supplied: ignore_eos"
    assert server_reason('{"detail": [{"msg": "field required"}, {"msg": "extra fields not permitted"}]}') == \
        "field required; extra fields not permitted"
    assert server_reason('{"error": "prompt must be a string"}') == "prompt must be a string"
    assert server_reason("Internal   Server\nError") == "Internal Server Error"
    assert len(server_reason("x" * 1000)) <= 163
    assert describe_error(REJECTED, URL + "/v1/completions") == \
        " from http://127.0.0.1:8000/v1/completions: Unexpected fields {'ignore_eos'}"
    assert describe_error("connection refused: 127.0.0.1:8000 ([Errno 111])", URL + "/v1/completions") == \
        " (http://127.0.0.1:8000/v1/completions)"
    assert describe_error("timeout: no complete answer within 5 s (0 events received)", "") == \
        ": no complete answer within 5 s (0 events received)"
    counts = RequestCounts(10, 0, {"HTTP 500": 5, "timeout": 3, "HTTP 503": 1, "x": 1}, {"HTTP 500": ": boom"})
    assert counts.listed(2) == "5 x HTTP 500: boom, 3 x timeout, 2 x 2 other cause(s)"
    pooled = counts + RequestCounts(1, 0, {"HTTP 500": 1}, {"HTTP 500": ": other"})
    assert pooled.causes["HTTP 500"] == 6 and pooled.reasons["HTTP 500"] == ": boom"


def test_terminal_notes_name_each_cause_once_and_never_cut(th: Thresholds) -> None:
    from pytest_perfgate.plugin.table import gate_table

    run = run_of(2, [REJECTED] * 22, url="http://a-very-long-host-name.example.internal:8000")
    vs = [evaluate(th.gate(g), run, thresholds=th).to_dict() for g in ("ttft_p95", "out_tput", "err")]
    lines = gate_table(vs)
    assert all(len(ln) <= 120 for ln in lines)
    notes = [ln for ln in lines if ln.startswith("error ")]
    assert len(notes) == 1 and notes[0].startswith("error ttft_p95, out_tput: 22/24 requests failed")
    joined = " ".join(" ".join(lines[lines.index(notes[0]):]).split())
    assert "from http://a-very-long-host-name.example.internal:8000/v1/completions: Unexpected fields {'ignore_eos'}" in joined
    rows = {ln.split()[1]: ln for ln in lines if ln.startswith("slo ")}
    assert "max 1500 ms" in rows["ttft_p95"] and "22/24 failed" in rows["ttft_p95"] and "ERROR" in rows["ttft_p95"]
    assert "min 10.0 tok/s" in rows["out_tput"] and "FAIL" in rows["err"]


def test_every_failing_gate_says_why(th: Thresholds) -> None:
    run = run_of(12, [REJECTED] * 12)
    err = evaluate(th.gate("err"), run, thresholds=th)
    e1, e2 = (evaluate(th.gate(g), run, thresholds=th) for g in ("ttft_p95", "out_tput"))
    lines = str(GateFailure(err, e1, e2)).splitlines()
    assert lines[0].startswith("gate err: error_rate rate = 50.0%") and lines[1].startswith("-> fallback:")
    assert lines[2].startswith("gates ttft_p95, out_tput: ERROR: not evaluated: 12/24 requests failed (12 x HTTP 422 from")
    assert len(lines) == 3
    from pytest_perfgate.plugin.shortfail import message

    shown = message(GateFailure(err, e1), short=False, fail_msg=None)
    assert shown is not None and shown[1].endswith("(and 1 more failing gate(s))")


def test_gates_own_times_add_up_to_the_test() -> None:
    from pytest_perfgate.plugin.recorder import own_times

    vs = [{"recorded_at": 102.0}, {"recorded_at": 102.5}, {}]
    own_times(vs, 100.0, 3.0)
    assert [v["duration"] for v in vs] == [2.0, 0.5, 0.5]
    whole = [{"recorded_at": 5.0}]
    own_times(whole, 0.0, 4.0)  # no start known: the test's time
    assert whole[0]["duration"] == 4.0


def test_diff_never_says_within_tolerance_when_it_cannot_show_it(th: Thresholds) -> None:
    from pytest_perfgate.store import baseline

    rng = np.random.default_rng(5)
    g = th.gate("lat")
    few_base, few_cur = make_samples(rng.lognormal(np.log(50), 0.5, 12), "ms"), make_samples(
        rng.lognormal(np.log(120), 0.5, 12), "ms")
    # 2.4x on 12 a run: no per-run bound exists, the permutation test of the quantile shows it
    shown = baseline.compare(g, few_cur, few_base, confidence=0.95, thresholds=th, tolerance=0.05)
    assert shown is not None and shown.regressed and "permutation test" in shown.text
    assert "each run needs >= " in shown.text  # and says what a bound would need
    slightly = make_samples(few_base.values * 1.2, "s")  # 20% worse on 12: neither shown nor ruled out
    cmp = baseline.compare(g, slightly, few_base, confidence=0.95, thresholds=th, tolerance=0.05)
    assert cmp is not None and not cmp.regressed and cmp.inconclusive
    assert "within" not in cmp.text and "inconclusive: a regression beyond the 5% regression tolerance" in cmp.text
    same = rng.lognormal(np.log(50), 0.1, 4000)
    cmp = baseline.compare(g, make_samples(same, "ms"), make_samples(same, "ms"), confidence=0.95, thresholds=th,
                           tolerance=0.05)
    assert cmp is not None and not cmp.inconclusive and "within the 5% regression tolerance" in cmp.text


def test_report_marks_regressed_only_against_a_regression_tolerance() -> None:
    from pytest_perfgate.writers.html import _change_text

    worse = {"change": 1.613, "smaller_is_better": True, "regressed": True}
    assert _change_text({"vs_baseline": {**worse, "tolerance": None}}) == "+161.3% (worse)"
    assert _change_text({"vs_baseline": {**worse, "tolerance": 0.05}}) == "+161.3% (worse) regressed beyond 5%"


def test_unknown_gate_in_a_marker_gets_did_you_mean(th: Thresholds) -> None:
    from pytest_perfgate.plugin.markers import Markers

    (line,) = Markers(gates=("ttft_p59",)).problems("t.py::t", th)
    assert "unknown gate 'ttft_p59' (did you mean 'ttft_p95'? gates in thresholds.toml:" in line
    (line,) = Markers(gates=("TTFT-P95",)).problems("t.py::t", th)
    assert "did you mean 'ttft_p95'?" in line
    (line,) = Markers(gates=("zzz",)).problems("t.py::t", th)
    assert "did you mean" not in line


def test_warm_up_says_a_line() -> None:
    from pytest_perfgate.calib import Script, ScriptedServer
    from pytest_perfgate.contract import Request
    from pytest_perfgate.engines import registry
    from pytest_perfgate.load.runner import run_load
    from pytest_perfgate.load.schedule import LoadConfig
    from pytest_perfgate.runtime.progress import progress_printer

    said: list[str] = []
    with ScriptedServer(Script(ttft=0.001, itl=0.001)) as srv:
        eng = registry.create("e", "openai", {"base_url": srv.base_url, "model": "scripted"})
        eng.start()
        try:
            run = run_load(eng, [Request("a b", 2)], LoadConfig(num_requests=3, warmup=2), progress_printer(said.append, "e"))
        finally:
            eng.stop()
    assert len(run.measured) == 3
    assert said[0].startswith("perfgate: [e] warm-up 0/2 requests (not measured), ")
    assert said[-1].startswith("perfgate: [e] 3/3 requests, ")


def test_trend_axis_names_dates_and_commits() -> None:
    from pytest_perfgate.writers import plots
    from pytest_perfgate.writers.html_sections import run_label

    assert run_label({"started": "2026-12-01T21:10:25+00:00", "git_commit": "abcdef0123456"}) == "12-01 21:10 abcdef0"
    assert run_label({"started": "", "run_id": "20261201T211023Z-6ad6db"}) == "20261201T211023"
    svg = plots.trend([(1.0, 0.9, 1.1), (1.2, 1.1, 1.3), (1.1, 1.0, 1.2)], "ms", threshold=1.5,
                      outcomes=["pass"] * 3, labels=["12-01 21:10 abc1234", "12-02 08:00 def5678", "12-03 09:30"])
    assert "12-02 08:00 def5678" in svg and "run (date, commit), oldest first" in svg
