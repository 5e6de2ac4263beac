"""KV-cache pressure of an engine run, from the engine's own counters.

- peak ``vllm:kv_cache_usage_perc`` over the gauge polls during the run (``LoadConfig(gauge_interval=...)``)
  and the snapshot after it;
- preemptions: ``vllm:num_preemptions`` after minus before the run;
- recomputed / swapped requests: vLLM v1 preempts by recomputation only (the scheduler frees a
  preempted request's blocks and re-prefills it later; there is no swap space), so every preemption
  is a recomputed request and swapped is 0. An engine that exposes a swap counter
  (``vllm:num_requests_swapped``, vLLM v0) reports its peak instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..verdicts.samples import Samples

KV_USAGE = "vllm:kv_cache_usage_perc"
PREEMPTIONS = "vllm:num_preemptions"
SWAPPED = "vllm:num_requests_swapped"


@dataclass(frozen=True)
class KVPressure:
    peak_usage: float | None  # 0-1; None: the engine exposes no usage gauge
    polls: int                # readings of the gauge behind peak_usage
    preemptions: int | None   # None: no preemption counter
    recomputed: int | None
    swapped: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def perfgate_data(self, metric: str) -> Samples:
        from ..verdicts.samples import SampleError, make_samples

        if metric in ("preemptions", "num_preemptions"):
            if self.preemptions is None:
                raise SampleError(f"preemptions: the engine exposes no {PREEMPTIONS} counter")
            return make_samples([float(self.preemptions)], "", label="preemptions")
        if metric in ("kv_cache_usage", "kv_cache_usage_perc"):
            if self.peak_usage is None:
                raise SampleError(f"kv_cache_usage: the engine exposes no {KV_USAGE} gauge")
            return make_samples([100.0 * self.peak_usage], "%", label="peak kv_cache_usage")
        raise SampleError(f"{metric}: KV-cache pressure measures preemptions and kv_cache_usage")


def kv_pressure(before: Mapping[str, float], after: Mapping[str, float],
                gauges: Sequence[Mapping[str, float]] = ()) -> KVPressure:
    """Pressure of one run from the counters around it and the gauge polls during it."""
    usage = [float(g[KV_USAGE]) for g in (*gauges, after) if KV_USAGE in g]
    pre = None
    if PREEMPTIONS in after:
        pre = max(0, int(round(after[PREEMPTIONS] - before.get(PREEMPTIONS, 0.0))))
    swapped_vals = [float(g[SWAPPED]) for g in (*gauges, after) if SWAPPED in g]
    swapped = int(max(swapped_vals)) if swapped_vals else (0 if pre is not None else None)
    recomputed = None if pre is None else (pre if not swapped_vals else None)
    return KVPressure(max(usage) if usage else None, len(usage), pre, recomputed, swapped)


def of_run(run: Any) -> KVPressure:
    """:func:`kv_pressure` of a ``RunResult``."""
    return kv_pressure(run.counters_before, run.counters_after, run.gauges)
