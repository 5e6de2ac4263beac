"""On a server that takes no ``ignore_eos`` the output lengths are not forced: the gates whose
values depend on them say so, with how many requests stopped early (issue 21)."""

from __future__ import annotations

from pathlib import Path

from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.verdicts.verdict import evaluate

TOML = {"phases": {"p": {}}, "gates": {
    "tpot": {"phase": "p", "metric": "tpot", "statistic": "p50", "max": "1 s"},
    "ttft": {"phase": "p", "metric": "ttft", "statistic": "p50", "max": "1 s"},
}}


def _run(lengths: str) -> RunResult:
    recs = []
    for i in range(40):
        n = 8 if i % 4 else 3  # every fourth request stopped at an end-of-sequence token
        t0 = 1_000_000 * i
        recs.append(RequestRecord(index=i, sent_ns=t0, chunk_ns=[t0 + 10_000_000 + k * 1_000_000 for k in range(n)],
                                  chunk_tokens=[1] * n, end_ns=t0 + 20_000_000, prompt_tokens=16, output_tokens=n,
                                  finish_reason="length" if n == 8 else "stop"))
    return RunResult(recs, engine_info={"base_url": "http://127.0.0.1:1", "output_lengths": lengths})


def test_length_dependent_gates_say_lengths_were_not_forced() -> None:
    th = parse_thresholds(TOML, Path("thresholds.toml"))
    run = _run("not forced (the server does not take ignore_eos; TPOT uses the tokens that came)")
    v = evaluate(th.gate("tpot"), run, thresholds=th)
    assert v.outcome == "pass"
    assert "output lengths not forced (the server takes no ignore_eos): 10/40 request(s) stopped before max_tokens" in v.note
    assert "not forced" not in evaluate(th.gate("ttft"), run, thresholds=th).note  # TTFT does not depend on them


def test_forced_lengths_add_nothing() -> None:
    th = parse_thresholds(TOML, Path("thresholds.toml"))
    assert "not forced" not in evaluate(th.gate("tpot"), _run("forced (ignore_eos)"), thresholds=th).note
