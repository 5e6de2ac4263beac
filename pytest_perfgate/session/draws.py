"""What ``Perfgate.sample_until_decided`` keeps of its draws: the latest one (its engine gives the
verdict's floor) and the warm-up requests among them (said in the verdict's note)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def warmup_note(draws: Sequence[Any]) -> str:
    """``3 warm-up request(s) excluded ...`` for the runs among ``draws`` (records flagged warm-up)."""
    n = sum(1 for d in draws for r in getattr(d, "records", ()) if getattr(r, "warmup", False))
    return (f"{n} warm-up request(s) excluded: sent first, shaped like the measured ones (a cold engine "
            "never decides a steady-state gate)") if n else ""


def remembering(draw: Callable[[], Any], last: list[Any]) -> Callable[[], Any]:
    """``draw`` that keeps its latest result in ``last[0]``."""

    def wrapped() -> Any:
        got = draw()
        last[:] = [got]
        return got

    return wrapped
