"""One rule for waiting on subprocesses and engines: a timeout scales with how busy the machine is.

``scaled(seconds)`` = ``seconds`` x ``$PERFGATE_TIMEOUT_FACTOR`` (default 1) x the measured load
(the 1-minute load average per CPU, at least 1, at most :data:`MAX_LOAD_FACTOR`). On a quiet
machine a timeout is what it says; with a second job beside it (a CPU hog on both cores of a
2-core runner reads as load 2 per CPU or more) the wait grows with it instead of failing.
"""

from __future__ import annotations

import os

MAX_LOAD_FACTOR = 8.0


def load_factor() -> float:
    """The 1-minute load average per CPU, clamped to ``[1, MAX_LOAD_FACTOR]`` (1 where unknown)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # pragma: no cover - no load average on this platform
        return 1.0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(max(load / max(cpus, 1), 1.0), MAX_LOAD_FACTOR)


def env_factor() -> float:
    """``$PERFGATE_TIMEOUT_FACTOR`` (a positive number), 1 when unset."""
    raw = os.environ.get("PERFGATE_TIMEOUT_FACTOR", "").strip()
    if not raw:
        return 1.0
    try:
        f = float(raw)
    except ValueError:
        raise ValueError(f"PERFGATE_TIMEOUT_FACTOR: must be a positive number, got {raw!r}") from None
    if not f > 0:
        raise ValueError(f"PERFGATE_TIMEOUT_FACTOR: must be a positive number, got {raw!r}")
    return f


def scaled(seconds: float) -> float:
    """``seconds`` scaled by the environment factor and the measured load (see the module doc)."""
    return seconds * env_factor() * load_factor()
