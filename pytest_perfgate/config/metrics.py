"""Names of the metrics a gate may refer to (definitions in docs/metrics.md, from METRICS.md).

Tools in this field disagree on names; the canonical name is ours and the aliases are what users
of vLLM bench, AIPerf, guidellm and nccl-tests may type.
"""

from __future__ import annotations

from dataclasses import dataclass

# where a load run (load/result.py) takes a metric from
RECORDS = "records"  # per-request samples from the request records
RUN = "run"  # one run-level rate over the run's duration (a ratio of sums one request at a time)
COUNTERS = "counters"  # the engine's counters and gauges around the run
REQUESTS = "requests"  # failed / measured requests
KV = "kv"  # the KV-pressure summary of the run (load/kv.py)


@dataclass(frozen=True)
class Metric:
    """One row of the metric table: every per-metric rule reads it (no metric-name lists elsewhere).

    ``dimension`` is the metric's own (a "fraction" metric is shown in % even from plain numbers);
    ``source`` is where a load run takes it from ("" when a load run does not measure it); ``slo``:
    a per-request latency an SLO bounds (goodput and the capacity gate take limits on these, and a
    failed or timed-out request censors it: it never got, or finished, its output)."""

    name: str
    dimension: str
    description: str
    aliases: tuple[str, ...] = ()
    source: str = ""
    slo: bool = False


METRICS: tuple[Metric, ...] = (
    Metric("ttft", "time", "time to first streamed chunk carrying output", ("time_to_first_token", "prefill_time"), RECORDS, slo=True),
    Metric("tpot", "time", "(E2E - TTFT) / (output tokens - 1) per request", ("time_per_output_token",), RECORDS, slo=True),
    Metric("itl", "time", "gap between consecutive streamed chunks, pooled", ("inter_chunk_latency", "inter_token_latency"), RECORDS),
    Metric("e2e", "time", "send to last chunk", ("e2el", "latency", "e2e_latency", "end_to_end_latency"), RECORDS, slo=True),
    Metric("queue_time", "time", "actual send minus scheduled send", ("client_queue_time", "send_lag"), RECORDS),
    Metric("decode_rate", "token_rate", "(output tokens - 1) / (E2E - TTFT) per request", ("tps", "decode_tps"), RECORDS),
    Metric("output_throughput", "token_rate", "output tokens / run duration", ("throughput", "output_tps", "tokens_per_second"), RUN),
    Metric("request_throughput", "request_rate", "completed requests / run duration", ("rps",), RUN),
    Metric("goodput", "request_rate", "requests meeting every SLO per second", (), RUN),
    Metric("acceptance_rate", "fraction", "accepted / proposed draft tokens", ("acceptance", "draft_acceptance_rate", "spec_acceptance_rate"), COUNTERS),
    Metric("acceptance_length", "number", "1 + accepted / drafts", ("mean_acceptance_length",), COUNTERS),
    Metric("prefix_cache_hit_rate", "fraction", "prefix cache hits / queries (tokens)", ("cache_hit_rate",), COUNTERS),
    Metric("kv_cache_usage", "fraction", "KV-cache usage gauge (0-1)", ("kv_cache_usage_perc",), COUNTERS),
    Metric("preemptions", "number", "requests the engine preempted during a run (KV cache full)", ("num_preemptions",), KV),
    Metric("error_rate", "fraction", "failed requests / requests", ("errors",), REQUESTS),
    Metric("allreduce_time", "time", "per-iteration all-reduce time", ("allreduce_latency",)),
    Metric("busbw", "bandwidth", "bus bandwidth (nccl-tests convention)", ("bus_bandwidth",)),
    Metric("algbw", "bandwidth", "algorithm bandwidth S / t", ("algorithm_bandwidth",)),
    Metric("fragmentation", "fraction", "1 - allocated / reserved bytes at peak", ("memory_fragmentation",)),
    Metric("quality_loss", "fraction", "relative loss of a quality score", ("accuracy_drop",)),
    Metric("memory", "bytes", "bytes of memory", ("memory_bytes",)),
    Metric("concurrency", "number", "requests kept in flight (a closed loop's concurrent users)", ("concurrent_users", "users")),
    Metric("value", "number", "any plain number", ()),
)

_BY_NAME: dict[str, Metric] = {}
for _m in METRICS:
    _BY_NAME[_m.name] = _m
    for _a in _m.aliases:
        _BY_NAME[_a] = _m


def lookup(name: str) -> Metric | None:
    """The metric called ``name`` or one of its aliases (case-insensitive), else None."""
    return _BY_NAME.get(name.strip().lower())


def known_names() -> list[str]:
    """Every canonical metric name, in table order."""
    return [m.name for m in METRICS]


def slo_names() -> tuple[str, ...]:
    """The per-request latencies an SLO bounds (:attr:`Metric.slo`), in table order: ttft, tpot, e2e."""
    return tuple(m.name for m in METRICS if m.slo)


def from_source(source: str) -> tuple[str, ...]:
    """The metrics a load run takes from ``source`` (``RECORDS``, ``RUN``, ...), in table order."""
    return tuple(m.name for m in METRICS if m.source == source)
