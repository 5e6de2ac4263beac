"""Sequential sampling stops early on clear cases and keeps its false-pass rate."""

from __future__ import annotations

from pytest_perfgate.config import Thresholds
from pytest_perfgate.verdicts.sequential import look_schedule, sample_until_decided


def test_look_schedule() -> None:
    looks = look_schedule(1000)
    assert looks[0] == 5 and looks[-1] == 1000 and looks == sorted(set(looks))
    assert look_schedule(3) == [3]


def test_clear_failure_stops_after_a_handful(th: Thresholds) -> None:
    calls = []

    def draw() -> float:
        calls.append(1)
        return 900.0

    r = sample_until_decided(draw, th.gate("long_context_ttft"), max_samples=1000, thresholds=th, unit="ms")
    assert r.verdict.outcome == "fail" and r.stopped_by == "decided" and len(calls) == 5


def test_clear_pass_stops_at_the_first_look_allowed(th: Thresholds) -> None:
    r = sample_until_decided(lambda: 10.0, th.gate("long_context_ttft"), max_samples=2000, thresholds=th, unit="ms")
    assert r.verdict.outcome == "pass" and r.stopped_by == "decided"
    # the pass budget is split only over the looks where a pass is possible (437 on): 648 samples
    assert r.samples.n == 648 and r.plan is not None and r.plan.pass_looks == (648, 973, 1459, 2000)


def test_time_budget(th: Thresholds) -> None:
    t = iter(range(0, 10_000))
    r = sample_until_decided(lambda: [10.0, 11.0], th.gate("long_context_ttft"), max_samples=10_000,
                             max_seconds=20, thresholds=th, unit="ms", clock=lambda: float(next(t)))
    assert r.stopped_by == "max_seconds" and r.verdict.outcome == "inconclusive" and r.verdict.needed


def test_draws_of_failed_runs_end_in_an_error_verdict(th: Thresholds) -> None:
    from pytest_perfgate.contract import RequestRecord
    from pytest_perfgate.load.result import RunResult

    calls = []

    def draw() -> RunResult:
        calls.append(1)
        return RunResult([RequestRecord(index=len(calls), sent_ns=0, error="HTTP 503: overloaded")])

    r = sample_until_decided(draw, th.gate("long_context_ttft"), max_samples=400, thresholds=th)
    assert r.stopped_by == "errors" and r.verdict.outcome == "error" and len(calls) == 1
    assert "1/1 requests failed (1 x HTTP 503: overloaded)" in r.verdict.summary()  # the server's reason


def test_draws_of_good_runs_are_sampled(th: Thresholds) -> None:
    from pytest_perfgate.contract import RequestRecord
    from pytest_perfgate.load.result import RunResult

    def draw() -> RunResult:
        rec = RequestRecord(index=0, sent_ns=0, chunk_ns=[900_000_000, 910_000_000], chunk_tokens=[1, 1],
                            end_ns=910_000_000, output_tokens=2)
        return RunResult([rec])

    r = sample_until_decided(draw, th.gate("long_context_ttft"), max_samples=400, thresholds=th)
    assert r.verdict.outcome == "fail" and r.samples.n == 5 and r.verdict.observed == 0.9


def test_proportion_draws_pool_until_decided(th: Thresholds) -> None:
    from pytest_perfgate import Proportion

    draws = []

    def draw() -> Proportion:
        draws.append(1)
        return Proportion(76, 100)  # 76% against a 70% minimum: decided once enough trials pooled

    r = sample_until_decided(draw, th.gate("acceptance"), thresholds=th, max_draws=10)
    assert r.verdict.outcome == "pass" and r.stopped_by == "decided" and 1 < len(draws) < 10
    assert r.verdict.n == 100 * len(draws)
    r = sample_until_decided(lambda: Proportion(70, 100), th.gate("acceptance"), thresholds=th, max_draws=3)
    assert r.verdict.outcome == "inconclusive" and r.looks == 3 and r.verdict.n == 300
