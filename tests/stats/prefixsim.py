"""vLLM's accepted-prefix counting, simulated: each step proposes k draft tokens and accepts them
up to the first rejection (then emits one token of its own), a request stops at its token limit
(the last step proposes no more than the tokens left), and each request has its own per-token
acceptance probability (Beta with mean ``mu`` and concentration ``kappa``: heterogeneity)."""

from __future__ import annotations

import numpy as np


def requests(rng: np.random.Generator, n: int, mu: float, kappa: float, k: int,
             limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(accepted, proposed) draft tokens of ``n`` requests of ``limit`` output tokens each."""
    a = np.clip(rng.beta(mu * kappa, (1 - mu) * kappa, n), 1e-9, 1 - 1e-9)
    made, prop, acc = (np.zeros(n, np.int64) for _ in range(3))
    while True:
        live = made < limit
        if not live.any():
            return acc, prop
        drafts = np.where(live, np.clip(np.minimum(k, limit - made - 1), 0, None), 0)
        run = np.floor(np.log(rng.random(n)) / np.log(a)).astype(np.int64)  # P(run >= j) = a^j
        got = np.minimum(run, drafts)
        prop += drafts
        acc += got
        made += np.where(live, got + 1, 0)


def truth(mu: float, kappa: float, k: int, limit: int, n: int = 200_000, seed: int = 0) -> float:
    """The population rate E[accepted] / E[proposed] of that workload (Monte Carlo, ``n`` requests)."""
    acc, prop = requests(np.random.default_rng(seed), n, mu, kappa, k, limit)
    return float(acc.sum() / prop.sum())
