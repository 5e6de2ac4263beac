"""Engine-argument grids and sweeps (one point at a time, one result per point) and the batch
re-tune's choice: Bonferroni over the grid points, ties to the earlier point, the chosen
arguments in the verdict's details and back from a recorded decision."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.capacity import Term
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.retune import choose, details_of, per_point_confidence, retuned_args
from pytest_perfgate.load.sweep import Sweep, argument_grid, engine_sweep, point_name


def test_argument_grid_and_point_names() -> None:
    g = argument_grid(max_num_seqs=[2, 4], max_num_batched_tokens=[512, 2048])
    assert g == [{"max_num_seqs": 2, "max_num_batched_tokens": 512}, {"max_num_seqs": 2, "max_num_batched_tokens": 2048},
                 {"max_num_seqs": 4, "max_num_batched_tokens": 512}, {"max_num_seqs": 4, "max_num_batched_tokens": 2048}]
    assert point_name("baseline", g[1]) == "baseline-max_num_seqs=2-max_num_batched_tokens=2048"
    with pytest.raises(ValueError, match="non-empty list"):
        argument_grid(max_num_seqs=[])


def test_engine_sweep_runs_one_point_at_a_time_in_order() -> None:
    live: list[int] = []
    order: list[int] = []

    def measure(p: object) -> int:
        assert not live, "two points at once"
        live.append(1)
        order.append(p["max_num_seqs"])  # type: ignore[index]
        live.pop()
        return p["max_num_seqs"] * 10  # type: ignore[index,no-any-return]

    sw = engine_sweep(argument_grid(max_num_seqs=[1, 2, 8]), measure)
    assert order == [1, 2, 8] and sw.results == [10, 20, 80]
    assert sw.items()[2] == ({"max_num_seqs": 8}, 80)
    with pytest.raises(ValueError, match="given twice"):
        engine_sweep([{"max_num_seqs": 1}, {"max_num_seqs": 1}], measure)


def _closed_run(rng: np.random.Generator, ttft_mean: float, n: int = 300) -> RunResult:
    recs = []
    for i in range(n):
        t = (i + 1) * 10_000_000
        first = t + int(rng.exponential(ttft_mean) * 1e9)
        recs.append(RequestRecord(index=i, sent_ns=t, chunk_ns=[first, first + 5_000_000], chunk_tokens=[1, 1],
                                  end_ns=first + 5_000_000, output_tokens=2))
    return RunResult(records=recs)


def _sweep(rng: np.random.Generator, ttft_by_level: dict[int, float]) -> Sweep:
    return Sweep("concurrency", {float(k): _closed_run(rng, v) for k, v in ttft_by_level.items()})


def test_choose_takes_the_largest_sustained_level_at_bonferroni_confidence() -> None:
    rng = np.random.default_rng(4)
    terms = [Term("ttft", 1.0, 0.5)]
    # P50 TTFT = ln 2 x mean: 0.07 s passes, 3 s fails; point 1 sustains 4, points 0 and 2 sustain 2
    small = _sweep(rng, {1: 0.1, 2: 0.1, 4: 3.0})
    big = _sweep(rng, {1: 0.1, 2: 0.1, 4: 0.1, 8: 3.0})
    same = _sweep(rng, {1: 0.1, 2: 0.1, 4: 3.0})
    points = [{"max_num_seqs": 2}, {"max_num_seqs": 4}, {"max_num_seqs": 8}]
    ch = choose(points, [small, big, same], terms, 0.95)
    assert ch.index == 1 and ch.point == {"max_num_seqs": 4} and ch.sustained == [2.0, 4.0, 2.0]
    assert math.isclose(ch.confidence, per_point_confidence(0.95, 3)) and math.isclose(ch.confidence, 1 - 0.05 / 3)
    assert "chose max_num_seqs=4" in ch.text()
    tie = choose(points[:1] + points[2:], [small, same], terms, 0.95)
    assert tie.index == 0  # a tie goes to the earlier (smaller) point
    assert details_of(ch) == {"arg.max_num_seqs": 4.0}
    decision = {"verdicts": [{"gate": "batch_retune", "outcome": "pass", "details": {"arg.max_num_seqs": 4.0,
                                                                                   "sustained": 4.0}}]}
    assert retuned_args(decision, "batch_retune") == {"max_num_seqs": 4}
    assert retuned_args(None, "batch_retune") == {} and retuned_args({"verdicts": []}, "x") == {}
    with pytest.raises(ValueError, match="one sweep per point"):
        choose(points, [small], terms, 0.95)
