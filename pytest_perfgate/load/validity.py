"""A run whose client did not keep up decides no timing gate: its verdict is **invalid**.

The rule (docs/client.md): every timestamp the client takes is late by the loop lag at that moment
(:mod:`.health`: a chunk that arrived while the loop was busy waits for it), and an open loop's
sends are late by its send lag. A timing gate (a per-request time: TTFT, ITL, TPOT, E2E, queue
time; or a goodput gate's SLO limits) tolerates a client error of :data:`ALLOWED_FRACTION` of its
threshold (5%: 7.5 ms for a 150 ms TTFT P99 gate, 1 ms for a 20 ms ITL P99 gate). The run is
invalid for that gate when the loop lag exceeds it (except for a pass of a max gate on TTFT or E2E,
which a late read only lengthens: :data:`LONGER_ONLY`), or the send lag's P99 exceeds it and 5% of
the schedule's mean gap (:func:`send_allowance`). The loop lag judged is the **mean of the run's
worst 2.5%** (12 probes or more, up to 3%; over time or over the run's events, the larger: :func:`judged_lag`),
not its P99: a stall counts in proportion to the share of the run it could have touched, so a few
probes either way move it a little, where they move a P99 read from ~20 tail probes a lot (rare
1.5 ms stalls in a 2 s run: 7.6% false invalid by the P99, 0.2% by the tail mean).
**Invalid is raised before the client's error reaches 10% of the threshold** (the 2x margin covers
the sampling noise: tests/load/test_validity_sim.py measures the false-invalid and miss rates).
Rates, counters and comparison gates are not judged (their client error is not a time).
A pass or fail whose bound is farther from the threshold than the run's worst loop lag stands
(:func:`stands`: the client cannot have made it).
Workers on several hosts (load/ray_workers.py): a host's clock-offset uncertainty over the send
allowance makes the run invalid too (its share of the schedule may start that much early or late).

An invalid verdict keeps its numbers (the raw verdict's observed value, bounds and n, not gated),
names the figure, the allowed error, the gate and the fix, and counts like an error (exit 1, no
fallback triggered). ``--perfgate-no-validity`` (``[perfgate] validity = false``) keeps the raw
verdict and notes the figure instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..config.metrics import RECORDS, lookup
from .health import PROBE_INTERVAL_S, TAIL_MIN_PROBES, ClientHealth, tail_fraction

if TYPE_CHECKING:
    from ..config import Gate
    from ..verdicts.verdict import Verdict

ALLOWED_FRACTION = 0.05  # client error a timing gate tolerates, as a fraction of its threshold
# a late read only lengthens these (the send is stamped at the socket write, the chunk at its read):
# a pass against a max stands whatever the loop lag (a late send still distorts the load: send lag)
LONGER_ONLY = frozenset({"ttft", "e2e"})
TARGET_CPU_SHARE = 0.5  # the loop CPU share per worker the suggested worker count aims at
STARVED_SHARE = 0.1  # a lagging loop that used less CPU than this waited for the machine, not for itself
# a starved loop whose process's other threads used this much CPU (of a core), and 3x the loop's own: a
# thread of the client's own process held the GIL (a pure-Python thread beside the load loop). Measured
# on a 2-core machine at load 12: a hog thread got 19-40% of a core while the loop got 2-3%; without
# it the other threads (the lag probe) used 1%
OWN_THREADS_SHARE = 0.1
OWN_THREADS_RATIO = 3.0
EVIDENT_LAG_S = 0.01  # a starved loop lagging this much (5% of a 200 ms threshold) is said during the run
INVALID = "invalid"


def _ms(x: float) -> str:
    """``4.2 ms``, ``150 ms``, ``2 s``: three significant digits, no trailing zeros."""
    return f"{x:.3g} s" if x >= 1 else f"{x * 1e3:.3g} ms"


def allowed_error(gate: Gate) -> tuple[float, str] | None:
    """(the client error ``gate`` tolerates in seconds, what it derives from: ``ttft p99 at 150 ms``),
    None for a gate the client's lag does not bias by a time (rates, counters, comparisons)."""
    if gate.compare:
        return None
    m = lookup(gate.metric)
    if gate.slo:  # a goodput gate: its tightest per-request limit
        limits = [limit for _, _, limit in gate.slo if math.isfinite(limit) and limit > 0]
        if not limits:
            return None
        tight = min(limits)
        return ALLOWED_FRACTION * tight, f"{gate.name}'s tightest SLO limit {_ms(tight)}"
    if m is None or m.dimension != "time" or m.source != RECORDS or gate.threshold is None:
        return None
    thr = gate.threshold.base
    if not (math.isfinite(thr) and thr > 0):
        return None
    return ALLOWED_FRACTION * thr, f"{m.name} {gate.statistic.text} at {_ms(thr)}"


