"""Tuning sweep of communication settings (NCCL_* on GPUs, gloo's on CPU).

A configuration is a name and the environment variables it sets; it applies to the ranks'
environment only (see :func:`.launch.launch`), never to this process. Every configuration's
all-reduce time distribution is kept. The best is the one with the lowest median; its gain over the
default is ``median(default) - median(best)`` with a one-sided lower confidence bound from the
exact order-statistic difference bound of :mod:`.pertoken` (q = 0.5). The bound is taken at
confidence ``1 - (1 - c) / (k - 1)`` for k configurations (Bonferroni over the k - 1 comparisons
with the default), so it still holds for the configuration that was picked *because* it looked best.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .pertoken import quantile_difference

#: settings a sweep may set; anything else is refused (a typo must not silently measure the default)
KNOWN_PREFIXES = ("NCCL_", "GLOO_", "TORCH_GLOO_", "TORCH_NCCL_", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class CommConfig:
    name: str
    env: Mapping[str, str] = field(default_factory=dict)


def parse_configs(table: Mapping[str, Any], where: str = "[params.phase3.sweep]") -> list[CommConfig]:
    """``{"default": {}, "omp1": {OMP_NUM_THREADS = "1"}}`` -> configs; "default" first (added if missing)."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: must be a table of name = {{ VAR = \"value\" }}")
    out: list[CommConfig] = []
    for name, env in table.items():
        if not isinstance(env, Mapping):
            raise ValueError(f"{where}: {name} must be a table of environment variables, got {env!r}")
        clean: dict[str, str] = {}
        for k, v in env.items():
            if not str(k).startswith(KNOWN_PREFIXES):
                raise ValueError(f"{where}: {name}.{k}: not a communication setting "
                                 f"(allowed prefixes: {', '.join(KNOWN_PREFIXES)})")
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise ValueError(f"{where}: {name}.{k} must be a string or integer, got {v!r}")
            clean[str(k)] = str(v)
        out.append(CommConfig(str(name), clean))
    if not any(c.name == "default" for c in out):
        out.insert(0, CommConfig("default", {}))
    out.sort(key=lambda c: c.name != "default")
    if len(out) < 2:
        raise ValueError(f"{where}: a sweep needs at least one configuration besides 'default'")
    return out


@dataclass(frozen=True)
class SweepRow:
    config: CommConfig
    comm_env: Mapping[str, str]  # what the ranks reported they ran with
    times_s: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.quantile(np.asarray(self.times_s), 0.5, method="inverted_cdf"))

    @property
    def p99(self) -> float:
        return float(np.quantile(np.asarray(self.times_s), 0.99, method="inverted_cdf"))


@dataclass(frozen=True)
class SweepResult:
    rows: tuple[SweepRow, ...]
    confidence: float
    best: str
    gain_s: float  # median(default) - median(best), seconds (positive: best is faster)
    gain_lower_s: float  # one-sided lower bound of that gain at the (Bonferroni-adjusted) confidence
    per_config_confidence: float

    def table(self) -> list[dict[str, Any]]:
        d = self.rows[0]
        out = []
        for r in self.rows:
            b = quantile_difference(np.asarray(d.times_s), np.asarray(r.times_s), 0.5, self.per_config_confidence)
            out.append({"config": r.config.name, "env": dict(r.config.env), "comm_env": dict(r.comm_env),
                        "n": len(r.times_s), "p50_us": r.median * 1e6, "p99_us": r.p99 * 1e6,
                        "gain_us": b.observed * 1e6, "gain_lower_us": b.lower * 1e6, "gain_upper_us": b.upper * 1e6,
                        "times_us": [t * 1e6 for t in r.times_s]})
        return out

    def summary(self) -> str:
        if self.best == "default":
            return (f"tuning sweep ({len(self.rows)} configs): no configuration beat the default median "
                    f"({self.rows[0].median * 1e6:.0f} us)")
        lo = self.gain_lower_s * 1e6
        return (f"tuning sweep ({len(self.rows)} configs): best {self.best}, median gain "
                f"{self.gain_s * 1e6:.1f} us over default ({self.rows[0].median * 1e6:.0f} us); "
                f"{self.confidence * 100:.0f}% lower bound {lo:.1f} us"
                + (" (not a significant gain)" if not lo > 0 else ""))


def run_sweep(configs: Sequence[CommConfig], measure: Callable[[CommConfig], tuple[Sequence[float], Mapping[str, str]]],
              confidence: float = 0.95) -> SweepResult:
    """``measure(config) -> (per-iteration seconds, comm env the ranks reported)`` for each config."""
    if not configs or configs[0].name != "default":
        raise ValueError("run_sweep: the first configuration must be 'default'")
    rows = []
    for c in configs:
        times, env = measure(c)
        rows.append(SweepRow(c, dict(env), tuple(float(t) for t in times)))
    k = len(rows)
    per = 1 - (1 - confidence) / max(1, k - 1)
    best = min(rows, key=lambda r: r.median)
    if best is rows[0]:
        return SweepResult(tuple(rows), confidence, "default", 0.0, float("-inf"), per)
    b = quantile_difference(np.asarray(rows[0].times_s), np.asarray(best.times_s), 0.5, per)
    return SweepResult(tuple(rows), confidence, best.config.name, b.observed, b.lower, per)
