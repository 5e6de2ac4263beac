"""Physical floors before anything is measured (floors/): which gates have a threshold below their
floor on their engine's hardware. Cheap: no torch, no model generation (embedded engines are
checked when their models and this machine's probe are already cached). No pytest import."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import Thresholds


def check(th: Thresholds, default: str | None, aliases: Mapping[str, str],
          recorded: Mapping[str, Any] | None) -> tuple[list[str], dict[str, str]]:
    """(header lines, {gate: message} of the infeasible gates). A floor is advice: any error while
    checking becomes one header line, never a failed session."""
    from ..floors import allreduce_from_decisions
    from ..floors import check as check_floors
    from ..floors.cli import cached_models

    try:
        ar = allreduce_from_decisions(recorded)  # phase 3's measurement
        results, _notes = check_floors(th, dict(aliases), default=default, models=cached_models(), probe=False,
                                       allreduce_s=ar)
    except Exception as e:
        return [f"perfgate: floors not checked: {type(e).__name__}: {e}"], {}
    bad = {r.gate: r.message() for r in results if not r.feasible}
    lines = [f"perfgate: {m}" for m in bad.values()]
    if results and not bad:
        lines.append(f"perfgate: floors: {len(results)} gate(s) within physical reach")
    try:  # the selected vLLM engines built with vLLM's own config classes (preflight/)
        from ..preflight import header

        pre_lines, pre_bad = header(th, default, aliases)
    except Exception as e:
        return [*lines, f"perfgate: preflight not run: {type(e).__name__}: {e}"], bad
    for g, m in pre_bad.items():
        bad[g] = f"{bad[g]}; {m}" if g in bad else m
    return [*lines, *(f"perfgate: {x}" for x in pre_lines)], bad
