"""Sweeps: one load run per request rate or concurrency, and the capacity gate over them; sweeps
over engine arguments, one engine at a time.

``sweep(engine, requests, [1, 2, 4, 8], terms=[Term("ttft", 2.0), Term("tpot", 0.1)], target=4)``
runs the levels in increasing order (``kind="rate"``: open loop, ``base``'s mode if it is poisson or
gamma, else poisson; ``kind="concurrency"``: closed loop with that many in flight), one
:class:`~pytest_perfgate.load.result.RunResult` per level, and decides each level as
:mod:`.capacity` says. By default it stops after the first level that does not pass: the
fixed-sequence search claims nothing beyond it (``full_curve=True`` runs every level anyway, for the
latency-vs-load curve; the verdict is the same). A :class:`Sweep` is a capacity gate's data:
``perfgate.check(sw, "capacity_gate")`` decides it again with the gate's own SLO terms and
confidence (:mod:`.gates`).

:func:`argument_grid` and :func:`engine_sweep` run the same measurement on each point of a grid of
engine arguments (``max_num_seqs``, ``max_num_batched_tokens``): the caller's ``measure(point)``
starts that point's engine (which stops the previous one: one engine at a time), one result per
point, in the grid's order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from ..contract import Engine, Request
from .capacity import CapacityVerdict, Term, level_of
from .result import RunResult
from .runner import run_load
from .schedule import LoadConfig

if TYPE_CHECKING:
    from ..config import Gate
    from ..verdicts.samples import Samples

T = TypeVar("T")


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

    def perfgate_data(self, metric: str) -> Samples:
        """What a results directory keeps of a sweep (store/records.py): the achieved request rate
        of each level, req/s, in level order (the verdict's ``curve`` has every level's latencies).
        A capacity gate is decided by :meth:`perfgate_verdict`, never on these."""
        from ..verdicts.samples import SampleError, make_samples
        from .capacity import load_of

        rates = [load_of(self.results[lv].records, self.kind == "rate").achieved for lv in sorted(self.results)]
        if metric not in ("request_throughput", "concurrency") or not rates or any(r is None for r in rates):
            raise SampleError(f"{metric}: a load sweep is a capacity gate's data (statistic = \"sustained\"); "
                              "gate its runs (sweep.results[level]) for other metrics")
        return make_samples([float(r) for r in rates if r is not None], "req/s", label="achieved req/s per level")

    def perfgate_verdict(self, gate: Gate, c: float) -> dict[str, Any]:
        """A capacity gate (``statistic = "sustained"``) over this sweep's runs: see :mod:`.gates`."""
        from .gates import capacity_fields

        return capacity_fields(gate, self.results, self.kind, c)


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


# ------------------------------------------------------------------ engine-argument sweeps
ENGINE_SWEEP_ARGS = ("max_num_seqs", "max_num_batched_tokens")


def argument_grid(**values: Sequence[Any]) -> list[dict[str, Any]]:
    """The points of a grid of engine arguments, in order (the last argument varies fastest):
    ``argument_grid(max_num_seqs=[2, 4], max_num_batched_tokens=[2048])``."""
    if not values or any(not isinstance(v, (list, tuple)) or not v for v in values.values()):
        raise ValueError(f"argument_grid: each argument needs a non-empty list of values, got {values!r}")
    names = list(values)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(values[n] for n in names))]


def point_name(base: str, point: Mapping[str, Any]) -> str:
    """``baseline-max_num_seqs=4-max_num_batched_tokens=2048``: the engine variant of one point."""
    return "-".join([base, *(f"{k}={v}" for k, v in point.items())])


@dataclass
class ArgumentSweep(Generic[T]):
    """One result per grid point, in the grid's order (``points[i]`` -> ``results[i]``)."""

    points: list[dict[str, Any]]
    results: list[T]

    def items(self) -> list[tuple[dict[str, Any], T]]:
        return list(zip(self.points, self.results, strict=True))


def engine_sweep(points: Sequence[Mapping[str, Any]], measure: Callable[[Mapping[str, Any]], T],
                 *, on_point: Callable[[Mapping[str, Any], T], None] | None = None) -> ArgumentSweep[T]:
    """``measure(point)`` for each grid point in order, one engine at a time: ``measure`` starts the
    point's engine (with the session's engines, ``perfgate_engines.run(variant, ...)`` stops the
    previous engine before it starts the next), and nothing here runs two points at once."""
    if not points:
        raise ValueError("engine_sweep: no grid points")
    seen: set[tuple[tuple[str, Any], ...]] = set()
    for p in points:
        key = tuple(sorted(p.items()))
        if key in seen:
            raise ValueError(f"engine_sweep: grid point {dict(p)} given twice")
        seen.add(key)
    out: ArgumentSweep[T] = ArgumentSweep([dict(p) for p in points], [])
    for p in out.points:
        got = measure(p)
        out.results.append(got)
        if on_point is not None:
            on_point(p, got)
    return out
