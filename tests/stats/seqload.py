"""Seeded sequential load runs (issue 39) without an engine: a run's per-request values in arrival
order (with their send times) looked at as ``run_until_decided`` looks at a live run
(load/decided.py: ``LoadLooks``), shared by tests/stats/test_sequential_load.py and
benchmarks/bench_sequential_load.py."""

from __future__ import annotations

import dataclasses

import numpy as np

from pytest_perfgate import make_samples
from pytest_perfgate.config import Gate
from pytest_perfgate.config.units import parse_quantity
from pytest_perfgate.load.decided import LoadLooks, load_looks


def at(gate: Gate, limit_s: float) -> Gate:
    return dataclasses.replace(gate, threshold=parse_quantity(f"{limit_s!r} s"))


def decide(gate: Gate, values: np.ndarray, sent: np.ndarray, looks: tuple[int, ...], c: float = 0.95) -> tuple[str, int]:
    """(outcome, requests sent) of one sequential run of ``values`` (arrival order) at ``looks``."""
    plan = LoadLooks.plan([(gate, c)], looks)
    for n in looks:
        if plan.look(make_samples(values[:n], "s", sent=sent[:n]), n, last=n == looks[-1]):
            break
    d = plan.decided[gate.name]
    return (d.verdict.outcome if d.decided else "inconclusive"), d.requests


def rates(gate: Gate, values: np.ndarray, sent: np.ndarray, max_requests: int) -> tuple[float, float, float]:
    """(pass rate, fail rate, mean requests sent) over the rows of ``values``."""
    looks = load_looks(max_requests)
    got = [decide(gate, values[i], sent[i], looks) for i in range(values.shape[0])]
    return (float(np.mean([o == "pass" for o, _ in got])), float(np.mean([o == "fail" for o, _ in got])),
            float(np.mean([n for _, n in got])))
