"""verdicts/dependence.py, the API the per-request verdicts (and goodput, capacity and comparisons)
build on; and the arrival order travelling from a load run to the verdict and its stored record."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Thresholds
from pytest_perfgate.store.records import _part_line, _read_part
from pytest_perfgate.verdicts.dependence import Dependence, arrival_order, block_sizes, blocks, estimate
from pytest_perfgate.verdicts.record import VerdictRecord

sys.path.insert(0, str(Path(__file__).parents[1]))
from mm1_runs import mm1_run  # noqa: E402


def test_independent_and_small_runs_keep_block_one() -> None:
    rng = np.random.default_rng(1)
    called = sum(estimate(rng.exponential(size=2000)).dependent for _ in range(200))
    assert called <= 8  # 1% by design
    assert estimate(np.arange(29.0)) == Dependence(29)  # below 30 requests: never estimated
    assert estimate(np.full(500, 3.0)) == Dependence(500)


def test_a_queue_is_dependent_and_described() -> None:
    rng = np.random.default_rng(2)
    x = np.cumsum(rng.normal(size=3000)) * 0.01 + rng.normal(size=3000)  # a slowly wandering level
    dep = estimate(x)
    assert dep.dependent and dep.tau > 2 and dep.block >= 3 * dep.tau - 1
    assert dep.describe().startswith("n = 3,000, about ") and dep.describe().endswith(" independent")
    assert "requests carry one independent request's information" in dep.cost()
    assert Dependence.from_dict(dep.to_dict()) == dep
    assert Dependence.from_details(3000, dep.details()) == Dependence(3000, dep.block, "blocks", dep.tau)
    assert Dependence.from_dict({"n": "x"}) == Dependence(0)
    assert dep.scale(299) == int(np.ceil(299 * dep.tau))


def test_arrival_order_and_blocks() -> None:
    vals = np.asarray([3.0, 1.0, 2.0])
    assert vals[arrival_order([0.3, 0.1, 0.2])].tolist() == [1.0, 2.0, 3.0]
    assert estimate([5.0, 4.0], send_times=[2, 1]).n == 2
    assert block_sizes(10, 3).tolist() == [3, 3, 4]
    assert blocks(np.arange(10.0), 3).tolist() == [3.0, 12.0, 30.0]
    assert blocks(np.zeros(0), 3).size == 0


def test_a_load_run_is_decided_in_arrival_order_and_stored_with_its_dependence(th: Thresholds) -> None:
    run = mm1_run(np.random.default_rng(5), rate=8.0, mu=10.0, n=3000)  # utilisation 0.8
    data = run.perfgate_data("ttft")
    assert data.sent is not None and data.sent.size == data.n
    v = evaluate(th.gate("long_context_ttft"), run)
    assert "about" in v.note and "independent" in v.note and v.details["dependence_tau"] > 1
    rec = VerdictRecord.read(v.to_dict())
    assert rec.details["dependence_block"] == v.details["dependence_block"]
    line = _part_line(0, data, {}, "ttft")
    back = _read_part(Path("x"), line, {})
    assert np.array_equal(back.sent, data.sent)
    assert evaluate(th.gate("long_context_ttft"), back).outcome == v.outcome
    shuffled = make_samples(data.values, "s")  # no send times: independent draws, as before
    assert "independent" not in evaluate(th.gate("long_context_ttft"), shuffled).note
