"""One seeded simulation per row of issue 9's table, at the boundary (the truth exactly on the
threshold): the false-pass rate stays <= 1 - c + 3 standard errors.

Each row runs the verdict's own decision rule (the ``stats`` functions that ``evaluate`` calls) over
>= 1,000 trials, and checks on a subset that ``evaluate`` (the public API) decides exactly the same.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from simhelp import assert_rate

from pytest_perfgate import evaluate, make_proportion, make_samples
from pytest_perfgate.config import Thresholds
from pytest_perfgate.verdicts import bounds as stats
from pytest_perfgate.verdicts.acceptance import accepted_prefix_bounds

C = 0.95
TRIALS = 1000


def _decide_min(b: stats.Bounds, thr: float) -> str:
    return "pass" if b.lower > thr else "fail" if b.upper < thr else "inconclusive"


def _decide_max(b: stats.Bounds, thr: float) -> str:
    return "pass" if b.upper < thr else "fail" if b.lower > thr else "inconclusive"


# ---------------------------------------------------------------- a percentile or mean from ONE sample


@pytest.mark.parametrize("gate", ["ttft_p99", "ttft_p50", "tpot_mean"])
def test_one_sample_never_passes(th: Thresholds, gate: str) -> None:
    g = th.gate(gate)
    thr = g.threshold.base if g.threshold else 0.0
    rng = np.random.default_rng(1)
    xs = thr * rng.lognormal(0, 0.5, TRIALS)  # the truth straddles the threshold
    passes = 0
    for x in xs[:200]:  # the outcome depends only on x vs the threshold: 200 public-API calls cover it
        v = evaluate(g, make_samples([x], "s"), thresholds=th)
        passes += v.outcome == "pass"
        assert v.outcome in ("inconclusive", "fail") and (v.outcome == "fail" or v.needed)
    for x in xs:
        if g.statistic.kind == "quantile":
            assert g.statistic.q is not None
            out, _ = stats.quantile_decision(np.array([x]), g.statistic.q, C, "max", thr)
        else:
            out = _decide_max(stats.mean_bounds(np.array([x]), C, "max"), thr)
        passes += out == "pass"
    assert_rate(f"{gate} from one sample", passes / (TRIALS + 200), TRIALS + 200)
    assert passes == 0


# ---------------------------------------------------------------- a comparison where one run has one request


def test_compare_with_one_request_in_a_run_never_passes(th: Thresholds) -> None:
    rng = np.random.default_rng(2)
    passes = 0
    g = th.gate("tput_ratio")
    for i in range(TRIALS):
        den_a = 256 / (80 * rng.lognormal(0, 0.05, 1))  # one request, true ratio 0.8 exactly
        den_b = 256 / (100 * rng.lognormal(0, 0.05, 4))
        b = stats.ratio_of_sums_compare("ratio", np.full(1, 256.0), den_a, np.full(4, 256.0), den_b, C)
        out = _decide_min(b, 0.8)
        if i < 50:
            v = evaluate(g, (make_samples([256.0], "tok/s", denominators=den_a),
                             make_samples([256.0] * 4, "tok/s", denominators=den_b)), thresholds=th)
            assert v.outcome == out
        passes += out == "pass"
    assert_rate("compare, one request in a run", passes / TRIALS, TRIALS)
    v = evaluate(th.gate("p50_reduction"), (make_samples([10.0], "ms"), make_samples([100.0] * 4, "ms")), thresholds=th)
    assert v.outcome == "inconclusive" and "too few samples" in v.note


# ---------------------------------------------------------------- clustered acceptance (draft_acceptance)


def _requests(rng: np.random.Generator, g: int, rho: float, p: float = 0.7) -> tuple[np.ndarray, np.ndarray]:
    """g requests, 5-30 drafted tokens each, per-request rate ~ Beta(mean p, intra-request correlation rho)."""
    ab = 1 / rho - 1
    m = rng.integers(5, 31, g)
    return rng.binomial(m, rng.beta(p * ab, (1 - p) * ab, g)), m


@pytest.mark.parametrize("rho", [0.05, 0.17, 0.33])
@pytest.mark.parametrize("g", [20, 100])
def test_clustered_acceptance_false_pass(th: Thresholds, rho: float, g: int) -> None:
    rng = np.random.default_rng(int(rho * 100) + g)
    passes = 0
    gate = th.gate("acceptance")
    for i in range(TRIALS):
        s, m = _requests(rng, g, rho)
        # the acceptance gate's bound (verdicts/acceptance.py: the accepted-prefix, test-inverted one)
        out = _decide_min(accepted_prefix_bounds(s.astype(float), m.astype(float), C), 0.7)
        if i < 30:
            assert evaluate(gate, make_proportion(s, m), thresholds=th).outcome == out
        passes += out == "pass"
    assert_rate(f"acceptance clustered, {g} requests, correlation {rho}", passes / TRIALS, TRIALS)


@pytest.mark.parametrize("rho", [0.17, 0.33])
def test_sequential_acceptance_path_false_pass(th: Thresholds, rho: float) -> None:
    """The phase-1 suite's path: 16 requests a draw, <= 6 draws, pooled by request, 1 - c split over 6 looks."""
    from pytest_perfgate import sample_until_decided

    rng = np.random.default_rng(17 + int(rho * 100))
    c_look = 1 - (1 - C) / 6
    gate = th.gate("acceptance")
    passes = 0
    for i in range(TRIALS):
        draws = [_requests(rng, 16, rho) for _ in range(6)]
        out = "inconclusive"
        for d in range(1, 7):
            s = np.concatenate([x[0] for x in draws[:d]]).astype(float)
            m = np.concatenate([x[1] for x in draws[:d]]).astype(float)
            out = _decide_min(stats.cluster_proportion_bounds(s, m, c_look), 0.7)
            if out != "inconclusive":
                break
        if i < 8:  # the public path decides the same
            it = iter(draws)
            r = sample_until_decided(lambda it=it: make_proportion(*next(it)), gate, thresholds=th, max_draws=6)
            assert r.verdict.outcome == out
        passes += out == "pass"
    assert_rate(f"sequential acceptance, 16 a draw, <= 6 draws, correlation {rho}", passes / TRIALS, TRIALS)


