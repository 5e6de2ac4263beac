"""A server whose every stream is one chunk (issue 38, item 7): ITL cannot be measured, which is the
ITL gate's named error; every other gate of the same ``check_all`` is still decided and recorded
(never a ``SampleError`` traceback that leaves the later gates "not evaluated")."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate import GateFailure, Perfgate, SampleError, Verdict
from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.session.perfgate import RunState

MS = 1_000_000
DOC: dict[str, Any] = {
    "phases": {"p": {}},
    "gates": {
        "ttft_p50": {"phase": "p", "metric": "ttft", "statistic": "p50", "max": "1 s"},
        "itl_p99": {"phase": "p", "metric": "itl", "statistic": "p99", "max": "200 ms"},
        "e2e_p50": {"phase": "p", "metric": "e2e", "statistic": "p50", "max": "2 s"},
    },
}


def one_chunk_run(n: int = 40) -> RunResult:
    """``n`` requests, each answered by one chunk of 32 tokens 20 ms after it was sent (scripted clock)."""
    recs = [RequestRecord(index=i, sent_ns=i * 100 * MS, chunk_ns=[i * 100 * MS + 20 * MS], chunk_tokens=[32],
                          end_ns=i * 100 * MS + 21 * MS, output_tokens=32) for i in range(n)]
    return RunResult(records=recs)


def fixture(tmp_path: Path, gates: tuple[str, ...]) -> tuple[Perfgate, list[Verdict]]:
    th = parse_thresholds(DOC, tmp_path / "thresholds.toml")
    got: list[Verdict] = []

    def record(v: Verdict, engines: list[Mapping[str, Any]], extras: Mapping[str, Any]) -> None:
        got.append(v)

    return Perfgate(RunState(th, tmp_path, "run", None), gates, record), got


def test_check_all_errors_the_itl_gate_and_decides_the_others(tmp_path: Path) -> None:
    pg, got = fixture(tmp_path, ("ttft_p50", "itl_p99", "e2e_p50"))
    with pytest.raises(GateFailure) as e:
        pg.check_all(one_chunk_run())
    by_gate = {v.gate: v for v in got}
    assert set(by_gate) == {"ttft_p50", "itl_p99", "e2e_p50"}  # every gate recorded, none skipped
    assert by_gate["ttft_p50"].outcome == "pass" and by_gate["e2e_p50"].outcome == "pass"
    itl = by_gate["itl_p99"]
    assert itl.outcome == "error" and "no request streamed more than one chunk" in itl.note
    assert [v.gate for v in e.value.verdicts] == ["itl_p99"]
    assert str(e.value).splitlines() == [
        "gate itl_p99: ERROR: itl not evaluated: itl: no request streamed more than one chunk"]


def test_check_on_a_run_is_the_gates_error_too(tmp_path: Path) -> None:
    pg, got = fixture(tmp_path, ("itl_p99",))
    with pytest.raises(GateFailure, match="itl_p99: ERROR: itl not evaluated: itl: no request streamed"):
        pg.check(one_chunk_run())
    assert [v.outcome for v in got] == ["error"]


def test_samples_a_test_made_itself_still_raise_their_own_error(tmp_path: Path) -> None:
    pg, got = fixture(tmp_path, ("itl_p99",))
    with pytest.raises(SampleError, match="no samples"):
        pg.check(pg.samples([], "ms"))
    assert not got
