"""Issue 41: a quantile gate on a run decides on the run's samples put in arrival order
(``samples.arrival_data``: no arrival-ordered copy beside the values and send times): the same
arrival-ordered values (bit for bit), the same dependence and the same verdict as the samples in
their first order; Samples given as such are decided as they are. ``make_samples(copy=False)``
keeps the caller's array with the same numbers."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import queues

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Thresholds
from pytest_perfgate.config.units import parse_quantity
from pytest_perfgate.verdicts.samples import RequestCounts, Samples, arrival_data, as_data


class Source:
    """A run that makes fresh samples on each call (as a RunResult does)."""

    def __init__(self, values: np.ndarray, sent: np.ndarray, failed: int = 0) -> None:
        self.values, self.sent, self.failed = values, sent, failed

    def perfgate_data(self, metric: str) -> Samples:
        s = make_samples(self.values, "s", label=metric, sent=self.sent)
        n = int(self.values.size)
        return dataclasses.replace(s, notes=("a note",), requests=RequestCounts(n + self.failed, n, {"x": self.failed})
                                   if self.failed else None)


def _run(seed: int, ties: bool, n: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    v, sent = queues.ar1_lognormal(np.random.default_rng(seed), 1, n, 0.9)
    mixed = np.random.default_rng(seed + 1).permutation(n)  # values listed out of arrival order
    t = sent[0][mixed]
    if ties:
        t = np.round(t / 7)  # runs of equal send times: the stable order decides
    return v[0][mixed] * 1e-3, t


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_arrival_data_is_the_ordered_samples(seed: int, ties: bool) -> None:
    v, t = _run(seed, ties)
    src = Source(v, t)
    first = as_data(src, "itl")
    got = arrival_data(src, "itl")
    assert isinstance(first, Samples) and isinstance(got, Samples)
    assert np.array_equal(got.values.view(np.int64), first.ordered().view(np.int64))  # bit for bit
    assert np.array_equal(got.sent.view(np.int64), np.sort(t).view(np.int64))  # type: ignore[union-attr]
    assert got.ordered() is got.values  # already in arrival order: no copy
    assert (got.unit, got.label, got.notes, got.requests) == (first.unit, first.label, first.notes, first.requests)
    assert got.dependence() == first.dependence() and got.dependence().dependent


def test_samples_given_as_such_are_returned_as_they_are() -> None:
    v, t = _run(4, False)
    s = make_samples(v, "s", sent=t)
    assert arrival_data(s, "itl") is s
    plain = make_samples(v, "s")
    assert arrival_data(Source(v, t), "itl") is not plain and arrival_data(plain, "itl") is plain


def _verdict_fields(v: Any) -> dict[str, Any]:
    d = dataclasses.asdict(v)
    return {k: d[k] for k in ("outcome", "observed", "lower", "upper", "n", "method", "needed", "details", "note")}


@pytest.mark.parametrize(("seed", "ties", "failed", "limit"), [(1, False, 0, 20.0), (2, True, 0, 3.0), (3, True, 12, 1.5),
                                                               (5, False, 0, 0.3)])
def test_a_quantile_verdict_on_a_run_is_the_one_on_its_samples(th: Thresholds, seed: int, ties: bool, failed: int,
                                                                limit: float) -> None:
    """The run (decided on its arrival-ordered samples) and its samples in their first order (decided
    on their ordered copy): the same verdict, number for number."""
    v, t = _run(seed, ties)
    src = Source(v, t, failed)
    p99 = float(np.quantile(v, 0.99))
    gate = dataclasses.replace(th.gate("ttft_p99"), metric="itl", threshold=parse_quantity(f"{limit * p99!r} s"),
                               max_error_rate=0.01)
    a, b = evaluate(gate, src), evaluate(gate, src.perfgate_data("itl"))
    assert _verdict_fields(a) == _verdict_fields(b)


def test_make_samples_without_a_copy_keeps_the_array() -> None:
    x = np.random.default_rng(6).random(1000) * 3
    y = x.copy()
    kept = make_samples(x, "s", copy=False)
    assert kept.values is x or np.shares_memory(kept.values, x)
    assert np.array_equal(kept.values.view(np.int64), make_samples(y, "s").values.view(np.int64))
    ms = make_samples(y.copy(), "ms", copy=False)  # scaled in place: the same float64 product
    assert np.array_equal(ms.values.view(np.int64), make_samples(y, "ms").values.view(np.int64))
