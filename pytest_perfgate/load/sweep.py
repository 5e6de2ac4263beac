"""Sweeps: one load run per request rate or concurrency, and the capacity gate over them.

``sweep(engine, requests, [1, 2, 4, 8], terms=[Term("ttft", 2.0), Term("tpot", 0.1)], target=4)``
runs the levels in increasing order (``kind="rate"``: open loop, ``base``'s mode if it is poisson or
gamma, else poisson; ``kind="concurrency"``: closed loop with that many in flight), one
:class:`~pytest_perfgate.load.result.RunResult` per level, and decides each level as
:mod:`.capacity` says. By default it stops after the first level that does not pass: the
fixed-sequence search claims nothing beyond it (``full_curve=True`` runs every level anyway, for the
latency-vs-load curve; the verdict is the same).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..contract import Engine, Request
from .capacity import CapacityVerdict, Term, level_of
from .result import RunResult
from .runner import run_load
from .schedule import LoadConfig


@dataclass
class Sweep:
    """Every level's run and the capacity verdict over them."""

    kind: str
    results: dict[float, RunResult] = field(default_factory=dict)
    verdict: CapacityVerdict | None = None

    def curve(self) -> list[dict[str, Any]]:
        """Latency vs load: per level, offered/achieved rate, P50/P99 TTFT and TPOT (s), goodput (req/s)."""
        out = []
        assert self.verdict is not None
        for lv in self.verdict.levels:
            s = self.results[lv.level].summary()
            out.append({"level": lv.level, "offered": lv.load.offered, "achieved": lv.load.achieved,
                        "decision": lv.decision, "goodput": lv.goodput.rate if lv.goodput else None,
                        **{f"{k}_{p}": s[k][p] for k in ("ttft", "tpot") if k in s for p in ("p50", "p99")}})
        return out


def config_for(kind: Literal["rate", "concurrency"], level: float, base: LoadConfig) -> LoadConfig:
    """``base`` at one level: ``rate = level`` (open loop) or ``concurrency = level`` (closed loop)."""
    if kind == "rate":
        mode = base.mode if base.mode in ("poisson", "gamma") else "poisson"
        return replace(base, mode=mode, rate=float(level))
    if level != int(level) or level < 1:
        raise ValueError(f"a concurrency level must be a whole number >= 1, got {level:g}")
    return replace(base, mode="concurrency", concurrency=int(level), rate=None)


def sweep(
    engine: Engine,
    requests: Sequence[Request],
    levels: Sequence[float],
    *,
    terms: Sequence[Term],
    kind: Literal["rate", "concurrency"] = "rate",
    base: LoadConfig | None = None,
    target: float | None = None,
    c: float = 0.95,
    full_curve: bool = False,
    on_level: Callable[[float, RunResult], None] | None = None,
) -> Sweep:
    """Run ``levels`` in increasing order and decide the capacity gate (see the module docstring)."""
    if kind not in ("rate", "concurrency"):
        raise ValueError(f"sweep kind {kind!r}: 'rate' or 'concurrency'")
    if not levels:
        raise ValueError("sweep: no levels")
    if target is not None and not any(math.isclose(target, lv) for lv in levels):
        raise ValueError(f"sweep: capacity target {target:g} is not one of the levels ({', '.join(f'{v:g}' for v in levels)})")
    base = base or LoadConfig(mode="poisson", rate=1.0)
    unit = "req/s" if kind == "rate" else "concurrent requests"
    out = Sweep(kind)
    decided = []
    for level in sorted(levels):
        res = run_load(engine, requests, config_for(kind, level, base),
                       slos={t.metric: t.limit for t in terms})
        out.results[float(level)] = res
        lv = level_of(float(level), res.records, terms, c, open_loop=kind == "rate")
        decided.append(lv)
        if on_level is not None:
            on_level(float(level), res)
        if lv.decision != "pass" and not full_curve:
            break
    out.verdict = CapacityVerdict(target, unit, c, decided)  # levels stopped below the target: its outcome
    return out
