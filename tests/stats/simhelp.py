"""Helpers of the seeded simulations."""

from __future__ import annotations

import math


def limit(c: float, trials: int) -> float:
    """The largest false-pass rate a correct rule may show: 1 - c + 3 standard errors."""
    a = 1 - c
    return a + 3 * math.sqrt(a * (1 - a) / trials)
