"""Replaying a trace: its send times, and the order of a multi-turn conversation's turns.

``LoadConfig(mode="trace")`` sends request ``i`` at ``arrival_i * time_scale`` seconds after the
run's start (``arrival`` as :func:`pytest_perfgate.traces.load` set it, relative to the trace's
first row), so ``time_scale = 0.5`` replays the trace twice as fast and 2 half as fast. Any mode
keeps a conversation's order: turn ``k`` of a session is sent only after turn ``k - 1`` of the
same session (in the same pass over the requests) has finished, at its own send time or then,
whichever is later; the request's ``scheduled_ns`` is that later time, so ``queue_time`` stays the
client's own send lag and never includes the wait for the previous answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..contract import Request
from .schedule import LoadConfig, LoadConfigError


def trace_offsets_ns(requests: Sequence[Request], config: LoadConfig) -> npt.NDArray[np.int64]:
    """Send offsets (ns after the run's start) of the measured requests of a ``trace`` run."""
    n = config.num_requests if config.num_requests is not None else len(requests)
    if n > len(requests):
        raise LoadConfigError(f"mode 'trace' sends each of the trace's {len(requests)} requests once; "
                              f"num_requests = {n} is more (replay at a rate to cycle: mode 'poisson')")
    missing = [i for i, r in enumerate(requests[:n]) if r.arrival is None]
    if missing:
        raise LoadConfigError(f"mode 'trace' needs an arrival time on every request; request {missing[0]} "
                              f"({len(missing)} in all) has none (a trace without timestamps replays at a rate: "
                              "mode 'poisson' with rate = R)")
    arr = np.asarray([float(r.arrival or 0.0) for r in requests[:n]], dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise LoadConfigError("mode 'trace': arrival times must be finite and >= 0 seconds")
    return np.asarray(np.round(arr * config.time_scale * 1e9), dtype=np.int64)


class Turns:
    """Which measured request waits for which: turn k - 1 of its session in the same pass."""

    def __init__(self, requests: Sequence[Request]) -> None:
        self.m = len(requests)
        self.requests = requests
        keys = {(r.session, r.turn) for r in requests if r.session}
        self._events: dict[tuple[int, str, int], asyncio.Event] = {}
        self._has = keys

    def _key(self, i: int) -> tuple[int, str, int] | None:
        r = self.requests[i % self.m]
        return (i // self.m, r.session, r.turn) if r.session else None

    def _event(self, key: tuple[int, str, int]) -> asyncio.Event:
        ev = self._events.get(key)
        if ev is None:
            ev = self._events[key] = asyncio.Event()
        return ev

    def depends(self, i: int) -> bool:
        key = self._key(i)
        return i >= 0 and key is not None and (key[1], key[2] - 1) in self._has

    async def wait(self, i: int) -> None:
        """Until the previous turn of request ``i``'s session finished (at once if it has none)."""
        if self.depends(i):
            key = self._key(i)
            assert key is not None
            await self._event((key[0], key[1], key[2] - 1)).wait()

    def done(self, i: int) -> None:
        key = self._key(i)
        if i >= 0 and key is not None:
            self._event(key).set()
