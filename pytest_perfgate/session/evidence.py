"""What a verdict was computed from: its engines, its warm-up requests, whether it was measured."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..verdicts.verdict import Verdict


def noted(v: Verdict, note: str) -> Verdict:
    """``v`` with ``note`` added to its own note."""
    if not note:
        return v
    from dataclasses import replace
    return replace(v, note="; ".join(x for x in (v.note, note) if x))


def measured(data: Any) -> bool:
    """Is ``data`` something measured (a run, a memory report, a pair of runs), not samples a test made?"""
    from ..verdicts.samples import MetricSource

    parts = data if isinstance(data, (tuple, list)) else (data,)
    return bool(parts) and all(isinstance(p, MetricSource) or (isinstance(p, (tuple, list)) and measured(p))
                               for p in parts)


def engine_infos(data: Any) -> list[Mapping[str, Any]]:
    """Engine info of the run(s) a verdict was computed from, so every number traces to its engine."""
    from ..verdicts.samples import RequestRun

    parts = data if isinstance(data, (tuple, list)) and len(data) == 2 else (data,)
    return [p.engine_info for p in parts if isinstance(p, RequestRun) and p.engine_info]

