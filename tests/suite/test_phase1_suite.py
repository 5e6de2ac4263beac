"""The roadmap's phase-1 suite (perf_tests/) on the embedded CPU engine, end to end through pytester:
thresholds chosen to pass and to fail; outcomes, triggered fallbacks, fallback tests run vs skipped,
and the decision record. Real vLLM engines; each run starts the baseline and speculative engines once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_engine

ROOT = Path(__file__).resolve().parents[2]

# small budgets: the same suite and gates, sized for a CI job on 2 cores (the prefix-cache gate keeps
# the main job's 2,048-token prefix and 12 requests: at 1,024 tokens a hit saves too little of a cold
# prefill; the passing run's threshold for it is sized in test_phase1_passing_thresholds)
BUDGETS = """
[params.phase1.embedded]
prompt_tokens = 2000
max_tokens = 16
requests = 3
ttft_max_samples = 12
max_seconds = 60
prefix_requests = 12
prompt_set_requests = 3
prompt_set_max_tokens = 64
prompt_set_tokens = 128
candidate_drafts = ["embedded:draft", "embedded:draft_independent"]
"""


@pytest.fixture(autouse=True)
def _prewarm(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the main job: vLLM's fork server starts while pytest collects (tests/conftest.py turns
    it off for the short scripted sessions)."""
    monkeypatch.delenv("PERFGATE_PREWARM", raising=False)


def suite(pytester: pytest.Pytester, edits: dict[str, str], budgets: str = BUDGETS) -> None:
    text = (ROOT / "thresholds.toml").read_text()
    # the repo's own embedded budgets are renamed away (TOML can't redefine a table)
    text = text.replace("[params.phase1.embedded]", "[params.phase1.embedded_main_job]")
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    pytester.makefile(".toml", thresholds=text + budgets)
    dst = pytester.path / "perf_tests"
    dst.mkdir()
    for f in (ROOT / "perf_tests").glob("*.py"):
        shutil.copy(f, dst / f.name)
    (pytester.path / "docs").mkdir()


def decision(pytester: pytest.Pytester) -> dict:  # type: ignore[type-arg]
    return json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())["phases"]["phase1"]


def test_phase1_passing_thresholds(pytester: pytest.Pytester) -> None:
    """Every gate passes on real measurements, with thresholds a busy runner still clears.

    The prefix-cache reduction (cold vs hit TTFT p50, 12 requests a side) passes when its lower
    bound ``1 - hit_(10) / cold_(3)`` (each side's p50 bound at 97.5% is an order statistic of 12)
    clears the minimum. The main job's 80% is a test of the machine: on a 2-core runner beside two
    busy loops the reduction read 86.9% with bounds 79.1%-90.4% (inconclusive). Sized here: min 0%
    (a hit's prefill shorter than a cold one's, with 95% confidence). Power, by simulation (10^6
    runs) of log TTFT = run-level log(hit/cold) + per-request noise: median ratio 0.131 and
    per-request log-sd 0.30 a side (what turns it into hit_(10)/cold_(3) = 0.209) from that CI run,
    run-to-run log-sd 0.44 from 24 cold/hit pairs of this test's shape measured beside two busy
    loops and other jobs (load averages 4-22 on 2 CPUs): P(pass) = 99.95% (80%: 46%; 30%: 99.5%);
    with those pairs' per-request spreads (log-sd 0.54 hit, 0.37 cold), 99.4%. Measured: the 3 pairs
    at load <= 8 had bounds 45-49%; 20 of all 24 cleared 0%, the other 4 ran at load averages 8-19
    (the pairs: benchmarks/results-issue25-prefix-pairs.json).

    The throughput ratio (3 interleaved runs a side, B S B S B S, the run as the unit; min 0.05 here)
    is decided by the runs' spread: by simulation (20,000 runs of lognormal run values, Welch t over
    the logs) a true ratio of 0.5 against 0.05 passes 3 x 3 runs in 99.4% / 91.2% / 67.7% at a
    run-to-run log-sd of 0.5 / 0.7 / 1.0 (a stalled request in a 3-request run, beside two busy
    loops, moved that run's throughput ~2x: log-sd ~0.4 over the runs).

    Both sized up for a busier runner (2026-12-07: a CI run beside simulations on both cores read the
    ratio 0.310 over 3 x 3 runs and the reduction 87.1% over 12 a side, both INCONCLUSIVE): 5 x 5 runs
    pass 100% / 99.9% / 94.6% / 80.4% at log-sd 0.5 / 0.7 / 1.0 / 1.3; 20 requests a side
    (hit_(15) / cold_(6)) pass 99.99% / 99.90% with the pairs' spreads above and 94.2% at a run log-sd
    of 0.8 with per-request 0.7 / 0.5 (12: 89.4%). ``benchmarks/bench_suite_power.py`` (200,000 runs)."""
    suite(pytester, {
        # a P99 pass needs ~300 samples; the CI-sized run gates the median (same code path)
        'statistic = "p99"\nmax = "150 ms"': 'statistic = "p50"\nmax = "120 s"',
        "min = 0.8\n": "min = 0.05\n",
        'min = "70%"\nbands': 'min = "30%"\nbands',
        'runs = ["cache_hit", "cold"]\nmin = "80%"': 'runs = ["cache_hit", "cold"]\nmin = "0%"',  # sized above
    }, budgets=BUDGETS.replace("prefix_requests = 12", "prefix_requests = 20") + "throughput_runs = 5\n")  # busy runners: above
    r = pytester.runpytest_subprocess("-m", "phase1", "perf_tests", "-p", "no:cacheprovider", "-rs", timeout=900)
    out = r.stdout.str()
    assert r.ret == 0, out[-4000:]
    r.assert_outcomes(passed=5, skipped=3)
    r.stdout.fnmatch_lines(["*fallback switch_draft_model: not triggered: gate draft_acceptance passed*"])
    r.stdout.fnmatch_lines(["*fallback tiered_kv_cache: not triggered:*gate long_context_ttft passed*"])
    d = decision(pytester)
    assert d["outcome"] == "passed" and d["triggered_fallbacks"] == []
    by_gate = {v["gate"]: v for v in d["verdicts"]}
    assert by_gate["long_context_ttft"]["outcome"] == "pass"
    assert by_gate["draft_acceptance"]["outcome"] == "pass" and by_gate["draft_acceptance"]["n"] > 100
    assert by_gate["prefix_cache_prefill_reduction"]["outcome"] == "pass"
    assert {"acceptance_dialogue", "acceptance_math", "baseline_tpot_p99", "speculative_tpot_p99"} <= set(by_gate)
    assert any(e.get("kind") == "vllm" for e in d["engines"])
    assert "stopping engine 'baseline' before starting 'speculative'" in out
    # physical floors on this machine (floors/, issue #16): prefill-bound TTFT reports MFU, decode MBU
    ttft, tpot = by_gate["long_context_ttft"], by_gate["baseline_tpot_p50"]
    # MFU > 0; it may exceed 1 on a busy machine (the peak probe and the run see different load), which
    # the verdict then says: comparing two wall-clock measurements of a shared machine is not a test (issue 25)
    assert ttft["efficiency_kind"] == "MFU" and ttft["efficiency"] > 0 and ttft["floor"] > 0
    assert ttft["efficiency"] <= 1 or "above 100%" in ttft["summary"]
    assert ttft["floor_multiple"] == pytest.approx(120.0 / ttft["floor"])
    assert tpot["efficiency_kind"] == "MBU" and tpot["efficiency"] > 0 and "MBU" in tpot["summary"]