# ---------------------------------------------------------------- throughput ratio (spec_throughput_ratio)


def _run(rng: np.random.Generator, n: int, rate: float, cv: float) -> tuple[np.ndarray, np.ndarray]:
    """n sequential requests of 256 tokens; busy seconds with mean 256 / rate, lognormal CV ``cv``."""
    s = math.sqrt(math.log(1 + cv * cv))
    return np.full(n, 256.0), 256 / rate * rng.lognormal(-s * s / 2, s, n)


@pytest.mark.parametrize("cv", [0.05, 0.15])
def test_throughput_ratio_four_requests_a_side(th: Thresholds, cv: float) -> None:
    rng = np.random.default_rng(int(cv * 100))
    passes = 0
    trials = 2000
    for i in range(trials):
        a, b = _run(rng, 4, 80.0, cv), _run(rng, 4, 100.0, cv)  # true ratio of throughputs 0.8
        out = _decide_min(stats.ratio_of_sums_compare("ratio", a[0], a[1], b[0], b[1], C), 0.8)
        if i < 30:
            v = evaluate(th.gate("tput_ratio"), (make_samples(a[0], "tok/s", denominators=a[1]),
                                                 make_samples(b[0], "tok/s", denominators=b[1])), thresholds=th)
            assert v.outcome == out
        passes += out == "pass"
    assert_rate(f"throughput ratio, 4 requests a side, CV {cv}", passes / trials, trials)


@pytest.mark.parametrize("run_cv", [0.02, 0.05])
def test_throughput_ratio_with_run_to_run_effect_ab_ab(th: Thresholds, run_cv: float) -> None:
    """Each run's throughput carries its own factor (run-to-run CV); three interleaved runs a side,
    the run as the unit (the phase-1 default where the budget allows)."""
    from pytest_perfgate.contract import RequestRecord  # noqa: F401  (runs may be run results too)

    rng = np.random.default_rng(int(run_cv * 1000))
    trials = 2000
    passes = 0
    for i in range(trials):
        per_side = []
        for rate in (80.0, 100.0):
            vals = []
            sams = []
            for _ in range(3):
                num, den = _run(rng, 4, rate * rng.lognormal(0, run_cv), 0.05)
                vals.append(num.sum() / den.sum())
                sams.append(make_samples(num, "tok/s", denominators=den) if i < 20 else None)
            per_side.append((np.asarray(vals), sams))
        out = _decide_min(stats.runs_compare("ratio", per_side[0][0], per_side[1][0], C), 0.8)
        if i < 20:
            v = evaluate(th.gate("tput_ratio"), (per_side[0][1], per_side[1][1]), thresholds=th)
            assert v.outcome == out and "the run as the unit" in v.note
        passes += out == "pass"
    assert_rate(f"throughput ratio, 3 runs a side A B A B, run CV {run_cv}", passes / trials, trials)


