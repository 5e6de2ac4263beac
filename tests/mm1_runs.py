"""Seeded M/M/1 load runs as request records (no engine), shared by the capacity-gate tests
(tests/load/test_capacity_gate_plugin.py writes this module beside its pytester test file) and the
sweep-report tests (tests/writers/test_sweep_report.py)."""

from __future__ import annotations

import numpy as np

from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.result import RunResult


def mm1_run(rng: np.random.Generator, rate: float, mu: float, n: int = 400) -> RunResult:
    """An M/M/1 run from empty at arrival rate ``rate`` and service rate ``mu`` (req/s): TTFT = sojourn
    (Lindley recursion), then 4 tokens 20 ms apart."""
    gaps, serv = rng.exponential(1 / rate, n), rng.exponential(1 / mu, n)
    sent, w, recs = 0.0, 0.0, []
    for i in range(n):
        if i:
            w = max(0.0, w + serv[i - 1] - gaps[i])
            sent += gaps[i]
        t0 = int(sent * 1e9) + 1
        first = t0 + int((w + serv[i]) * 1e9)
        chunks = [first + k * 20_000_000 for k in range(4)]
        recs.append(RequestRecord(index=i, scheduled_ns=t0, sent_ns=t0, chunk_ns=chunks, chunk_tokens=[1] * 4,
                                  end_ns=chunks[-1], output_tokens=4))
    return RunResult(records=recs)
