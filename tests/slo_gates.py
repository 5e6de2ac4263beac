"""The SLO phase of the error tests: a latency gate of each kind, a throughput gate and the error-rate
gate, as a run with failed requests is decided against them (tests/core/test_error_verdicts.py
directly, tests/reliability/test_errored_gates.py through the plugin with a server killed mid-run)."""

from __future__ import annotations

#: thresholds.toml's ``[phases.slo]`` and its six gates (an engine table may follow).
SLO_GATES = """
[phases.slo]
[gates.ttft_p95]
phase = "slo"
metric = "ttft"
statistic = "p95"
max = "1500 ms"
[gates.itl_p99]
phase = "slo"
metric = "itl"
statistic = "p99"
max = "200 ms"
[gates.tpot_p99]
phase = "slo"
metric = "tpot"
statistic = "p99"
max = "100 ms"
[gates.out_tput]
phase = "slo"
metric = "output_throughput"
statistic = "value"
min = "10 tok/s"
[gates.err]
phase = "slo"
metric = "error_rate"
statistic = "rate"
max = "1%"
[gates.e2e_p90]
phase = "slo"
metric = "e2e"
statistic = "p90"
max = "3 s"
"""

