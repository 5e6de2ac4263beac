"""Phase 1 (weeks 1-2): speculative decoding for long context (ROADMAP.md).

Targets, all must hold: TTFT P99 of 8,000-token prompts < 150 ms (baseline 320 ms); draft
acceptance >= 70%; throughput with speculation >= 80% of throughput without. Measurement rules:
baseline (speculation off) first, then speculation on, never both at once (the engine manager stops
one before starting the other), the same exact-length prompts for both, then compare TTFT, TPOT and
throughput. Prefix caching (second document): prefill time on a cache hit >= 80% lower than cold.
Tests run in file order; gate tests run before the fallback tests (test_phase1_fallbacks.py).

Each test measures on the engine its gates name (``engine = ...`` in thresholds.toml:
``perfgate.engine``), keeps its runs under the names the comparison gates' ``runs = [...]`` use,
and checks every gate of its marker with ``perfgate.check_all``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_perfgate import Engines, LoadConfig, Perfgate, Proportion, RunResult, Thresholds, pool, prompts, workload

pytestmark = pytest.mark.phase1


@dataclass(frozen=True)
class Phase1:
    """``[params.phase1]`` of thresholds.toml (its ``embedded`` table on the embedded CPU engine)."""

    prompt_tokens: int
    max_tokens: int
    requests: int
    temperature: float
    ttft_max_samples: int
    max_seconds: float
    prefix_tokens: int
    tail_tokens: int
    prefix_requests: int
    prompt_set_tokens: int
    prompt_set_requests: int
    prompt_set_max_tokens: int
    acceptance_rounds: int
    throughput_runs: int = 3
    warmup: int = 1  # warm-up requests a run, same shape as the measured ones (docs/statistics.md#warm-up)

    @property
    def load(self) -> LoadConfig:
        """Each request once, one at a time, within the time budget, after ``warmup`` requests of the
        same shape (recorded apart, never gated: a cold engine never decides a steady-state gate)."""
        return LoadConfig(max_seconds=self.max_seconds, warmup=self.warmup)


@pytest.fixture(scope="module")
def phase1(perfgate_thresholds: Thresholds, perfgate_engines: Engines) -> Phase1:
    return workload(Phase1, perfgate_thresholds, "phase1", embedded=perfgate_engines.is_embedded("speculative"))


# ------------------------------------------------------------------ 1. baseline: speculation off
@pytest.mark.gate("baseline_ttft_p99", "baseline_tpot_p50", "baseline_tpot_p99", "baseline_throughput")
def test_baseline_speculation_off(perfgate: Perfgate, perfgate_engines: Engines, phase1: Phase1) -> None:
    long = prompts.exact_length_prompts(perfgate_engines.tokenizer(perfgate.engine), phase1.prompt_tokens,
                                        phase1.requests, seed=1, tag="long-context", max_tokens=phase1.max_tokens,
                                        temperature=phase1.temperature)
    run = perfgate_engines.run(perfgate.engine, long, phase1.load, keep_as="baseline")
    assert all(r.prompt_tokens == phase1.prompt_tokens for r in run.successful), "prompt length drifted"
    perfgate.check_all(run)


# ------------------------------------------------------------------ 2. prefix caching (baseline engine)
@pytest.mark.gate("prefix_cache_prefill_reduction")
def test_prefix_cache_cuts_prefill(perfgate: Perfgate, perfgate_engines: Engines, phase1: Phase1) -> None:
    """Cold: every request its own prompt of the same length (nothing to reuse); hit: one shared
    prefix, put in the cache by one request first."""
    tok = perfgate_engines.tokenizer(perfgate.engine)
    n, length = phase1.prefix_requests, phase1.prefix_tokens + phase1.tail_tokens
    cold = prompts.exact_length_prompts(tok, length, n, seed=100, tag="cold", max_tokens=1)
    hit = prompts.shared_prefix_prompts(tok, phase1.prefix_tokens, phase1.tail_tokens, n + 1, seed=7, tag="hit",
                                        max_tokens=1)
    cfg = LoadConfig(max_seconds=phase1.max_seconds)
    perfgate_engines.run(perfgate.engine, cold, cfg, keep_as="cold")
    perfgate_engines.run(perfgate.engine, hit[:1])  # the shared prefix enters the cache
    hit_run = perfgate_engines.run(perfgate.engine, hit[1:], cfg, keep_as="cache_hit")
    hits = hit_run.perfgate_data("prefix_cache_hit_rate")
    assert isinstance(hits, Proportion) and hits.successes > 0, f"no prefix-cache hits recorded: {hits}"
    perfgate.check_all()


# ------------------------------------------------------------------ 3. speculation on
@pytest.mark.gate("spec_throughput_ratio", "speculative_tpot_p50", "speculative_tpot_p99", "speculative_throughput")
def test_throughput_with_speculation(perfgate: Perfgate, perfgate_engines: Engines, phase1: Phase1) -> None:
    """Same exact-length prompts as the baseline run, speculation on.

    The ratio's design, on every engine (the embedded CPU one too): ``throughput_runs`` interleaved
    runs per engine (B S B S B S: the baseline run of the first test, then alternating), each run
    one observation, so run-to-run variance (a busy machine, an engine restart) is in the bound.
    Every run sends the same prompts (the roadmap's rule); a launched engine restarts at each
    switch, so no run finds an earlier run's prompts in its prefix cache."""
    long = perfgate.runs.requests("baseline")
    run = perfgate_engines.run(perfgate.engine, long, phase1.load, keep_as="speculative")
    for _ in range(phase1.throughput_runs - 1):  # B S B S: the engines alternate, the same prompts each time
        perfgate_engines.run("baseline", long, phase1.load, keep_as="baseline")
        perfgate_engines.run(perfgate.engine, long, phase1.load, keep_as="speculative")
    perfgate.check_all(run)  # the ratio compares the runs kept as "speculative" and "baseline"


@pytest.mark.gate("long_context_ttft")
def test_ttft_p99_with_speculation(perfgate: Perfgate, perfgate_engines: Engines, phase1: Phase1) -> None:
    """Sequential sampling: one 8,000-token request at a time until the verdict is decided.

    The first draw is the speculative run above: its requests went one at a time, each prompt cold
    on this engine, so their TTFTs are samples of the same thing (on the embedded engine that
    saves a warm-up and four 8,000-token prefills, ~35 s), and the first look is at its size, so a
    clear failure is decided on it without another draw. Later draws are prompts of their own
    (seed 2), one request each."""
    first = perfgate.runs.all("speculative")[:1]  # the first only: the later runs of the B S B S design repeat its prompts
    if not first:
        perfgate_engines.warm_up(perfgate.engine)
    ttft = iter(prompts.exact_length_prompts(perfgate_engines.tokenizer(perfgate.engine), phase1.prompt_tokens,
                                             phase1.ttft_max_samples, seed=2, tag="ttft", max_tokens=1))

    def draw() -> RunResult:  # one run of one request: its TTFT, or its failure against the error budget
        return first.pop() if first else perfgate_engines.run(perfgate.engine, [next(ttft)])

    # the first look at the first draw's size (the design's request count, fixed before any data)
    perfgate.sample_until_decided(draw, max_samples=phase1.ttft_max_samples, max_seconds=phase1.max_seconds,
                                  first_look=phase1.requests)


@pytest.mark.gate("draft_acceptance", "acceptance_dialogue", "acceptance_math")
def test_draft_acceptance(perfgate: Perfgate, perfgate_engines: Engines, phase1: Phase1) -> None:
    """Acceptance = accepted / proposed draft tokens (counter deltas). Sequential: each draw runs one
    round of the dialogue-like and the math-like prompt set (fresh prompts), the gate pools every
    round (and the speculative long-context run) until decided or ``acceptance_rounds`` rounds;
    acceptance is reported per prompt set (the roadmap: ~75% dialogue vs ~55% math).

    Each request is one cluster (counter snapshots between the sequential requests), so tokens of
    one request, which are accepted or rejected together, are not counted as independent trials."""
    tok = perfgate_engines.tokenizer(perfgate.engine)
    per_set: dict[str, list[Proportion]] = {"dialogue": [], "math": []}
    rounds = iter(range(1_000))
    long_run = [perfgate.runs["speculative"]] if "speculative" in perfgate.runs else []

    def draw() -> Proportion:
        r = next(rounds)
        got = [acceptance(run) for run in long_run] if r == 0 else []
        for name, make in (("dialogue", prompts.dialogue_prompts), ("math", prompts.math_prompts)):
            reqs = make(tok, phase1.prompt_set_tokens, phase1.prompt_set_requests, seed=3 + r,
                        max_tokens=phase1.prompt_set_max_tokens, temperature=phase1.temperature)
            acc = acceptance(perfgate_engines.run(perfgate.engine, reqs, LoadConfig(max_seconds=phase1.max_seconds)))
            per_set[name].append(acc)
            got.append(acc)
        return pool(got, "acceptance")

    # each round is a run with the per-run time budget: the rounds together get one budget each
    verdict = perfgate.sample_until_decided(draw, gate="draft_acceptance", max_draws=phase1.acceptance_rounds,
                                            max_seconds=phase1.max_seconds * phase1.acceptance_rounds, check=False)
    for name, parts in per_set.items():
        perfgate.check(pool(parts, name), gate=f"acceptance_{name}")
    perfgate.raise_for(verdict)


def acceptance(run: RunResult) -> Proportion:
    acc = run.perfgate_data("acceptance_rate")
    assert isinstance(acc, Proportion), acc
    return acc