# ---------------------------------------------------------------- quantile differences and reductions


def _side_bounds_matrix(x: np.ndarray, q: float, c: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-row order-statistic bounds (the rule of stats.quantile_bounds, vectorised over trials)."""
    n = x.shape[1]
    k_lo, k_hi = stats.quantile_ranks(n, q, c)
    xs = np.sort(x, axis=1)
    lo = xs[:, k_lo - 1] if k_lo is not None else np.full(x.shape[0], -np.inf)
    hi = xs[:, k_hi - 1] if k_hi is not None else np.full(x.shape[0], np.inf)
    return lo, hi


def _lognormal_p(rng: np.random.Generator, shape: tuple[int, int], pq: float, q: float, sigma: float) -> np.ndarray:
    """Lognormal samples whose true q-quantile is ``pq``."""
    from scipy.special import ndtri

    return pq * np.exp(sigma * (rng.standard_normal(shape) - float(ndtri(q))))


def _check_public(th: Thresholds, gate: str, a: np.ndarray, b: np.ndarray, outs: np.ndarray) -> None:
    for i in range(min(20, a.shape[0])):
        v = evaluate(th.gate(gate), (make_samples(a[i], "s"), make_samples(b[i], "s")), thresholds=th)
        assert v.outcome == outs[i], (i, v.summary())


@pytest.mark.parametrize("n", [50, 500])
def test_p99_difference(th: Thresholds, n: int) -> None:
    rng = np.random.default_rng(n)
    trials = 2000
    b = _lognormal_p(rng, (trials, n), 0.100, 0.99, 0.3)
    a = _lognormal_p(rng, (trials, n), 0.120, 0.99, 0.3)  # true P99 difference: 20 ms exactly
    c2 = 1 - (1 - C) / 2
    la, ha = _side_bounds_matrix(a, 0.99, c2)
    lb, hb = _side_bounds_matrix(b, 0.99, c2)
    upper = ha - lb
    lower = la - hb
    outs = np.where(upper < 0.020, "pass", np.where(lower > 0.020, "fail", "inconclusive"))
    _check_public(th, "cross_node", a, b, outs)
    assert_rate(f"P99 difference, n={n}", float(np.mean(outs == "pass")), trials)


@pytest.mark.parametrize("n", [4, 12, 50, 500])
@pytest.mark.parametrize("swap", [False, True])
def test_p99_reduction(th: Thresholds, n: int, swap: bool) -> None:
    """True P99 reduction exactly 40%; with ``swap`` 5% of the treatment's requests pay a page swap."""
    rng = np.random.default_rng(n + swap)
    trials = 1000
    b = _lognormal_p(rng, (trials, n), 0.300, 0.99, 0.3)
    if swap:  # mixture: base TTFT lognormal, 5% + a 40 ms swap; scale the mixture so its P99 = 180 ms
        base = np.exp(0.3 * rng.standard_normal((trials, n)))
        base = base + np.where(rng.random((trials, n)) < 0.05, 0.5, 0.0)
        ref = np.exp(0.3 * np.random.default_rng(0).standard_normal(2_000_000))
        ref = ref + np.where(np.random.default_rng(1).random(2_000_000) < 0.05, 0.5, 0.0)
        a = base * (0.180 / float(np.quantile(ref, 0.99)))
    else:
        a = _lognormal_p(rng, (trials, n), 0.180, 0.99, 0.3)
    c2 = 1 - (1 - C) / 2
    la, ha = _side_bounds_matrix(a, 0.99, c2)
    lb, hb = _side_bounds_matrix(b, 0.99, c2)
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = np.where(np.isfinite(ha) & np.isfinite(lb) & (lb > 0), 1 - ha / lb, -np.inf)
        upper = np.where(np.isfinite(la) & np.isfinite(hb) & (hb > 0) & (la >= 0), 1 - la / hb, np.inf)
    outs = np.where(lower > 0.4, "pass", np.where(upper < 0.4, "fail", "inconclusive"))
    _check_public(th, "p99_reduction", a, b, outs)
    assert_rate(f"P99 reduction, n={n}, page swap {swap}", float(np.mean(outs == "pass")), trials)


# ---------------------------------------------------------------- means on skewed data


@pytest.mark.parametrize("n", [10, 30, 100, 300])
@pytest.mark.parametrize("dist", ["lognormal", "pareto"])
def test_mean_on_skewed_data(th: Thresholds, dist: str, n: int) -> None:
    rng = np.random.default_rng(n + len(dist))
    trials = 2000
    if dist == "lognormal":  # sigma 1: mean exp(0.5)
        x = rng.lognormal(0, 1, (trials, n)) * (0.050 / math.exp(0.5))
    else:  # Pareto, shape 1.5 (infinite variance): mean 3 x_m
        x = (rng.pareto(1.5, (trials, n)) + 1) * (0.050 / 3)
    passes = 0
    for i in range(trials):
        out = _decide_max(stats.mean_bounds(x[i], C, "max"), 0.050)
        if i < 20:
            v = evaluate(th.gate("tpot_mean"), make_samples(x[i], "s"), thresholds=th)
            assert v.outcome == out
        passes += out == "pass"
    assert_rate(f"mean, {dist}, n={n}", passes / trials, trials)


def test_heavy_tail_warns_and_points_to_a_quantile_gate(th: Thresholds) -> None:
    x = (np.random.default_rng(3).pareto(1.5, 200) + 1) * 0.01
    v = evaluate(th.gate("tpot_mean"), make_samples(x, "s"), thresholds=th)
    assert v.outcome != "pass" and "heavy tail" in v.note and "quantile gate" in v.note


# ---------------------------------------------------------------- value gates on one run-level number


def test_value_gate_on_one_number(th: Thresholds) -> None:
    rng = np.random.default_rng(4)
    gate = th.gate("throughput")
    xs = 30.0 * rng.lognormal(0, 0.1, TRIALS)  # run-level throughputs around the 30 tok/s minimum
    passes = 0
    for x in xs:
        v = evaluate(gate, make_samples([x], "tok/s"), thresholds=th)
        passes += v.outcome == "pass"
    assert_rate("value gate on one number", passes / TRIALS, TRIALS)
    assert passes == 0  # a single number has no bound: inconclusive ...
    v = evaluate(th.gate("throughput_single"), make_samples([31.0], "tok/s"), thresholds=th)
    assert v.outcome == "pass" and "single = true" in v.summary()  # ... unless the gate opts in
    runs = 30.0 * rng.lognormal(0, 0.05, (TRIALS, 12))  # repeated runs: gated by their mean
    fp = sum(_decide_min(stats.mean_bounds(r, C, "min"), 30.0) == "pass" for r in runs)
    assert_rate("value gate on 12 repeated runs (mean)", fp / TRIALS, TRIALS)
    assert evaluate(gate, make_samples(runs[0], "tok/s"), thresholds=th).method == "skew-corrected t"
    assert replace(gate, single=True).single


# ---------------------------------------------------------------- the printed bounds are labelled as what they are


def test_bounds_label_and_one_sided_coverage(th: Thresholds) -> None:
    rng = np.random.default_rng(5)
    v = evaluate(th.gate("ttft_p50"), make_samples(rng.lognormal(-3, 0.3, 100), "s"), thresholds=th)
    assert "one-sided 95% bounds" in v.summary() and "CI" not in v.ci_text()
    x = rng.lognormal(0, 0.3, (2000, 60))  # true median 1
    lo, hi = _side_bounds_matrix(x, 0.5, C)
    assert np.mean(lo <= 1.0) >= C - 3 * math.sqrt(C * (1 - C) / 2000)
    assert np.mean(hi >= 1.0) >= C - 3 * math.sqrt(C * (1 - C) / 2000)
