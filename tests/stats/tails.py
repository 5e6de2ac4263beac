"""Seeded heavy-tailed load-test models (issue 39, "Over the budget" rows 1 and 2): rows = trials,
arrival order, ``(values, send_times)`` as :mod:`queues`.

* :func:`pareto_mg1`: M/G/1 FCFS sojourn times with Pareto service (shape ``a``, mean 1), started in
  its exact stationary law; :func:`pareto_mg1_quantile` its stationary quantile (the
  Pollaczek-Khinchine law sampled independently: the wait is a geometric sum of residual services);
* :func:`chunked_prefill`: TTFT of a continuous-batching server with chunked prefill: ``slots``
  requests in flight, each step carries at most ``budget`` tokens (one per decoding request, the rest
  prefill chunks in admission order) and takes ``base + per_token x tokens`` s, so a long prompt slows
  every request in flight; :func:`chunked_quantile` its long-run quantile (long simulations;
  :data:`CHUNKED_TTFT` holds them at the default load, about 0.75 of what the server can take).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from queues import lindley

Array = npt.NDArray[np.float64]


def pareto(rng: np.random.Generator, a: float, size: tuple[int, ...] | int) -> Array:
    """Pareto (Type I) draws of shape ``a`` and mean 1: ``x_m U^(-1/a)``, ``x_m = (a - 1) / a``."""
    return np.asarray((a - 1) / a * (1.0 + rng.pareto(a, size)), dtype=np.float64)


def _residual(rng: np.random.Generator, a: float, size: int) -> Array:
    """The equilibrium (residual) law of the mean-1 Pareto: U(0, x_m) w.p. x_m, else Pareto(a - 1, x_m)."""
    xm = (a - 1) / a
    low = rng.random(size) < xm
    return np.where(low, rng.random(size) * xm, xm * (1.0 + rng.pareto(a - 1, size)))


def stationary_wait(rng: np.random.Generator, size: int, rho: float, a: float) -> Array:
    """Pollaczek-Khinchine: the stationary FCFS wait is a Geometric(rho) sum of residual services."""
    k = rng.geometric(1 - rho, size) - 1  # P(k) = (1 - rho) rho^k
    r = _residual(rng, a, int(k.sum()))
    owner = np.repeat(np.arange(size), k)
    return np.bincount(owner, weights=r, minlength=size).astype(np.float64)


def pareto_mg1(rng: np.random.Generator, trials: int, n: int, rho: float, a: float = 2.5) -> tuple[Array, Array]:
    """Sojourn times of an M/G/1 queue with mean-1 Pareto(``a``) service at utilisation ``rho``,
    started in steady state, and send times."""
    gaps = rng.exponential(1 / rho, (trials, n))
    service = pareto(rng, a, (trials, n))
    w = lindley(gaps, service, stationary_wait(rng, trials, rho, a))
    return w + service, np.cumsum(gaps, axis=1)


@functools.cache
def pareto_mg1_quantile(q: float, rho: float, a: float = 2.5, draws: int = 4_000_000) -> float:
    """The stationary q-quantile of the sojourn time (independent draws of W + S; seeded)."""
    rng = np.random.default_rng(39)
    x = stationary_wait(rng, draws, rho, a) + pareto(rng, a, draws)
    return float(np.quantile(x, q))


def chunked_prefill(rng: np.random.Generator, trials: int, n: int, rate: float = 11.0, slots: int = 8,
                    budget: int = 512, base: float = 0.010, per_token: float = 0.00005, prompt: float = 300.0,
                    tokens: float = 40.0, warmup: int = 500) -> tuple[Array, Array]:
    """TTFT (s) of ``n`` requests after ``warmup`` and their send times, trials x n (vectorised over
    trials). Prompts: log-normal (mean ``prompt`` tokens, log-sd 1); outputs Geometric(mean ``tokens``)."""
    total = n + warmup
    sent = np.cumsum(rng.exponential(1 / rate, (trials, total)), axis=1)
    plen = np.maximum(1, rng.lognormal(np.log(prompt) - 0.5, 1.0, (trials, total))).astype(np.int64)
    olen = rng.geometric(1 / tokens, (trials, total))
    first = np.full((trials, total), np.nan)
    req = np.full((trials, slots), -1, dtype=np.int64)
    pre = np.zeros((trials, slots), dtype=np.int64)
    dec = np.zeros((trials, slots), dtype=np.int64)
    t = np.zeros(trials)
    nxt = np.zeros(trials, dtype=np.int64)
    rows = np.arange(trials)
    while True:
        active = req >= 0
        live = active.any(axis=1) | (nxt < total)
        if not live.any():
            break
        idle = ~active.any(axis=1) & (nxt < total)
        t = np.where(idle, np.maximum(t, sent[rows, np.minimum(nxt, total - 1)]), t)
        for _ in range(slots):  # admit FCFS into free slots at this step boundary
            free = req < 0
            ok = free.any(axis=1) & (nxt < total)
            ok &= sent[rows, np.minimum(nxt, total - 1)] <= t
            if not ok.any():
                break
            r, s = rows[ok], np.argmax(free[ok], axis=1)
            req[r, s], pre[r, s], dec[r, s] = nxt[ok], plen[r, nxt[ok]], olen[r, nxt[ok]]
            nxt[ok] += 1
        active = req >= 0
        decoding = active & (pre == 0)
        left = budget - decoding.sum(axis=1)
        prefilling = active & (pre > 0)
        order = np.argsort(np.where(prefilling, req, np.iinfo(np.int64).max), axis=1, kind="stable")
        p_sorted = np.take_along_axis(np.where(prefilling, pre, 0), order, axis=1)
        before = np.cumsum(p_sorted, axis=1) - p_sorted
        chunk_sorted = np.clip(left[:, None] - before, 0, p_sorted)
        chunk = np.zeros_like(pre)
        np.put_along_axis(chunk, order, chunk_sorted, axis=1)
        work = decoding.sum(axis=1) + chunk.sum(axis=1)
        t = np.where(work > 0, t + base + per_token * work, t)
        dec = np.where(decoding, dec - 1, dec)
        done_pre = prefilling & (chunk == pre) & (chunk > 0)
        pre = pre - chunk
        rr, ss = np.nonzero(done_pre)
        first[rr, req[rr, ss]] = t[rr]
        dec = np.where(done_pre, dec - 1, dec)  # the prefill's step samples the first token
        req = np.where(active & (pre == 0) & (dec <= 0), -1, req)
    ttft = first - sent
    return ttft[:, warmup:], sent[:, warmup:]


# chunked_quantile(q) at the default 11 requests/s (40 seeded runs of 50,000; 9 req/s: 0.2019 / 0.4212 s)
CHUNKED_TTFT = {0.95: 0.44426150876538456, 0.99: 0.7981935263258144}


@functools.cache
def chunked_quantile(q: float, rate: float = 11.0, trials: int = 40, n: int = 50_000) -> float:
    """The long-run q-quantile of :func:`chunked_prefill`'s TTFT, pooled over long seeded runs."""
    v, _ = chunked_prefill(np.random.default_rng(2039), trials, n, rate)
    return float(np.quantile(v, q))


def long_run_quantile(draw: Callable[[np.random.Generator], Array], q: float, seed: int = 2039) -> float:
    """The q-quantile pooled over ``draw(rng)`` (long seeded runs of a model without a closed form)."""
    return float(np.quantile(draw(np.random.default_rng(seed)), q))
