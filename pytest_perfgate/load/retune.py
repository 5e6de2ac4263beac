"""The batch re-tune the roadmap asks for after phase 1 ("if speculation passes, batch size must be
re-tuned before phase 2"): pick the engine arguments (``max_num_seqs``, ``max_num_batched_tokens``)
whose load sweep sustains the most under the phase's SLOs.

Each grid point's sweep is decided by the capacity gate at ``1 - (1 - c) / K`` for K points
(Bonferroni over the points: choosing the best of K by the data and claiming its level at c would
pass a point at its boundary up to K times as often). The chosen point is the one with the largest
sustained level; ties go to the earlier point of the grid (list it smallest batch first: the
cheapest in memory). Its verdict carries the chosen arguments in ``details`` (decisions.json), where
phase 2 reads them back with :func:`retuned_args`.

The re-tune's public face (``from pytest_perfgate import retune``; perf_tests/test_phase1_retune.py):
:func:`choose`, :func:`details_of`, :func:`retuned_args`, :func:`per_point_confidence`, and what a grid
point's sweep is made of: :class:`Sweep`, :func:`argument_grid`, :func:`engine_sweep`,
:func:`point_name` (sweep.py), :func:`level_of` (capacity.py), :func:`terms_of` (gates.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .capacity import Term
from .capacity import level_of as level_of
from .gates import terms_of as terms_of
from .sweep import Sweep as Sweep
from .sweep import argument_grid as argument_grid
from .sweep import engine_sweep as engine_sweep
from .sweep import point_name as point_name

ARG_PREFIX = "arg."


@dataclass(frozen=True)
class Choice:
    """The chosen grid point, its index, the per-point sustained levels and the confidence used."""

    index: int
    point: dict[str, Any]
    sustained: list[float | None]
    confidence: float  # per point: 1 - (1 - c) / K
    points: tuple[dict[str, Any], ...] = ()  # the whole grid, in order

    def text(self) -> str:
        per = ", ".join(f"{_args(p)}: {s:g}" if s is not None else f"{_args(p)}: none"
                        for p, s in zip(self.points, self.sustained, strict=True))
        return f"chose {_args(self.point)} (sustained per point at {self.confidence:.4g}: {per})"


def _args(p: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items())


def per_point_confidence(c: float, k: int) -> float:
    return 1 - (1 - c) / k


def choose(points: Sequence[Mapping[str, Any]], sweeps: Sequence[Sweep], terms: Sequence[Term],
           c: float) -> Choice:
    """The point whose sweep sustains the highest level, each decided at 1 - (1 - c) / K."""
    if not points or len(points) != len(sweeps):
        raise ValueError(f"retune: {len(points)} grid points and {len(sweeps)} sweeps: one sweep per point")
    ck = per_point_confidence(c, len(points))
    sustained: list[float | None] = []
    for sw in sweeps:
        best = None
        for level in sorted(sw.results):
            lv = level_of(level, sw.results[level].records, terms, ck, open_loop=sw.kind == "rate")
            if lv.decision != "pass":
                break
            best = level
        sustained.append(best)
    score = [s if s is not None else -math.inf for s in sustained]
    i = max(range(len(points)), key=lambda j: (score[j], -j))  # ties: the earlier point
    return Choice(i, dict(points[i]), sustained, ck, tuple(dict(p) for p in points))


def details_of(choice: Choice) -> dict[str, float]:
    """The chosen arguments as verdict details (``arg.max_num_seqs``: 4.0)."""
    return {ARG_PREFIX + k: float(v) for k, v in choice.point.items() if isinstance(v, (int, float))}


def retuned_args(decision: Mapping[str, Any] | None, gate: str) -> dict[str, int]:
    """The re-tuned engine arguments recorded in a phase's decision (``perfgate.decision(phase)``) by
    gate ``gate``'s verdict, {} when the phase has no such passing verdict."""
    if not decision:
        return {}
    from ..verdicts.record import VerdictRecord

    for v in map(VerdictRecord.read, decision.get("verdicts", [])):
        if v.gate == gate and v.outcome == "pass":
            return {k[len(ARG_PREFIX):]: int(x) for k, x in v.details.items() if k.startswith(ARG_PREFIX)}
    return {}
