"""Phase 1, after it passes: re-tune the batch size (ROADMAP.md: "if speculation passes, batch size
must be re-tuned before phase 2").

``pytest -m phase1_retune perf_tests`` (its own phase, ``depends_on = ["phase1"]``; not in the main
``-m phase1`` job: every grid point restarts the engine). Each point of ``[params.phase1_retune]
grid`` (``max_num_seqs`` x ``max_num_batched_tokens``) is the speculative engine with those
arguments, one engine at a time; on it a concurrency sweep of phase-1 long-context prompts
(``levels``, in order, stopping at the first level not sustained). The chosen point sustains the
most concurrent requests under the phase-1 SLO (gate ``batch_retune_capacity``), each point decided
at ``1 - (1 - c) / K`` (Bonferroni over the K points); its verdict carries the chosen arguments
(``details``: ``arg.max_num_seqs``, ...) into decisions.json, where phase 2 reads them back with
``retune.retuned_args(perfgate.decision("phase1_retune"), "batch_retune_capacity")``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_perfgate import (
    Engines,
    LoadConfig,
    Perfgate,
    Thresholds,
    evaluate,
    parse_quantity,
    prompts,
    retune,
    workload,
)

GATE = "batch_retune_capacity"


@dataclass(frozen=True)
class RetuneParams:
    """``[params.phase1_retune]`` (its ``embedded`` table on the embedded CPU engine)."""

    grid: Mapping[str, Any]
    levels: tuple[int, ...]
    prompt_tokens: int
    max_tokens: int
    requests: int
    max_seconds: float
    slo: Mapping[str, str] | None = None  # the embedded budget's terms in place of the gate's (said in the verdict)


@pytest.fixture(scope="module")
def retune_params(perfgate_thresholds: Thresholds, perfgate_engines: Engines) -> RetuneParams:
    return workload(RetuneParams, perfgate_thresholds, "phase1_retune", embedded=perfgate_engines.is_embedded("speculative"))


def _gate(perfgate: Perfgate, params: RetuneParams) -> tuple[Any, str]:
    """The gate as thresholds.toml has it, or with the embedded budget's SLO terms (the note says so)."""
    g = perfgate.gate(GATE)
    if not params.slo:
        return g, ""
    slo = []
    for key, value in params.slo.items():
        metric, _, q = key.partition("_p")
        slo.append((metric, float(q) / 100, parse_quantity(value).base))
    shown = ", ".join(f"P{q * 100:g} {m.upper()} <= {lim * 1e3:g} ms" for m, q, lim in slo)
    return dataclasses.replace(g, slo=tuple(slo)), (
        f"embedded CPU budget ([params.phase1_retune.embedded]): {shown} and {params.prompt_tokens}-token prompts in "
        f"place of the gate's {', '.join(f'P{q * 100:g} {m.upper()} <= {lim * 1e3:g} ms' for m, q, lim in g.slo if q)}"
        " (2 CPU cores miss the phase-1 SLO at every level, and a P99 claim needs hundreds of requests a level)")


@pytest.mark.gate(GATE)
def test_batch_retune_under_the_phase1_slo(perfgate: Perfgate, perfgate_engines: Engines,
                                         retune_params: RetuneParams) -> None:
    gate, note = _gate(perfgate, retune_params)
    c = perfgate.confidence  # the gate's own, --perfgate-confidence, else the file's
    terms = retune.terms_of(gate)
    points = retune.argument_grid(**{k: list(v) for k, v in retune_params.grid.items()})
    tok = perfgate_engines.tokenizer(perfgate.engine)
    base = LoadConfig(mode="concurrency", concurrency=1, num_requests=retune_params.requests, warmup=1,
                      max_seconds=retune_params.max_seconds)

    def measure(point: Mapping[str, Any]) -> retune.Sweep:
        name = perfgate_engines.variant(perfgate.engine, retune.point_name(perfgate.engine, point), **point)
        sw = retune.Sweep("concurrency")
        for i, level in enumerate(retune_params.levels):  # the fixed sequence: stop at the first level not sustained
            reqs = prompts.exact_length_prompts(tok, retune_params.prompt_tokens, retune_params.requests, seed=40 + i,
                                                tag=f"retune-{level}", max_tokens=retune_params.max_tokens)
            run = perfgate_engines.run(name, reqs, dataclasses.replace(base, concurrency=int(level)))
            sw.results[float(level)] = run
            if retune.level_of(float(level), run.records, terms, c, open_loop=False).decision != "pass":
                break
        return sw

    grid = retune.engine_sweep(points, measure, on_point=lambda p, sw: perfgate.note(
        f"retune {retune.point_name(perfgate.engine, p)}: levels {sorted(sw.results)}"))
    choice = retune.choose(grid.points, grid.results, terms, c)
    v = evaluate(gate, grid.results[choice.index], confidence=choice.confidence, thresholds=perfgate.thresholds)
    v = dataclasses.replace(v, details={**v.details, **retune.details_of(choice)},
                            note="; ".join(x for x in (v.note, choice.text(), note) if x))
    perfgate.note(v.summary())
    perfgate.record(v)
    perfgate.raise_for(v)
