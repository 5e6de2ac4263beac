"""The capacity gate kind and the bounded goodput gate of thresholds.toml, decided through the
normal evaluation path (``evaluate`` / ``perfgate.check``): parsing and its errors, the verdict
(level, SLO margins, knee, curve), its equivalence with the capacity module's decision on seeded
M/M/1 runs as records, and the goodput gate's boundary and power (1,000 seeded trials each)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from pytest_perfgate.config import ConfigError, parse_thresholds
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.capacity import capacity_gate, level_of
from pytest_perfgate.load.gates import terms_of
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.sweep import Sweep
from pytest_perfgate.verdicts.samples import SampleError
from pytest_perfgate.verdicts.verdict import evaluate


def mm1(rng: np.random.Generator, n: int, rate: float, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """(arrival times, sojourn times) of one M/M/1 FCFS run from empty (Lindley recursion)."""
    gaps = rng.exponential(1 / rate, n)
    gaps[0] = 0.0
    serv = rng.exponential(1 / mu, n)
    soj = np.empty(n)
    w = 0.0
    for i in range(n):
        if i:
            w = max(0.0, w + serv[i - 1] - gaps[i])
        soj[i] = w + serv[i]
    return np.cumsum(gaps), soj

C = 0.95
MS = 1_000_000


def _th(gates: Mapping[str, Mapping[str, object]]):  # type: ignore[no-untyped-def]
    doc = {"phases": {"phase1": {}}, "gates": gates}
    return parse_thresholds(doc, Path("thresholds.toml"))


CAPACITY: dict[str, object] = {"phase": "phase1", "metric": "request_throughput", "statistic": "sustained", "min": "2 req/s",
            "slo": {"ttft_p99": "2 s", "tpot_p99": "100 ms"}}


def test_a_capacity_gate_parses_its_slo_terms() -> None:
    g = _th({"cap": CAPACITY}).gate("cap")
    assert g.statistic.kind == "sustained" and g.threshold is not None and g.threshold.base == 2.0
    assert g.slo == (("ttft", 0.99, 2.0), ("tpot", 0.99, 0.1))
    assert [t.name for t in terms_of(g)] == ["P99 TTFT", "P99 TPOT"]
    users = _th({"u": {**CAPACITY, "metric": "concurrency", "min": 8}}).gate("u")
    assert users.threshold is not None and users.threshold.base == 8


@pytest.mark.parametrize(("change", "match"), [
    ({"slo": None}, r"\[gates.cap\] slo: missing: a capacity gate"),
    ({"slo": {"ttft": "2 s"}}, r"slo.ttft: unknown SLO term: this gate's terms are METRIC_pNN"),
    ({"slo": {"ttft_p99": "2"}}, r"slo.ttft_p99 = '2': must be a time > 0"),
    ({"metric": "ttft", "min": "1 s"}, r"a capacity gate sustains a request rate"),
    ({"max": "2 req/s", "min": None}, r"use min"),
])
def test_capacity_gate_errors_name_the_key(change: dict[str, object], match: str) -> None:
    t = {k: v for k, v in {**CAPACITY, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=match):
        _th({"cap": t})


def test_slo_on_another_gate_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"only a capacity gate .* or a goodput gate takes slo"):
        _th({"x": {"phase": "phase1", "metric": "ttft", "statistic": "p99", "max": "1 s", "slo": {"ttft": "1 s"}}})


MEDIAN: dict[str, object] = {**CAPACITY, "slo": {"ttft_p50": "2 s", "tpot_p50": "100 ms"}}


def _run(sent_s: np.ndarray, ttft_s: np.ndarray, tpot_s: np.ndarray, n_out: int = 4) -> RunResult:
    recs = []
    for i, (t, a, b) in enumerate(zip(sent_s, ttft_s, tpot_s, strict=True)):
        t0 = int(t * 1e9) + 1
        first = t0 + int(a * 1e9)
        chunks = [first + int(k * b * 1e9) for k in range(n_out)]
        recs.append(RequestRecord(index=i, scheduled_ns=t0, sent_ns=t0, chunk_ns=chunks, chunk_tokens=[1] * n_out,
                                  end_ns=chunks[-1], output_tokens=n_out))
    return RunResult(records=recs)


def _sweep(rng: np.random.Generator, levels: list[float], capacity: float, n: int, mu: float | None = None) -> Sweep:
    """M/M/1 runs whose P99 TTFT capacity under 2 s is ``capacity`` req/s (or service rate ``mu``)."""
    mu = mu if mu is not None else capacity + math.log(100) / 2.0
    sw = Sweep("rate")
    for rate in levels:
        arr, soj = mm1(rng, n, rate, mu)
        tpot = rng.lognormal(math.log(0.06) - 2.326 * 0.3, 0.3, n)
        sw.results[rate] = _run(arr, soj, tpot)
    return sw


def test_the_gate_path_decides_as_the_capacity_module_on_seeded_queues() -> None:
    """Seeded M/M/1 runs as request records: evaluate(gate, sweep) gives capacity_gate's outcome and
    sustained level on every trial (so the boundary and power rates of tests/load/test_capacity.py,
    1,000 trials each, are this gate's), at the boundary and with 1.5x headroom (1,500 requests a
    level: too few for P99 power, which needs ~6,000; the equivalence is the point)."""
    gate = _th({"cap": MEDIAN}).gate("cap")
    rng = np.random.default_rng(41)
    outcomes = []
    for mu in (2.05, 2.4, 3.5):  # P50 TTFT at 2 req/s: 13.9 s (saturating), 1.73 s (near 2 s), 0.46 s
        for _ in range(4):
            sw = _sweep(rng, [1.0, 1.5, 2.0], 0.0, 600, mu=mu)
            v = evaluate(gate, sw)
            ref = capacity_gate([level_of(lv, sw.results[lv].records, terms_of(gate), C, True) for lv in sw.results],
                                target=2.0, c=C)
            assert v.outcome == ref.outcome
            assert (v.observed if math.isfinite(v.observed) else None) == ref.sustained
            outcomes.append((mu, v.outcome))
    assert {o for _, o in outcomes} >= {"pass", "fail"}
    print(f"gate path == capacity module on {len(outcomes)} seeded sweeps: {outcomes}")


def test_the_verdict_gives_level_margins_knee_and_curve() -> None:
    """Service rate 3.5 req/s: P50 TTFT ln 2 / (3.5 - R) holds at 1 and 2 req/s; 4 req/s saturates."""
    gate = _th({"cap": MEDIAN}).gate("cap")
    sw = _sweep(np.random.default_rng(3), [1.0, 2.0, 4.0], 0.0, 1500, mu=3.5)
    v = evaluate(gate, sw)
    assert v.outcome == "pass" and v.observed == 2.0 and v.lower == 2.0 and v.upper == 4.0
    assert "sustains 2 req/s" in v.note and "P50 TTFT margin" in v.note and "knee 2" in v.note
    assert v.details["sustained"] == 2.0 and v.details["knee"] == 2.0 and v.details["margin_s.P50 TTFT"] > 0
    assert [p["level"] for p in v.curve] == [1.0, 2.0, 4.0]
    assert v.curve[2]["decision"] == "fail" and v.curve[2]["saturated"].startswith("saturated")
    assert v.curve[0]["ttft_p99_s"] > 0 and v.curve[0]["achieved_req_s"] > 0
    d = v.to_dict()
    json.dumps(d, allow_nan=False)  # what decisions.json takes
    assert d["curve"][1]["p50_ttft_margin_s"] == pytest.approx(v.details["margin_s.P50 TTFT"])
    assert "gate cap:" in v.summary() and "sustained" in v.summary()


def test_a_capacity_gate_names_the_data_it_needs() -> None:
    gate = _th({"cap": CAPACITY}).gate("cap")
    with pytest.raises(SampleError, match="decided on a load sweep"):
        evaluate(gate, [1.0, 2.0])
    gate = _th({"cap": MEDIAN}).gate("cap")
    sw = _sweep(np.random.default_rng(1), [0.5, 1.0], 0.0, 300, mu=3.5)
    with pytest.raises(SampleError, match=r"target 2 req/s is not a level of the sweep \(0.5, 1\)"):
        evaluate(gate, sw)
    users = _th({"u": {**CAPACITY, "metric": "concurrency", "min": 2}}).gate("u")
    with pytest.raises(SampleError, match="takes a concurrency sweep, got a rate sweep"):
        evaluate(users, sw)


GOODPUT = {"phase": "phase1", "metric": "goodput", "statistic": "value", "slo": {"ttft": "200 ms"}}


def _goodput_run(rng: np.random.Generator, n: int, p: float) -> RunResult:
    sent = np.arange(n) * 0.1
    slow = rng.random(n) > p
    return _run(sent, np.where(slow, 0.3, 0.1), np.full(n, 0.01), n_out=2)


def test_bounded_goodput_gate_boundary_and_power() -> None:
    """Goodput = attainment x the run's request rate; min set at the true goodput (attainment 90%)
    passes <= 5% + 3 SE of 1,000 seeded runs; at attainment 99% vs a min at 80% it passes >= 90%."""
    n, trials = 80, 1000
    rng = np.random.default_rng(8)

    def rate_of(run: RunResult) -> float:
        from pytest_perfgate.load import metrics as m

        span = m.run_span_ns(run.records)
        assert span is not None
        return n / ((span[1] - span[0]) / 1e9)

    passed_boundary = passed_power = 0
    for _ in range(trials):
        run = _goodput_run(rng, n, 0.9)
        g = _th({"g": {**GOODPUT, "min": f"{0.9 * rate_of(run)} req/s"}}).gate("g")
        passed_boundary += evaluate(g, run).outcome == "pass"
    for _ in range(200):
        run = _goodput_run(rng, n, 0.99)
        g = _th({"g": {**GOODPUT, "min": f"{0.8 * rate_of(run)} req/s"}}).gate("g")
        passed_power += evaluate(g, run).outcome == "pass"
    limit = 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)
    print(f"goodput gate: boundary passes {passed_boundary / trials:.3f} of {trials} (limit {limit:.4f}); "
          f"attainment 99% vs min at 80%: {passed_power / 200:.3f} of 200")
    assert passed_boundary / trials <= limit and passed_power / 200 >= 0.9


def test_goodput_verdict_reads_in_the_metric_unit() -> None:
    run = _goodput_run(np.random.default_rng(2), 80, 0.95)
    v = evaluate(_th({"g": {**GOODPUT, "min": "1 req/s"}}).gate("g"), run)
    assert v.unit == "req/s" and v.lower <= v.observed <= v.upper and v.n == 80
    assert "requests met ttft <= 200 ms" in v.note and v.method.startswith("good requests / seconds, a ratio of sums")


def test_a_server_saturated_from_the_first_level_says_so() -> None:
    gate = _th({"cap": {**MEDIAN, "min": "1 req/s"}}).gate("cap")
    v = evaluate(gate, _sweep(np.random.default_rng(9), [1.0, 2.0], 0.0, 300, mu=0.6))
    assert v.outcome == "fail" and "knee below the first level (1: saturated)" in v.note
    assert "sustains no level tried" in v.note and "saturated" in v.note
