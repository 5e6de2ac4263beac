"""Helpers of the seeded simulations."""

from __future__ import annotations

import math


def limit(c: float, trials: int) -> float:
    """The largest false-pass rate a correct rule may show: 1 - c + 3 standard errors."""
    a = 1 - c
    return a + 3 * math.sqrt(a * (1 - a) / trials)


def assert_rate(label: str, rate: float, trials: int, c: float = 0.95) -> None:
    """Assert a false-pass rate is within the limit; print it (``pytest -s`` collects the table figures)."""
    print(f"RATE {label}: {rate:.4f} over {trials} trials (limit {limit(c, trials):.4f})")
    assert rate <= limit(c, trials), (label, rate)