def test_phase1_failing_thresholds(pytester: pytest.Pytester) -> None:
    suite(pytester, {
        # the limit is a property of the test, not of the machine: at 150 ms this test read the machine
        # (a quiet AVX-512 runner measured P99 153 ms, inconclusive: CI, 2026-12-07); 5 ms is 30x under
        # that, the fastest CPU run of this prefill seen
        'statistic = "p99"\nmax = "150 ms"': 'statistic = "p99"\nmax = "5 ms"',
        'min = "70%"\nbands': 'min = "99%"\nbands',  # no tiny draft reaches 99%: switch_draft_model runs
    }, budgets=BUDGETS.replace("ttft_max_samples = 12", "ttft_max_samples = 300").replace(  # a p99 pass needs >= 299
        'candidate_drafts = ["embedded:draft", "embedded:draft_independent"]', 'candidate_drafts = ["embedded:draft_independent"]'))
    r = pytester.runpytest_subprocess("-m", "phase1", "perf_tests", "-p", "no:cacheprovider", "-rs", timeout=900)
    out = r.stdout.str()
    assert r.ret == 1, out[-4000:]
    # CPU TTFT of 2,000-token prompts is far above 5 ms; acceptance is below 99%
    r.stdout.fnmatch_lines(["FAILED long_context_ttft: ttft p99 * > max 5* ms (n=*, * sure it is above)",
                            "*-> fallback: tiered_kv_cache*"])
    r.stdout.fnmatch_lines(["*plan A offloads KV blocks from GPU memory to CPU memory*no CUDA GPU*"])
    r.stdout.fnmatch_lines(["*plan B*needs >= 2 CUDA GPUs*"])
    d = decision(pytester)
    assert d["outcome"] == "failed"
    assert set(d["triggered_fallbacks"]) >= {"tiered_kv_cache", "sequence_parallel", "switch_draft_model"}
    fb = {t["fallback"]: t for t in d["fallback_tests"]}
    assert fb["tiered_kv_cache"]["outcome"] == "skipped" and "no CUDA GPU" in fb["tiered_kv_cache"]["reason"]
    assert fb["sequence_parallel"]["outcome"] == "skipped"
    assert fb["switch_draft_model"]["outcome"] == "failed"  # it ran: the candidate can't reach 99% either
    switched = [v for v in d["verdicts"] if v["gate"] == "draft_acceptance" and "switch_draft" in v["test"]]
    assert switched and switched[0]["observed"] < 0.2  # the independent draft accepts ~nothing