def health_of(data: Any) -> ClientHealth | None:
    """The client health of a run, of several runs (the worst figures), None when not measured."""
    if isinstance(data, (list, tuple)):
        parts = [h for h in (health_of(d) for d in data) if h is not None]
        return ClientHealth.worst(parts) if parts else None
    h = getattr(data, "health", None)
    return h if isinstance(h, ClientHealth) else None


def _workers_of(data: Any) -> int:
    runs = data if isinstance(data, (list, tuple)) else [data]
    return max((int(getattr(getattr(r, "config", None), "workers", 1) or 1) for r in runs), default=1)


def suggested_workers(h: ClientHealth, workers: int) -> int:
    """Worker processes that would bring each loop near :data:`TARGET_CPU_SHARE` (at least one more)."""
    share = h.cpu_share if math.isfinite(h.cpu_share) else 1.0
    return max(workers + 1, math.ceil(workers * share / TARGET_CPU_SHARE))


def send_allowance(limit: float, h: ClientHealth) -> float:
    """The send lag a run tolerates: the gate's allowed error, or :data:`ALLOWED_FRACTION` of the
    schedule's mean gap when that is larger (a late send does not bias the latency measured from
    it; it distorts the arrival process, whose scale is the gap)."""
    return max(limit, ALLOWED_FRACTION * h.send_gap) if math.isfinite(h.send_gap) else limit


def _lag_cannot_flip(gate: Gate, outcome: str) -> bool:
    """A pass of a max gate on a time the client's lag only lengthens (TTFT, E2E)."""
    m = lookup(gate.metric)
    return outcome == "pass" and gate.direction == "max" and not gate.slo and m is not None and m.name in LONGER_ONLY


def judged_lag(h: ClientHealth) -> tuple[float, str]:
    """(the loop lag validity judges, in seconds; its name in a cause): the mean of the run's worst
    2.5% (:func:`.health.tail_mean`), or the P99 in figures from before it was measured."""
    if math.isnan(h.loop_lag_tail):
        return h.loop_lag_p99, f"loop lag P99 {_ms(h.loop_lag_p99)}"
    worst = f"worst {tail_fraction(h.probes) * 100:.3g}%" if h.probes else "tail"
    return h.loop_lag_tail, f"loop lag {_ms(h.loop_lag_tail)} (mean of its {worst}; P99 {_ms(h.loop_lag_p99)})"


def invalid_cause(gate: Gate, h: ClientHealth, workers: int = 1, outcome: str = "") -> str | None:
    """``loop lag P99 4.2 ms > 1.5 ms allowed for ttft p99 at 150 ms (5% of it): set workers = 4``,
    None when the client kept up at this gate's resolution (``outcome``: the raw verdict's; the loop
    lag does not judge a pass it could only have made harder, :data:`LONGER_ONLY`)."""
    allowed = allowed_error(gate)
    if allowed is None:
        return None
    limit, what = allowed
    lag, lag_name = judged_lag(h)
    loop_lag = math.nan if _lag_cannot_flip(gate, outcome) else lag
    over = [(lag_name, loop_lag, limit),
            (f"send lag P99 {_ms(h.send_lag_p99)}", h.send_lag_p99, send_allowance(limit, h)),
            # hosts whose clocks are known to +-u start their shares of the schedule up to u apart
            (f"clock offset uncertainty {_ms(h.clock_uncertainty)}", h.clock_uncertainty, send_allowance(limit, h))]
    over = [(name, x, lim) for name, x, lim in over if math.isfinite(x) and x > lim]
    if not over:
        return None
    figures = ", ".join(name + (f" (> {_ms(lim)}: {ALLOWED_FRACTION:.0%} of the {_ms(h.send_gap)} mean gap)"
                                if lim > limit else "") for name, _, lim in over)
    cpu = f"; client loop CPU {h.cpu_share * 100:.0f}%" if math.isfinite(h.cpu_share) else ""
    fix = starved_fix(h, workers) or f"set workers = {suggested_workers(h, workers)} (or lower the load)"
    if all(name.startswith("clock") for name, _, _ in over):
        fix = "put the client hosts on a faster link to the coordinator (or run the workers on one host)"
    return (f"client did not keep up: {figures} > {_ms(limit)} allowed for {what} "
            f"({ALLOWED_FRACTION:.0%} of it){cpu}: {fix}")


