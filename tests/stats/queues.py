"""Seeded, vectorised load-test models for the dependence simulations (issue 32): each returns
``(values, send_times)`` arrays of shape (trials, n) in arrival order, and the true stationary
quantile / mean where it is known exactly.

- ``mm1``: M/M/1 FCFS sojourn times, started in steady state (Lindley recursion as a running minimum);
  the stationary sojourn time is Exp(mu - lambda);
- ``mg1``: M/G/1 with lognormal service (a heavy tail), same recursion;
- ``mmc``: M/M/c FCFS (Kiefer-Wolfowitz workload vector), vectorised over trials;
- ``ar1_lognormal``: exp of a stationary Gaussian AR(1) (within-run correlation ``phi``);
- ``iid``: the control, independent draws of the M/M/1 stationary sojourn time.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import signal

Array = npt.NDArray[np.float64]


def lindley(gaps: Array, service: Array, w0: Array) -> Array:
    """Waiting times of a FCFS single server, rows = trials: W_i = max(0, W_{i-1} + S_{i-1} - A_i),
    computed as C_i - min(0, min_k C_k) over the running sums C of S_{i-1} - A_i (plus W_0)."""
    u = np.zeros_like(gaps)
    u[:, 1:] = service[:, :-1] - gaps[:, 1:]
    c = np.cumsum(u, axis=1) + w0[:, None]
    return np.asarray(c - np.minimum(np.minimum.accumulate(c, axis=1), 0.0), dtype=np.float64)


def _stationary_wait(rng: np.random.Generator, trials: int, rho: float, mu: float) -> Array:
    busy = rng.random(trials) < rho
    return np.where(busy, rng.exponential(1 / (mu * (1 - rho)), trials), 0.0)


def mm1(rng: np.random.Generator, trials: int, n: int, rho: float, mu: float = 1.0) -> tuple[Array, Array]:
    """Sojourn times (s) of an M/M/1 queue at utilisation ``rho`` in steady state, and send times."""
    gaps = rng.exponential(1 / (rho * mu), (trials, n))
    service = rng.exponential(1 / mu, (trials, n))
    w = lindley(gaps, service, _stationary_wait(rng, trials, rho, mu))
    return w + service, np.cumsum(gaps, axis=1)


def mm1_quantile(q: float, rho: float, mu: float = 1.0) -> float:
    """The stationary q-quantile of the M/M/1 sojourn time: Exp(mu (1 - rho))."""
    return -math.log(1 - q) / (mu * (1 - rho))


def mg1(rng: np.random.Generator, trials: int, n: int, rho: float, sigma: float = 1.0,
        warmup: int = 2000) -> tuple[Array, Array]:
    """M/G/1 sojourn times with lognormal service (mean 1, log-sd ``sigma``) at utilisation ``rho``,
    after ``warmup`` requests (dropped), and send times."""
    total = n + warmup
    gaps = rng.exponential(1 / rho, (trials, total))
    service = rng.lognormal(-sigma**2 / 2, sigma, (trials, total))
    w = lindley(gaps, service, np.zeros(trials))
    return (w + service)[:, warmup:], np.cumsum(gaps, axis=1)[:, warmup:]


def mmc(rng: np.random.Generator, trials: int, n: int, rho: float, c: int, warmup: int = 2000) -> tuple[Array, Array]:
    """M/M/c FCFS sojourn times (service rate 1 per server, arrival rate ``rho * c``) after ``warmup``."""
    total = n + warmup
    gaps = rng.exponential(1 / (rho * c), (trials, total))
    service = rng.exponential(1.0, (trials, total))
    work = np.zeros((trials, c))
    out = np.empty((trials, total))
    for i in range(total):
        if i:
            work = np.maximum(work - gaps[:, i:i + 1], 0.0)
        work.sort(axis=1)
        out[:, i] = work[:, 0] + service[:, i]
        work[:, 0] += service[:, i]
    return out[:, warmup:], np.cumsum(gaps, axis=1)[:, warmup:]


def ar1_lognormal(rng: np.random.Generator, trials: int, n: int, phi: float, sigma: float = 1.0) -> tuple[Array, Array]:
    """exp(sigma * Z) with Z a stationary Gaussian AR(1) of unit variance, and unit-spaced send times."""
    e = rng.normal(size=(trials, n)) * math.sqrt(1 - phi**2)
    e[:, 0] = rng.normal(size=trials)
    z = signal.lfilter([1.0], [1.0, -phi], e, axis=1)
    return np.exp(sigma * z), np.broadcast_to(np.arange(n, dtype=np.float64), (trials, n)).copy()


def ar1_quantile(q: float, sigma: float = 1.0) -> float:
    from scipy import stats

    return math.exp(sigma * float(stats.norm.ppf(q)))


def iid(rng: np.random.Generator, trials: int, n: int, rho: float, mu: float = 1.0) -> tuple[Array, Array]:
    """Independent draws of the M/M/1 stationary sojourn time (the control)."""
    return rng.exponential(1 / (mu * (1 - rho)), (trials, n)), np.broadcast_to(np.arange(n, dtype=np.float64), (trials, n)).copy()


def failure_bursts(rng: np.random.Generator, trials: int, n: int, p: float, length: float) -> npt.NDArray[np.int64]:
    """0/1 failures of ``n`` requests from a two-state chain: the server is down (every request fails)
    for a geometric number of requests with mean ``length``; down a share ``p`` of the time."""
    leave = 1 / length
    enter = p * leave / (1 - p)
    out = np.zeros((trials, n), dtype=np.int64)
    state = rng.random(trials) < p
    u = rng.random((trials, n))
    for i in range(n):
        out[:, i] = state
        state = np.where(state, u[:, i] > leave, u[:, i] < enter)
    return out
