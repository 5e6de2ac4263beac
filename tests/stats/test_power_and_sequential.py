"""Sequential budgets (a pass is reachable, the false-pass rate holds), power per gate kind (a clearly
good system passes in >= 90% of trials within the suite's budgets, a clearly bad one fails in a
handful of samples), phase outcomes, one percentile definition, and speed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special as spc
from simhelp import assert_rate

from pytest_perfgate import evaluate, make_proportion, make_samples, sample_until_decided
from pytest_perfgate.config import ConfigError, Thresholds, load_thresholds
from pytest_perfgate.store.decisions import phase_outcome, required_gates
from pytest_perfgate.verdicts import bounds as stats
from pytest_perfgate.verdicts.sequential import SequentialUsageError, plan_for

C = 0.95


# ---------------------------------------------------------------- sequential P99 (TTFT, max_samples = 500)


def _sequential_quantile(x: np.ndarray, thr: float, q: float, plan: object) -> np.ndarray:
    """The sequential rule of sample_until_decided for a ``max`` quantile gate, vectorised over rows:
    ("pass" | "fail" | "inconclusive", samples used) per trial."""
    over = np.cumsum(x >= thr, axis=1)
    under = np.cumsum(x <= thr, axis=1)
    out = np.full(x.shape[0], "inconclusive", dtype=object)
    used = np.full(x.shape[0], x.shape[1])
    open_ = np.ones(x.shape[0], dtype=bool)
    for n in plan.looks:  # type: ignore[attr-defined]
        fail = open_ & (spc.bdtr(under[:, n - 1], n, q) <= 1 - plan.c_fail)  # type: ignore[attr-defined]
        out[fail], used[fail] = "fail", n
        open_ &= ~fail
        if n in plan.pass_looks:  # type: ignore[attr-defined]
            ok = open_ & (spc.bdtr(over[:, n - 1], n, 1 - q) <= 1 - plan.c_pass)  # type: ignore[attr-defined]
            out[ok], used[ok] = "pass", n
            open_ &= ~ok
    return np.stack([out, used])


def _ttft(rng: np.random.Generator, shape: tuple[int, int], p99: float, sigma: float) -> np.ndarray:
    return p99 * np.exp(sigma * (rng.standard_normal(shape) - float(spc.ndtri(0.99))))


def test_ttft_p99_with_500_samples_is_passable_and_keeps_its_rate(th: Thresholds) -> None:
    gate = th.gate("ttft_p99")
    plan = plan_for(gate, C, 500)
    assert plan.pass_looks and plan.pass_looks[-1] == 500 and plan.first_pass <= 432
    rng = np.random.default_rng(11)
    trials = 2000
    at = _ttft(rng, (trials, 500), 0.150, 0.3)  # true P99 exactly at the 150 ms threshold
    out, _ = _sequential_quantile(at, 0.150, 0.99, plan)
    assert_rate("sequential P99, max_samples 500", float(np.mean(out == "pass")), trials)
    good = _ttft(rng, (trials, 500), 0.075, 0.3)  # clearly good: P99 at half the threshold
    out_g, used = _sequential_quantile(good, 0.150, 0.99, plan)
    print(f"POWER sequential P99 (true P99 half the threshold): {np.mean(out_g == 'pass'):.3f}, "
          f"median samples {np.median(used[out_g == 'pass'])}")
    assert np.mean(out_g == "pass") >= 0.9 and used[out_g == "pass"].max() <= 500
    for i in range(3):  # the public path decides the same, at the same sample count
        it = iter(good[i])
        r = sample_until_decided(lambda it=it: float(next(it)), gate, thresholds=th, unit="s")
        assert (r.verdict.outcome, r.samples.n) == (out_g[i], used[i])
    bad = iter(_ttft(rng, (1, 100), 0.300, 0.3)[0])
    r = sample_until_decided(lambda: float(next(bad)), gate, thresholds=th, unit="s")
    assert r.verdict.outcome == "fail" and r.samples.n == 5


def test_an_earlier_first_look_keeps_both_error_rates(th: Thresholds) -> None:
    """``first_look`` (the embedded phase-1 suite's TTFT gate looks first at its 4-request run): the
    Bonferroni split holds for any schedule fixed before the data, so at the boundary neither a
    false pass nor a false fail exceeds 1 - c, and a clear failure stops at the first draw."""
    gate = th.gate("ttft_p99")
    plan = plan_for(gate, C, 300, first_look=4)
    assert plan.looks[0] == 4 and plan.pass_looks == (300,)
    rng = np.random.default_rng(12)
    trials = 4000
    at = _ttft(rng, (trials, 300), 0.150, 0.3)  # true P99 exactly at the 150 ms threshold
    out, _ = _sequential_quantile(at, 0.150, 0.99, plan)
    assert_rate("sequential P99 from n=4: false pass", float(np.mean(out == "pass")), trials)
    assert_rate("sequential P99 from n=4: false fail", float(np.mean(out == "fail")), trials)
    slow = _ttft(rng, (1, 300), 1.0, 0.3)[0]  # clearly slow: every sample above 150 ms
    draws = iter([slow[:4], *([v] for v in slow[4:])])  # the first draw is a run of 4 requests
    r = sample_until_decided(lambda: next(draws), gate, thresholds=th, unit="s", max_samples=300, first_look=4)
    assert r.verdict.outcome == "fail" and r.samples.n == 4 and r.looks == 1
    with pytest.raises(ValueError, match="first look"):
        plan_for(gate, C, 300, first_look=0)


def test_unreachable_budget_is_a_usage_error_naming_the_gate(tmp_path: Path, th: Thresholds) -> None:
    text = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "stats.toml").read_text()
    p = tmp_path / "thresholds.toml"
    p.write_text(text.replace("max_samples = 500", "max_samples = 200"))
    with pytest.raises(ConfigError, match=r"gates.ttft_p99.*not reachable within max_samples = 200.*>= 299"):
        load_thresholds(p)
    with pytest.raises(SequentialUsageError, match="gate ttft_p99: a pass is not reachable within max_samples = 40"):
        sample_until_decided(lambda: 0.01, th.gate("ttft_p99"), thresholds=th, max_samples=40)


# ---------------------------------------------------------------- power per gate kind


def test_power_quantile(th: Thresholds) -> None:
    rng = np.random.default_rng(21)
    good = [evaluate(th.gate("ttft_p50"), make_samples(rng.lognormal(math.log(0.1), 0.3, 30), "s"), thresholds=th)
            for _ in range(100)]
    assert np.mean([v.outcome == "pass" for v in good]) >= 0.9
    bad = evaluate(th.gate("ttft_p50"), make_samples(rng.lognormal(math.log(0.3), 0.3, 5), "s"), thresholds=th)
    assert bad.outcome == "fail"


def _requests(rng: np.random.Generator, g: int, rho: float, p: float) -> tuple[np.ndarray, np.ndarray]:
    ab = 1 / rho - 1
    m = rng.integers(5, 31, g)
    return rng.binomial(m, rng.beta(p * ab, (1 - p) * ab, g)), m


def test_power_clustered_acceptance_sequential(th: Thresholds) -> None:
    """True acceptance 80% (correlation 0.17) against a 70% minimum: the suite's path (16 requests a
    draw, <= 6 draws) passes; 50% fails at the first draw."""
    rng = np.random.default_rng(22)
    c_look = 1 - (1 - C) / 6
    trials, passes, draws_used = 1000, 0, []
    for _ in range(trials):
        s_all, m_all = np.empty(0), np.empty(0)
        for d in range(1, 7):
            s, m = _requests(rng, 16, 0.17, 0.8)
            s_all, m_all = np.concatenate([s_all, s]), np.concatenate([m_all, m])
            b = stats.cluster_proportion_bounds(s_all, m_all, c_look)
            if b.lower > 0.7 or b.upper < 0.7:
                passes += b.lower > 0.7
                draws_used.append(d)
                break
    assert passes / trials >= 0.9
    r = sample_until_decided(lambda: make_proportion(*_requests(rng, 16, 0.17, 0.5)), th.gate("acceptance"),
                             thresholds=th, max_draws=6)
    assert r.verdict.outcome == "fail" and r.looks <= 2 and "request clusters" in r.verdict.note


def test_power_mean(th: Thresholds) -> None:
    rng = np.random.default_rng(23)
    outs = [evaluate(th.gate("tpot_mean"), make_samples(rng.gamma(16, 0.030 / 16, 30), "s"), thresholds=th).outcome
            for _ in range(100)]
    assert np.mean([o == "pass" for o in outs]) >= 0.9
    v = evaluate(th.gate("tpot_mean"), make_samples(rng.gamma(16, 0.100 / 16, 5), "s"), thresholds=th)
    assert v.outcome == "fail"


def _run(rng: np.random.Generator, n: int, rate: float, cv: float) -> tuple[np.ndarray, np.ndarray]:
    s = math.sqrt(math.log(1 + cv * cv))
    return np.full(n, 256.0), 256 / rate * rng.lognormal(-s * s / 2, s, n)


def test_power_throughput_ratio(th: Thresholds) -> None:
    """Speculation 20% faster (ratio 1.2 against a 0.8 minimum): 4 requests a side (the embedded suite)
    and three interleaved runs a side with a 2% run-to-run effect (the GPU suite) both pass."""
    rng = np.random.default_rng(24)
    per_request = [stats.ratio_of_sums_compare("ratio", *_run(rng, 4, 120, 0.05), *_run(rng, 4, 100, 0.05), C).lower > 0.8
                   for _ in range(1000)]
    assert np.mean(per_request) >= 0.9
    runs = []
    for _ in range(1000):
        a = np.asarray([np.divide(*[v.sum() for v in _run(rng, 100, 120 * rng.lognormal(0, 0.02), 0.05)]) for _ in range(3)])
        b = np.asarray([np.divide(*[v.sum() for v in _run(rng, 100, 100 * rng.lognormal(0, 0.02), 0.05)]) for _ in range(3)])
        runs.append(stats.runs_compare("ratio", a, b, C).lower > 0.8)
    assert np.mean(runs) >= 0.9
    a, b = _run(rng, 4, 50, 0.05), _run(rng, 4, 100, 0.05)  # speculation halves throughput: fails
    v = evaluate(th.gate("tput_ratio"), (make_samples(a[0], "tok/s", denominators=a[1]),
                                         make_samples(b[0], "tok/s", denominators=b[1])), thresholds=th)
    assert v.outcome == "fail"


def test_power_quantile_comparisons(th: Thresholds) -> None:
    rng = np.random.default_rng(25)
    hit = lambda n: make_samples(rng.lognormal(math.log(0.010), 0.1, n), "s")  # noqa: E731
    cold = lambda n: make_samples(rng.lognormal(math.log(0.100), 0.1, n), "s")  # noqa: E731
    outs = [evaluate(th.gate("p50_reduction"), (hit(12), cold(12)), thresholds=th).outcome for _ in range(50)]
    assert np.mean([o == "pass" for o in outs]) >= 0.9  # 90% lower against an 80% minimum, 12 requests a side
    assert evaluate(th.gate("p50_reduction"), (cold(12), cold(12)), thresholds=th).outcome == "fail"
    one = lambda m, n: make_samples(rng.lognormal(math.log(m), 0.05, n), "s")  # noqa: E731
    outs = [evaluate(th.gate("cross_node"), (one(0.105, 500), one(0.100, 500)), thresholds=th).outcome for _ in range(20)]
    assert np.mean([o == "pass" for o in outs]) >= 0.9  # P99 5 ms apart against a 20 ms maximum
    # failing a P99 difference needs an upper bound of the reference's P99: >= 368 samples at alpha/2
    assert evaluate(th.gate("cross_node"), (one(0.200, 10), one(0.100, 10)), thresholds=th).outcome == "inconclusive"
    assert evaluate(th.gate("cross_node"), (one(0.200, 400), one(0.100, 400)), thresholds=th).outcome == "fail"


# ---------------------------------------------------------------- phase outcomes


def _v(gate: str, outcome: str, fallbacks: tuple[str, ...] = ()) -> dict[str, object]:
    return {"gate": gate, "outcome": outcome, "fallbacks": list(fallbacks)}


def test_phase_outcomes(th: Thresholds) -> None:
    req = required_gates(th, "phase1")
    assert "ttft_p99" in req and "tpot_p50_recorded" not in req and "p99_reduction" not in req  # a plan's gate
    passing = [_v(g, "pass") for g in req]
    assert phase_outcome(passing, [], req) == "passed"
    assert phase_outcome(passing[1:], [], req) == "incomplete"  # a threshold gate not evaluated (-k)
    assert phase_outcome([_v("tpot_p50_recorded", "recorded")], [], req) == "incomplete"
    assert phase_outcome([_v("tpot_p50_recorded", "recorded")], [], []) == "incomplete"  # record-only never passes
    two = [_v("ttft_p99", "fail", ("tiered_kv_cache",)), _v("acceptance", "fail", ("switch_draft_model",)),
           *[_v(g, "pass") for g in req if g not in ("ttft_p99", "acceptance")]]
    one_ok = [{"fallback": "tiered_kv_cache", "outcome": "passed"}]
    both_ok = [*one_ok, {"fallback": "switch_draft_model", "outcome": "passed"}]
    assert phase_outcome(two, one_ok, req) == "failed"  # one of two triggered plans validated
    assert phase_outcome(two, both_ok, req) == "fallback"
    assert phase_outcome([*passing[:-1], _v(req[-1], "inconclusive")], [], req) == "inconclusive"
    assert phase_outcome([*passing, _v("x", "error")], [], req) == "failed"


# ---------------------------------------------------------------- wording


def test_needed_is_conservative_and_will_not_decide_is_gone(th: Thresholds) -> None:
    v = evaluate(th.gate("acceptance"), make_proportion(72, 100), thresholds=th)
    assert v.outcome == "inconclusive" and v.needed
    x = v.needed
    # at the predicted count, the observed rate rounded against the pass does decide it
    b = stats.clopper_pearson(math.floor(0.72 * x), x, C)
    assert b.lower > 0.7
    assert "assumes independent trials" in v.summary() and "need >=" in v.summary()
    w = evaluate(th.gate("tput_ratio"), (make_samples([256.0] * 4, "tok/s", denominators=[3.2, 3.3, 3.1, 3.25]),
                                         make_samples([256.0] * 4, "tok/s", denominators=[2.6, 2.5, 2.7, 2.55])),
                 thresholds=th)
    assert "will not decide" not in w.summary()


def test_summary_percentile_is_the_gated_order_statistic(th: Thresholds) -> None:
    from pytest_perfgate.contract import RequestRecord
    from pytest_perfgate.load.result import RunResult

    rng = np.random.default_rng(26)
    ttfts = (rng.lognormal(math.log(0.05), 0.4, 37) * 1e9).astype(int)
    recs = [RequestRecord(index=i, sent_ns=0, chunk_ns=[int(t), int(t) + 1000], chunk_tokens=[1, 1], end_ns=int(t) + 1000,
                          output_tokens=2) for i, t in enumerate(ttfts)]
    run = RunResult(recs)
    for q, gate in ((0.5, "ttft_p50"), (0.99, "ttft_p99")):
        v = evaluate(th.gate(gate), run, thresholds=th)
        assert run.summary()["ttft"][f"p{round(q * 100)}"] == v.observed


def test_per_request_clusters_from_counter_snapshots() -> None:
    from pytest_perfgate.load import metrics as m
    from pytest_perfgate.load.result import RunResult

    snaps = [{m.ACCEPTED: a, m.DRAFT_TOKENS: d} for a, d in ((3, 5), (10, 15), (10, 20))]
    run = RunResult([], counters_before={m.ACCEPTED: 0, m.DRAFT_TOKENS: 0}, counters_after=snaps[-1],
                    request_counters=snaps)
    p = run.perfgate_data("acceptance_rate")
    assert p.cluster_successes == (3, 7, 0) and p.cluster_trials == (5, 10, 5)  # type: ignore[union-attr]
    p2 = RunResult([], counters_before={m.ACCEPTED: 0, m.DRAFT_TOKENS: 0}, counters_after=snaps[-1]).perfgate_data(
        "acceptance_rate")
    assert not p2.clustered and (p2.successes, p2.trials) == (10, 20)  # type: ignore[union-attr]


# ---------------------------------------------------------------- big data (the speed: benchmarks/bench_stats.py)


def test_one_million_samples_and_ten_thousand_clusters(th: Thresholds) -> None:
    """What a verdict on big data says; how long it takes is printed by benchmarks/bench_stats.py
    (targets 100 ms each, docs/statistics.md), a figure of the machine rather than a test's."""
    x = make_samples(np.random.default_rng(1).exponential(0.05, 1_000_000), "s")
    big = evaluate(th.gate("ttft_p99"), x, thresholds=th)
    assert big.n == 1_000_000 and math.isfinite(big.upper) and big.lower <= big.observed <= big.upper
    rng = np.random.default_rng(2)
    m = rng.integers(5, 31, 10_000)
    s = rng.binomial(m, 0.75)
    v = evaluate(th.gate("acceptance"), make_proportion(s, m), thresholds=th)
    assert v.outcome == "pass" and "10000 request clusters" in v.note
