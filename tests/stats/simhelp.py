"""Helpers of the seeded simulations."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from pytest_perfgate.config import Gate, Thresholds


def limit(c: float, trials: int) -> float:
    """The largest false-pass rate a correct rule may show: 1 - c + 3 standard errors."""
    a = 1 - c
    return a + 3 * math.sqrt(a * (1 - a) / trials)


def assert_rate(label: str, rate: float, trials: int, c: float = 0.95) -> None:
    """Assert a false-pass rate is within the limit; print it (``pytest -s`` collects the table figures)."""
    print(f"RATE {label}: {rate:.4f} over {trials} trials (limit {limit(c, trials):.4f})")
    assert rate <= limit(c, trials), (label, rate)


def quantile_gate(th: Thresholds, stat: str, limit_ms: float) -> Gate:
    """The ``ttft_p99`` gate of ``th`` as a ``stat`` ("p95", "p99") with a max of ``limit_ms`` ms."""
    from pytest_perfgate.config.units import parse_quantity

    g = th.gate("ttft_p99")
    st = dataclasses.replace(g.statistic, text=stat, q=float(stat[1:]) / 100)
    return dataclasses.replace(g, statistic=st, threshold=parse_quantity(f"{limit_ms!r} ms"))


def pass_rate(gate: Gate, rows: np.ndarray, limits: np.ndarray | None = None) -> float:
    """The share of ``rows`` (runs x requests, arrival order, **in ms** like the gate's limit) whose
    verdict passes; ``limits``: each run's own limit (ms) in place of the gate's."""
    import numpy as np

    from pytest_perfgate import evaluate, make_samples
    from pytest_perfgate.config.units import parse_quantity

    sent = np.arange(rows.shape[1], dtype=np.float64)
    out = []
    for i, row in enumerate(rows):
        g = gate if limits is None else dataclasses.replace(gate, threshold=parse_quantity(f"{float(limits[i])!r} ms"))
        out.append(evaluate(g, make_samples(row / 1000, "s", sent=sent)).outcome == "pass")
    return float(np.mean(out))
