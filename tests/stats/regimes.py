"""Seeded non-stationary runs (issue 39): a server whose level shifts during the run, as a CPU's does
(its clock, its neighbours). Rows = trials, arrival order; ``level * exp(sigma * Z)`` with ``Z`` a
stationary Gaussian AR(1) (``phi``: the short memory of neighbouring requests).

* :func:`deciles`: the levels of the issue's first-contact run, TPOT by tenths of the run (ms);
* :func:`switching`: a two-state regime chain (levels 1 and ``high``, mean stay ``dwell`` requests in
  the high state, there a ``share`` of the time);
* :func:`drift`: a level drifting linearly from 1 to ``end``;
* :func:`wander`: a level that wanders (a random walk of its log, ``spread`` its sd over the run), the
  drift of the recorded ``transformers serve`` run (tests/fixtures/runs/: means by twentieths of the
  run 134-189 ms, no single shift standing out).

The boundary of such a run (what its claim covers, :mod:`pytest_perfgate.verdicts.shifts`) is the
percentile of its own mix of levels: :func:`run_quantile`, the ``t`` at which the expected share of
the run's requests at or over ``t`` is ``1 - q``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import optimize, signal, stats

Array = npt.NDArray[np.float64]

DECILES = (5.7, 6.4, 6.5, 9.5, 9.8, 10.0, 7.6, 6.2, 6.9, 7.9)  # issue 39, run 1: TPOT (ms) by tenths


def deciles(trials: int, n: int, means: tuple[float, ...] = DECILES) -> Array:
    """Levels, trials x n: the means by tenths of the run."""
    m = np.repeat(np.asarray(means, dtype=np.float64), -(-n // len(means)))[:n]
    return np.tile(m, (trials, 1))


def switching(rng: np.random.Generator, trials: int, n: int, high: float = 1.6, dwell: float = 300.0,
              share: float = 1 / 3) -> Array:
    """Levels, trials x n, of a two-state chain started in its stationary law."""
    leave = 1 / dwell
    enter = share * leave / (1 - share)
    state = rng.random(trials) < share
    u = rng.random((trials, n))
    out = np.empty((trials, n))
    for i in range(n):
        out[:, i] = np.where(state, high, 1.0)
        state = np.where(state, u[:, i] > leave, u[:, i] < enter)
    return out


def drift(trials: int, n: int, end: float = 1.6) -> Array:
    return np.tile(np.linspace(1.0, end, n), (trials, 1))


def wander(rng: np.random.Generator, trials: int, n: int, spread: float = 0.25) -> Array:
    steps = rng.normal(0.0, spread / math.sqrt(n), (trials, n))
    return np.asarray(np.exp(np.cumsum(steps, axis=1)), dtype=np.float64)


def series(rng: np.random.Generator, levels: Array, sigma: float = 0.12, phi: float = 0.4) -> Array:
    """The per-request values of runs at ``levels``."""
    trials, n = levels.shape
    e = rng.normal(size=(trials, n)) * math.sqrt(1 - phi**2)
    e[:, 0] = rng.normal(size=trials)
    z = signal.lfilter([1.0], [1.0, -phi], e, axis=1)
    return np.asarray(levels * np.exp(sigma * z), dtype=np.float64)


def run_quantile(levels: Array, q: float, sigma: float = 0.12) -> float:
    """The run's own q-percentile over its requests (one row of levels)."""
    logs = np.log(levels)

    def excess(lt: float) -> float:
        return float(np.mean(stats.norm.sf((lt - logs) / sigma))) - (1 - q)

    lo, hi = float(logs.min()) - 10 * sigma, float(logs.max()) + 10 * sigma
    return math.exp(float(optimize.brentq(excess, lo, hi)))
