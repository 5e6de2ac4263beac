"""The validity detector, simulated (seeded): how often it calls a healthy client invalid, and how often
it misses a starved one (load/validity.py; figures in docs/client.md).

The loop is modelled by its stalls: callbacks that hold it for ``stall_ms`` each, at Poisson times,
taking a fraction ``busy`` of the run; a probe written at time t is read when the stall covering t
ends (its lag is the stall's residual, plus a base of exponential jitter). Probes every 5 ms, as the
real probe. The allowed error is 1 ms (a 20 ms ITL P99 gate). A stall of S ms over a fraction f of
the time gives a lag P99 of S (1 - 0.01 / f): healthy clients have a true lag P99 of half the
allowance; starved ones of twice it (the client's error at 10% of the threshold), from frequent
short stalls to rare long ones. Each case runs through the real detector (``ClientHealth.of``,
``invalid_cause``), which judges the mean of the run's worst 2.5% of probes (12 or more, up to 3%).

Before that rule the detector judged the lag's P99 itself: rare 1.5 ms stalls on 1.5% of a 2 s run
(20 stalls, ~6 probes in them) were called invalid 7.6% of the time, and 4 ms stalls on 2% of it
were missed 20.1% of the time, a P99 read from the ~4 probes above it swinging with one probe more
or less; the tail's mean (12 probes) swings less: 0.2% and 17.0%. Near the P99's own cliff (stalls
on just over 1% of the time, where the P99 jumps from ~0 to the stall's length) no rule separates a
lag P99 of 0.5 ms from one of 2 ms in 400 probes: 1.2% of 2 s, healthy: 18% invalid (by the P99: 28%).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.config.model import Gate
from pytest_perfgate.load.health import PROBE_INTERVAL_S, ClientHealth
from pytest_perfgate.load.validity import invalid_cause

ALLOWED_MS = 1.0
RUNS = 2000


def _gate() -> Gate:
    doc = {"phases": {"p": {}}, "gates": {"itl_p99": {"phase": "p", "metric": "itl", "statistic": "p99", "max": "20 ms"}}}
    return parse_thresholds(doc, Path("thresholds.toml")).gate("itl_p99")


def stall_ms(p99_ms: float, busy: float) -> float:
    """The stall length whose lag P99 is ``p99_ms`` when stalls take ``busy`` of the time."""
    return p99_ms / (1 - 0.01 / busy)


def invalid_rate(p99_ms: float, busy: float, seconds: float, seed: int, interval_s: float = PROBE_INTERVAL_S) -> float:
    rng = np.random.default_rng(seed)
    gate = _gate()
    s = stall_ms(p99_ms, busy)
    t = np.arange(0, seconds * 1e3, interval_s * 1e3)  # probe times, ms
    hits = 0
    for _ in range(RUNS):
        starts = np.sort(rng.uniform(-s, seconds * 1e3, 1 + rng.poisson(busy / s * (seconds * 1e3 + s))))
        idx = np.searchsorted(starts, t, side="right") - 1
        resid = np.where(idx >= 0, starts[np.maximum(idx, 0)] + s - t, 0.0)
        lag = np.maximum(resid, 0.0) + rng.exponential(0.02, t.size)  # 20 us base jitter
        h = ClientHealth.of([int(x * 1e6) for x in lag], [], 0.5, seconds)
        hits += invalid_cause(gate, h) is not None
    return hits / RUNS


# (busy, seconds, bound): the bound on the rate; rare stalls in a short run are where a 5 ms probe
# resolves least (stalls of 1.5 / 4 ms on 1.5% / 2% of 2 s: 20 and 10 stalls, about one probe in
# three / four of them), and their figures are reported as measured (docs/client.md), not hidden
HEALTHY = [(0.015, 2.0, 0.01), (0.02, 2.0, 0.01), (0.05, 2.0, 0.01), (0.2, 2.0, 0.01), (0.05, 10.0, 0.01)]
STARVED = [(0.02, 2.0, 0.25), (0.02, 10.0, 0.03), (0.05, 2.0, 0.02), (0.2, 2.0, 0.01), (0.05, 10.0, 0.01)]


@pytest.mark.parametrize(("busy", "seconds", "bound"), HEALTHY)
def test_a_healthy_client_is_rarely_invalid(busy: float, seconds: float, bound: float) -> None:
    rate = invalid_rate(0.5 * ALLOWED_MS, busy, seconds, seed=1)
    print(f"healthy, lag P99 = 0.5 x allowed, stalls {busy:.1%} of {seconds:g} s: false invalid {rate:.2%}")
    assert rate <= bound


@pytest.mark.parametrize(("busy", "seconds", "bound"), STARVED)
def test_a_starved_client_is_caught(busy: float, seconds: float, bound: float) -> None:
    rate = 1 - invalid_rate(2.0 * ALLOWED_MS, busy, seconds, seed=2)
    print(f"starved, lag P99 = 2 x allowed, stalls {busy:.1%} of {seconds:g} s: missed {rate:.2%}")
    assert rate <= bound
