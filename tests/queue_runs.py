"""Seeded queueing models as per-request arrays (send time, end time, latency), many trials at once,
for the dependence simulations (tests/stats/test_dependent_*.py, benchmarks/bench_dependence_gates.py).

* :func:`mm1`: Poisson arrivals at ``rate``, one FCFS exponential server at ``mu``; the latency is the
  sojourn (wait + service), stationary law Exponential(mu - rate). Lindley's recursion in closed form
  (W_n = P_n - min(-W_0, P_1..P_n), P the partial sums of service - gap), so it is vectorised.
  ``stationary=True`` draws the first wait from the stationary law (else the queue starts empty).
* :func:`closed_loop`: ``users`` requests always in flight (no think time) on one FCFS exponential
  server: request i is sent when request i - users ends; its latency is the sum of ``users`` services.
* :func:`batching`: a continuous-batching server: requests join a running batch of up to ``slots``
  at the next step; each step takes ``step`` s x (1 + load per active request); a request needs a
  prefill step then a geometric number of decode steps (``tokens`` on average).
"""

from __future__ import annotations

import math

import numpy as np

Arr = np.ndarray


def mm1(rng: np.random.Generator, trials: int, n: int, rate: float, mu: float,
        stationary: bool = False) -> tuple[Arr, Arr, Arr]:
    """(sent, done, sojourn), each trials x n, seconds."""
    gaps = rng.exponential(1 / rate, (trials, n))
    gaps[:, 0] = 0.0
    serv = rng.exponential(1 / mu, (trials, n))
    x = np.zeros((trials, n))
    x[:, 1:] = serv[:, :-1] - gaps[:, 1:]
    p = np.cumsum(x, axis=1)
    w0 = np.zeros(trials)
    if stationary:
        busy = rng.random(trials) < rate / mu
        w0 = np.where(busy, rng.exponential(1 / (mu - rate), trials), 0.0)
    floor = p.copy()
    floor[:, 0] = -w0
    w = p - np.minimum.accumulate(floor, axis=1)
    sent = np.cumsum(gaps, axis=1)
    soj = w + serv
    return sent, sent + soj, soj


def closed_loop(rng: np.random.Generator, trials: int, n: int, users: int, mu: float) -> tuple[Arr, Arr, Arr]:
    """(sent, done, latency), trials x n: ``users`` in flight, one FCFS exponential server."""
    done = np.cumsum(rng.exponential(1 / mu, (trials, n)), axis=1)
    sent = np.zeros((trials, n))
    sent[:, users:] = done[:, :-users] if users < n else sent[:, users:]
    return sent, done, done - sent


def batching(rng: np.random.Generator, n: int, rate: float, slots: int = 16, step: float = 0.02,
             tokens: float = 30.0, per_request: float = 0.03) -> tuple[Arr, Arr, Arr]:
    """(sent, first token, end) of one open-loop run against a continuous-batching server (s).

    A step advances every active request by one token and takes ``step * (1 + per_request * active)``
    s; a waiting request (FCFS) joins at a step boundary when a slot is free, its first step being its
    prefill (its first token at that step's end); it then decodes Geometric(1 / tokens) tokens."""
    sent = np.cumsum(rng.exponential(1 / rate, n))
    need = rng.geometric(1 / tokens, n)
    first = np.full(n, math.nan)
    end = np.full(n, math.nan)
    left = np.zeros(n, dtype=np.int64)
    active: list[int] = []
    nxt, t = 0, 0.0
    while nxt < n or active:
        if not active and nxt < n and sent[nxt] > t:
            t = float(sent[nxt])
        while nxt < n and sent[nxt] <= t and len(active) < slots:
            active.append(nxt)
            left[nxt] = need[nxt] + 1
            nxt += 1
        t += step * (1 + per_request * len(active))
        keep = []
        for i in active:
            left[i] -= 1
            if math.isnan(first[i]):
                first[i] = t
            if left[i] <= 0:
                end[i] = t
            else:
                keep.append(i)
        active = keep
    return sent, first, end
