"""Another host's CLOCK_MONOTONIC against the coordinator's: an NTP-style ping exchange.

Each round stamps the coordinator's clock ``t0``, asks the host for its clock (``r``: a Ray actor
call, load/ray_workers.py) and stamps ``t1``. If the host read its clock at some moment in
``[t0, t1]``, its offset (host minus coordinator) is ``r - (t0 + t1) / 2`` to within ``(t1 - t0) / 2``.
Of several rounds the one with the smallest round trip is kept (queueing only adds delay, so the
shortest round trip is the least disturbed one) and its half round trip is the **uncertainty**:
a bound, not a standard error. The one assumption: the host's read falls inside the round trip,
which holds whatever the asymmetry of the two legs (an asymmetric link moves the true offset
within the bound, never out of it). Clocks drift apart by at most a few ppm (CLOCK_MONOTONIC is
NTP-slewed: 500 ppm at worst): 5 us in a 10 s run at 0.5 ppm, ignored against a round trip.

Per-request times stay host-local: a record's stamps are all taken on one host, and a duration
(TTFT, ITL, E2E) is a difference of two of them. :func:`to_coordinator` only shifts every stamp
of a record by the same integer, so its durations are exactly the host's; the shift puts the
record on the coordinator's timeline (throughput windows, the run's start and end) to within the
host's uncertainty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..contract import RequestRecord

ROUNDS = 16  # ping rounds per host (the first warms the call path up and is rarely the shortest)


@dataclass(frozen=True)
class ClockOffset:
    """A host's clock minus the coordinator's, in ns, within +-``uncertainty_ns`` (half the best round trip)."""

    offset_ns: int
    uncertainty_ns: int
    rounds: int

    @property
    def offset_s(self) -> float:
        return self.offset_ns / 1e9

    @property
    def uncertainty_s(self) -> float:
        return self.uncertainty_ns / 1e9


def estimate(remote: Callable[[], int], local: Callable[[], int], rounds: int = ROUNDS) -> ClockOffset:
    """The offset of the clock ``remote()`` reads against ``local()``: the min-round-trip round of ``rounds``."""
    if rounds < 1:
        raise ValueError(f"clock offset: rounds must be >= 1, got {rounds}")
    best: tuple[int, int] | None = None  # (round trip, offset * 2)
    for _ in range(rounds):
        t0 = local()
        r = remote()
        t1 = local()
        rtt = t1 - t0
        if rtt < 0:
            raise ValueError(f"clock offset: the local clock went backwards ({t0} -> {t1} ns)")
        if best is None or rtt < best[0]:
            best = (rtt, 2 * r - t0 - t1)
    assert best is not None
    rtt, twice = best
    return ClockOffset(offset_ns=twice // 2, uncertainty_ns=(rtt + 1) // 2, rounds=rounds)


def to_local(coordinator_ns: int, offset: ClockOffset) -> int:
    """A coordinator time (the common start) on the host's clock."""
    return coordinator_ns + offset.offset_ns


def to_coordinator(rec: RequestRecord, offset: ClockOffset) -> RequestRecord:
    """``rec`` (stamped on the host) with every stamp moved onto the coordinator's clock by one shift:
    its durations are unchanged (module doc)."""
    d = offset.offset_ns
    if rec.scheduled_ns is not None:
        rec.scheduled_ns -= d
    if rec.sent_ns:
        rec.sent_ns -= d
    rec.chunk_ns = [t - d for t in rec.chunk_ns]
    if rec.end_ns is not None:
        rec.end_ns -= d
    return rec
