"""An engine's counter snapshots made safe to keep: a value that is no finite number (a ``/metrics``
line ``vllm:kv_cache_usage_perc NaN``, ``+Inf``, or a user engine's ``None``) is dropped, and the run
says so in one note per counter; every other counter, and everything measured, is kept (a NaN in a
snapshot would otherwise make the run's stored JSON invalid and lose its samples and records)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..runtime.redaction import clean

NAME_LIMIT = 120  # characters of a counter's name in a note


def finite(value: Any) -> float | None:
    """``value`` as a finite float, None when it is none (NaN, +-Inf, not a number, a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:  # an int past the float range
        return None
    return f if math.isfinite(f) else None


class BadCounters:
    """The counters dropped from the snapshots of one run: name -> (how many readings, the first value)."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, str]] = {}

    def keep(self, snapshot: Mapping[str, Any]) -> dict[str, float]:
        """``snapshot`` without its non-finite values (each remembered for :meth:`notes`)."""
        out: dict[str, float] = {}
        for name, value in snapshot.items():
            f = finite(value)
            if f is not None:
                out[str(name)] = f
                continue
            count, first = self.seen.get(str(name), (0, ""))
            self.seen[str(name)] = (count + 1, first or clean(repr(value), 40))
        return out

    def notes(self) -> list[str]:
        """One line per dropped counter, e.g. ``/metrics: vllm:kv_cache_usage_perc was nan in 2
        reading(s): dropped (a counter or gauge is a finite number); the gates on it use the other readings``."""
        return [f"/metrics: {clean(name, NAME_LIMIT)} was {first} in {count} reading(s): dropped (a counter or "
                "gauge is a finite number); the gates on it use the other readings"
                for name, (count, first) in sorted(self.seen.items())]


def kept(snapshots: Iterable[Mapping[str, Any]], bad: BadCounters) -> list[dict[str, float]]:
    """Each of ``snapshots`` through ``bad.keep``."""
    return [bad.keep(s) for s in snapshots]
