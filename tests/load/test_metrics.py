"""Derivations of METRICS.md on hand-made records (scripted clock, integer nanoseconds)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load import metrics as m
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.verdicts.samples import ARRIVAL, Proportion, SampleError, Samples

MS = 1_000_000


def rec(i: int, sent: int, chunks: list[int], tokens: list[int] | None = None, out: int | None = None,
        sched: int | None = None, error: str | None = None, warmup: bool = False) -> RequestRecord:
    toks = tokens if tokens is not None else [1] * len(chunks)
    return RequestRecord(index=i, scheduled_ns=sched, sent_ns=sent, chunk_ns=chunks, chunk_tokens=toks,
                         end_ns=chunks[-1] + 1000 if chunks else None,
                         output_tokens=out if out is not None else sum(toks), error=error, warmup=warmup)


def test_per_request_definitions() -> None:
    r = rec(0, 1000, [1000 + 50 * MS, 1000 + 60 * MS, 1000 + 75 * MS, 1000 + 80 * MS], sched=400)
    assert m.ttft_ns(r) == 50 * MS
    assert m.e2e_ns(r) == 80 * MS
    assert m.itl_ns(r) == [10 * MS, 15 * MS, 5 * MS]
    assert m.e2e_ns(r) - m.ttft_ns(r) == sum(m.itl_ns(r))  # type: ignore[operator]
    assert m.tpot_ns(r) == pytest.approx(30 * MS / 3)
    assert m.decode_rate(r) == pytest.approx(3 / 0.030)
    assert m.queue_ns(r) == 600


def test_latency_minus_ttft_equals_sum_itl_exactly() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        sent = int(rng.integers(0, 10**15))
        chunks = list(np.cumsum(rng.integers(1, 10**9, size=int(rng.integers(1, 50)))) + sent)
        r = rec(0, sent, [int(c) for c in chunks])
        assert m.e2e_ns(r) - m.ttft_ns(r) == sum(m.itl_ns(r))  # type: ignore[operator]


def test_tpot_uses_server_token_count_and_multi_token_chunks() -> None:
    # speculative decoding: 3 chunks carrying 1, 3, 2 tokens; server says 6
    r = rec(0, 0, [10 * MS, 20 * MS, 30 * MS], tokens=[1, 3, 2])
    assert m.tpot_ns(r) == pytest.approx(20 * MS / 5)
    gaps, toks = m.itls([r])
    assert gaps == [10 * MS, 10 * MS] and toks == [3, 2]


@pytest.mark.parametrize("n_out", [0, 1])
def test_tpot_undefined_when_at_most_one_token(n_out: int) -> None:
    r = rec(0, 0, [10 * MS], tokens=[1], out=n_out)
    assert m.tpot_ns(r) is None and m.decode_rate(r) is None
    ok = rec(1, 0, [10 * MS, 20 * MS])
    ex = m.tpots([r, ok])
    assert ex.values == [10 * MS] and ex.excluded == 1 and "<= 1 output token" in ex.reason
    res = RunResult([r, ok])
    s = res.perfgate_data("tpot")
    assert isinstance(s, Samples) and s.n == 1 and s.notes and "TPOT undefined" in s.notes[0]
    with pytest.raises(SampleError, match="tpot: undefined for every request"):
        RunResult([r]).perfgate_data("tpot")


def test_warmup_and_failures_excluded() -> None:
    w = rec(0, 0, [999 * MS, 1000 * MS], warmup=True)
    bad = rec(1, 0, [], error="HTTP 500: boom")
    good = rec(2, 0, [5 * MS, 6 * MS])
    res = RunResult([w, bad, good])
    ttft = res.perfgate_data("ttft")
    assert isinstance(ttft, Samples)
    assert ttft.values.tolist() == [0.005]
    er = res.perfgate_data("error_rate")
    assert er == Proportion(1, 2, label="error_rate", cluster_successes=(1, 0), cluster_trials=(1, 1),
                            cluster_unit=ARRIVAL)  # one cluster per request in send order: dependence
    assert res.errors() == {"HTTP 500": 1}


def test_no_successful_requests_names_the_causes() -> None:
    recs = [rec(i, 0, [], error="connection refused: 127.0.0.1:1") for i in range(5)]
    with pytest.raises(SampleError, match=r"ttft: no successful requests: 5 x connection refused"):
        RunResult(recs).perfgate_data("time_to_first_token")
    with pytest.raises(SampleError, match="unknown metric"):
        RunResult(recs).perfgate_data("parsecs")


def test_run_throughputs_and_goodput() -> None:
    t0 = 1_000 * MS  # sent_ns == 0 means "never sent"
    a = rec(0, t0, [t0 + 10 * MS, t0 + 20 * MS], out=2)
    a.end_ns = t0 + 20 * MS
    b = rec(1, t0 + 5 * MS, [t0 + 100 * MS, t0 + 200 * MS, t0 + 205 * MS], out=3)
    b.end_ns = t0 + 205 * MS
    recs = [a, b]
    assert m.run_span_ns(recs) == (t0, t0 + 205 * MS)
    assert m.output_throughput(recs) == pytest.approx(5 / 0.205)
    assert m.request_throughput(recs) == pytest.approx(2 / 0.205)
    assert m.goodput(recs, {"ttft": 0.05}) == pytest.approx(1 / 0.205)
    assert m.goodput(recs, {"ttft": 0.5, "tpot": 0.2, "e2e": 1}) == pytest.approx(2 / 0.205)
    res = RunResult(recs, config=LoadConfig(mode="concurrency", concurrency=2), slos={"ttft": 0.05})
    g = res.perfgate_data("goodput")
    assert isinstance(g, Samples) and g.n == 1 and g.values[0] == pytest.approx(1 / 0.205)
    with pytest.raises(SampleError, match="needs SLO"):
        RunResult(recs).perfgate_data("goodput")


def test_sequential_throughput_is_a_ratio_of_sums() -> None:
    a = rec(0, 0, [10 * MS, 20 * MS], out=2)
    a.end_ns = 20 * MS
    b = rec(1, 30 * MS, [40 * MS, 50 * MS, 70 * MS], out=3)
    b.end_ns = 70 * MS
    s = RunResult([a, b], config=LoadConfig()).perfgate_data("output_throughput")
    assert isinstance(s, Samples) and s.denominators is not None
    assert s.unit.name == "tok/s"
    assert float(s.values.sum() / s.denominators.sum()) == pytest.approx(5 / 0.060)


def test_counter_metrics() -> None:
    before = {m.ACCEPTED: 10.0, m.DRAFT_TOKENS: 30.0, m.DRAFTS: 10.0, m.PER_POS + '{position="0"}': 8.0,
              m.PER_POS + '{position="1"}': 2.0, m.PREFIX_HITS: 0.0, m.PREFIX_QUERIES: 100.0,
              m.KV_USAGE: 0.0}
    after = {m.ACCEPTED: 70.0, m.DRAFT_TOKENS: 120.0, m.DRAFTS: 40.0, m.PER_POS + '{position="0"}': 32.0,
             m.PER_POS + '{position="1"}': 38.0, m.PREFIX_HITS: 300.0, m.PREFIX_QUERIES: 500.0,
             m.KV_USAGE: 0.25}
    res = RunResult([rec(0, 0, [MS, 2 * MS])], counters_before=before, counters_after=after)
    acc = res.perfgate_data("acceptance_rate")
    assert isinstance(acc, Proportion) and (acc.successes, acc.trials) == (60, 90)
    assert dict(acc.extra) == {"position 0": pytest.approx(24 / 30), "position 1": pytest.approx(36 / 30)}
    length = res.perfgate_data("acceptance_length")
    assert isinstance(length, Samples) and length.values[0] == pytest.approx(1 + 60 / 30)
    hit = res.perfgate_data("prefix_cache_hit_rate")
    assert isinstance(hit, Proportion) and (hit.successes, hit.trials) == (300, 400)
    kv = res.perfgate_data("kv_cache_usage")
    assert isinstance(kv, Samples) and kv.values[0] == pytest.approx(0.25)
    none = RunResult([rec(0, 0, [MS])])
    with pytest.raises(SampleError, match="no counters"):
        none.perfgate_data("acceptance_rate")
    no_spec = RunResult([rec(0, 0, [MS])], counters_before={m.KV_USAGE: 0}, counters_after={m.KV_USAGE: 0})
    with pytest.raises(SampleError, match="speculative"):
        no_spec.perfgate_data("acceptance_rate")


def test_summary_and_json_roundtrip() -> None:
    recs = [rec(i, 0, [(10 + i) * MS, (20 + i) * MS], sched=0) for i in range(10)]
    res = RunResult(recs, config=LoadConfig(num_requests=10))
    s = res.summary()
    assert s["ttft"]["p50"] == pytest.approx(0.014) and s["ttft"]["n"] == 10  # the gated order statistic (inverted CDF), not linear interpolation
    d = json.loads(json.dumps(res.to_dict()))
    assert all("prompt" not in r for r in d["records"])
    back = RunResult.from_dict(d)
    assert back.summary()["ttft"] == s["ttft"]


def test_load_config_validation() -> None:
    from pytest_perfgate.load.schedule import LoadConfigError, send_offsets_ns

    with pytest.raises(LoadConfigError, match="rate"):
        LoadConfig(mode="poisson")
    with pytest.raises(LoadConfigError, match="unknown"):
        LoadConfig(mode="bursty")  # type: ignore[arg-type]
    cfg = LoadConfig(mode="gamma", rate=100.0, burstiness=0.5, num_requests=2000, seed=1)
    off = send_offsets_ns(cfg)
    assert off is not None and off[0] == 0 and len(off) == 2000 and np.all(np.diff(off) >= 0)
    assert np.diff(off).mean() == pytest.approx(1e7, rel=0.1)
    assert np.array_equal(off, send_offsets_ns(cfg))  # type: ignore[arg-type]
    assert send_offsets_ns(LoadConfig()) is None


def test_itl_array_is_itls_gaps_in_numpy() -> None:
    from pytest_perfgate.contract import RequestRecord
    from pytest_perfgate.load import metrics as mm

    recs = [RequestRecord(index=0, sent_ns=0, chunk_ns=[5, 9, 20]), RequestRecord(index=1, sent_ns=1, chunk_ns=[7]),
            RequestRecord(index=2, sent_ns=2, chunk_ns=[]), RequestRecord(index=3, sent_ns=3, chunk_ns=[8, 8, 30, 31]),
            RequestRecord(index=4, sent_ns=4, chunk_ns=[10, 50], error="HTTP 500"),
            RequestRecord(index=5, sent_ns=5, chunk_ns=[1, 2], warmup=True), RequestRecord(index=6, sent_ns=6, chunk_ns=[3, 4])]
    assert mm.itl_array(recs).tolist() == mm.itls(recs)[0] == [4, 11, 0, 22, 1, 1]
    assert mm.itl_array(recs[1:3]).tolist() == [] and mm.itl_array([]).tolist() == []
    flat, starts, lens = mm.chunk_times(mm.successful(recs))
    assert flat.tolist() == [5, 9, 20, 7, 8, 8, 30, 31, 3, 4] and starts.tolist() == [0, 3, 4, 8] and lens.tolist() == [3, 1, 4, 2]