def starved_fix(h: ClientHealth, workers: int = 1) -> str | None:
    """What starved a loop that lagged with little CPU of its own (< :data:`STARVED_SHARE`) and the
    fix: a thread of the client's own process holding the GIL when the process's other threads used
    :data:`OWN_THREADS_SHARE` of a core and 3x the loop thread's CPU (worker processes, each with
    its own GIL, help), else other processes taking the machine (more workers will not help); None
    for a loop that was busy itself."""
    if not (math.isfinite(h.cpu_share) and h.cpu_share < STARVED_SHARE):
        return None
    own = h.process_cpu_share - h.cpu_share
    if math.isfinite(own) and own >= max(OWN_THREADS_SHARE, OWN_THREADS_RATIO * h.cpu_share):
        return (f"GIL contention inside the client's process: its other threads used {own * 100:.0f}% of a core "
                f"while the loop thread got {h.cpu_share * 100:.0f}% (a CPU-bound Python thread beside the load "
                f"loop holds the GIL): set workers = {max(workers + 1, 2)} (separate processes, each its own GIL) "
                "or move the CPU-bound threads out of the test process")
    theirs = f" (the client's process used {h.process_cpu_share * 100:.0f}% CPU)" if math.isfinite(h.process_cpu_share) else ""
    return f"other processes starved the client of CPU{theirs} (more workers will not help): run on a quieter machine"


def starvation_notice(h: ClientHealth, elapsed_s: float, workers: int = 1) -> str | None:
    """The line said once, during the run, as soon as a window of it (:meth:`.health.LoopProbe.window`)
    shows the client starved: its loop lagging over :data:`EVIDENT_LAG_S` with little CPU of its own
    (what starved it, and the fix: :func:`starved_fix`); None otherwise."""
    lag, lag_name = judged_lag(h)
    fix = starved_fix(h, workers)
    if fix is None or h.probes < TAIL_MIN_PROBES or not (math.isfinite(lag) and lag > EVIDENT_LAG_S):
        return None
    return (f"client starved at {elapsed_s:.1f} s: {lag_name}, client loop CPU {h.cpu_share * 100:.0f}%: {fix}; "
            "timing gates on this run may be invalid")


def stands(v: Verdict, gate: Gate, h: ClientHealth) -> bool:
    """The raw decision holds whatever the client's lag did: every timestamp of the run is late by
    at most the worst loop lag measured (``loop_lag_max``, plus one probe interval), so every per-request time, and every
    order statistic and bound of them, is off by at most that much; a pass or fail whose bound is
    farther than that from the threshold cannot have been made by the client (a 10.9 ms ITL P90,
    bound 11.7 ms, against 200 ms stands with a 17 ms lag). The send lag is not covered (a late
    send distorts the load itself): a run over its send allowance stays invalid."""
    # a stall that began just after a probe arrived shows in the next one: up to one interval less
    e = h.loop_lag_max + PROBE_INTERVAL_S
    thr = gate.threshold.base if gate.threshold is not None else math.nan
    if v.outcome not in ("pass", "fail") or gate.direction is None or not (math.isfinite(e) and math.isfinite(thr)):
        return False
    allowed = allowed_error(gate)
    if allowed is None or gate.slo:
        return False
    for x in (h.send_lag_p99, h.clock_uncertainty):  # a late or misplaced send distorts the load itself
        if math.isfinite(x) and x > send_allowance(allowed[0], h):
            return False
    if (v.outcome == "pass") == (gate.direction == "max"):  # the claim: the statistic is under thr
        return v.upper + e < thr
    return v.lower - e > thr


def figures(h: ClientHealth, limit: float) -> dict[str, float]:
    """The verdict details of an invalid verdict (seconds, a fraction)."""
    out = {"client_allowed_s": limit, "client_loop_lag_p99_s": h.loop_lag_p99,
           "client_loop_lag_tail_s": h.loop_lag_tail, "client_send_lag_p99_s": h.send_lag_p99,
           "client_cpu_share": h.cpu_share, "client_clock_uncertainty_s": h.clock_uncertainty}
    return {k: v for k, v in out.items() if math.isfinite(v)}


def apply(v: Verdict, gate: Gate, data: Any, *, on: bool = True) -> Verdict:
    """``v`` made **invalid** when its run's client did not keep up at the gate's resolution (``on``),
    else noted with the figure (validity off); ``v`` itself for any other gate or run. An error
    verdict stays an error (it decided nothing either)."""
    if v.outcome in ("error", INVALID):
        return v
    h = health_of(data)
    if h is None:
        return v
    cause = invalid_cause(gate, h, _workers_of(data), v.outcome)
    if cause is None or stands(v, gate, h):
        return v
    allowed = allowed_error(gate)
    assert allowed is not None
    if not on:
        return replace(v, note="; ".join(x for x in (v.note, cause + " (validity off: the raw verdict stands)") if x))
    note = "; ".join(x for x in (cause, f"raw verdict {v.outcome.upper()}", v.note) if x)
    return replace(v, outcome=INVALID, note=note, needed=None,
                   details={**v.details, **figures(h, allowed[0])})


def is_invalid(outcomes: Sequence[str]) -> bool:
    return INVALID in outcomes
