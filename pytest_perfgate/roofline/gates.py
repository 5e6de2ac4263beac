"""Floors of gates: which bound a gate's metric has, for a workload, and whether its threshold can
be met at all (feasibility, checked before anything is measured)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import formulas as F
from .config import EngineFloorInputs

TIME_METRICS = ("ttft", "tpot", "itl", "e2e")
RATE_METRICS = ("output_throughput", "decode_rate")


@dataclass(frozen=True)
class Workload:
    """The shape of the requests a gate measures."""

    prompt: int
    output: int = 1
    cached: int = 0  # prompt tokens served from the prefix cache
    batch: int = 1  # sequences decoded together


def workload_from_params(params: Mapping[str, Any]) -> Workload | None:
    """From ``[params.PHASE]`` (``prompt_tokens``, ``max_tokens``, ``concurrency``)."""
    p = params.get("prompt_tokens")
    if not isinstance(p, int) or isinstance(p, bool) or p <= 0:
        return None
    out = params.get("max_tokens", 1)
    batch = params.get("concurrency", 1)
    return Workload(p, int(out) if isinstance(out, int) else 1, 0, int(batch) if isinstance(batch, int) else 1)


_NONE = -(1 << 63)  # load/columns.py's NONE (an absent count); this layer does not import load


def _median(values: Any) -> float:
    """``statistics.median`` of int64 values (the middle one, or the mean of the middle two)."""
    x = np.sort(values).tolist()
    n = len(x)
    return float(statistics.median(x[(n - 1) // 2:n // 2 + 1]))


def workload_from_run(run: Any) -> Workload | None:
    """The median request of a run result (prompt and output tokens), its concurrency, and the
    share of prompt tokens the engine's prefix-cache counters say were hits."""
    cols = run.columnar() if hasattr(run, "columnar") else None
    if cols is not None:  # a columnar run (load/columns.py): the same medians from its arrays
        keep = cols.ok & (cols.prompt_tokens != 0) & (cols.prompt_tokens != _NONE)
        if not keep.any():
            return None
        out_tokens = cols.output_tokens[keep]
        prompt = int(_median(cols.prompt_tokens[keep]))
        output = int(_median(np.where((out_tokens == _NONE) | (out_tokens == 0), 1, out_tokens)))
    else:
        recs = [r for r in getattr(run, "records", []) or [] if r.ok and r.prompt_tokens]
        if not recs:
            return None
        prompt = int(statistics.median(r.prompt_tokens for r in recs))
        output = int(statistics.median((r.output_tokens or 1) for r in recs))
    cfg = getattr(run, "config", None)
    batch = 1
    if cfg is not None and getattr(cfg, "mode", "sequential") != "sequential":
        batch = int(getattr(cfg, "concurrency", None) or 1)
    cached = 0
    before, after = getattr(run, "counters_before", {}) or {}, getattr(run, "counters_after", {}) or {}
    hits = after.get("vllm:prefix_cache_hits", 0.0) - before.get("vllm:prefix_cache_hits", 0.0)
    queries = after.get("vllm:prefix_cache_queries", 0.0) - before.get("vllm:prefix_cache_queries", 0.0)
    if queries > 0 and hits > 0:
        cached = int(prompt * min(hits / queries, 1.0))
    return Workload(prompt, max(output, 1), cached, max(batch, 1))


def metric_floor(metric: str, inp: EngineFloorInputs, w: Workload) -> F.Floor | None:
    """The floor (time metrics) or ceiling (rate metrics) of ``metric`` for workload ``w``."""
    m, hw, g, d, k, ar = inp.model, inp.hardware, inp.gpus, inp.draft, inp.num_speculative, inp.allreduce_s
    ctx = w.prompt + w.output // 2
    if metric == "ttft":
        return F.prefill_floor(m, hw, w.prompt, w.cached, g, d)
    if metric in ("tpot", "itl"):
        return F.decode_floor(m, hw, w.batch, ctx, g, d, k, ar)
    if metric == "e2e":
        return F.e2e_floor(m, hw, w.prompt, w.output, w.cached, g, d, k, ar)
    if metric == "output_throughput":
        return F.throughput_ceiling(m, hw, w.batch, ctx, g, d, k, ar)
    if metric == "decode_rate":
        f = F.decode_floor(m, hw, w.batch, ctx, g, d, k, ar)
        return F.Floor("decode_rate", 1.0 / f.value, "ceiling", f.bound, f.flops, f.bytes, f.basis)
    return None


@dataclass(frozen=True)
class Feasibility:
    gate: str
    engine: str
    hardware: str
    floor: F.Floor
    threshold: float
    multiple: float  # threshold / floor (time) or ceiling / threshold (rate): < 1 is infeasible
    expected: float  # efficiency assumed for "feasible in practice" ([hardware] expected_mfu/mbu)
    needs: str = ""  # "needs >= 9 GPUs or >= 53% prefix-cache hits"

    @property
    def feasible(self) -> bool:
        return self.multiple * self.expected >= 1.0

    def message(self, unit_fmt: Any = None) -> str:
        """``gate G: infeasible on 4x H200: needs >= 9 GPUs or >= 53% prefix-cache hits (ttft floor
        305 ms vs max 150 ms: threshold 0.49x the floor; 8,000-token prefill of ...)``."""
        fmt = unit_fmt or _fmt
        what = "floor" if self.floor.kind == "floor" else "ceiling"
        op = "max" if self.floor.kind == "floor" else "min"
        at = f" at the expected {self.expected:.0%} {self.floor.efficiency_kind}" if self.expected < 1.0 else ""
        head = f"gate {self.gate}: {'infeasible' if not self.feasible else 'feasible'} on {self.hardware}"
        if self.needs and not self.feasible:
            head += f": {self.needs}"
        shown = self.floor.value / self.expected if self.floor.kind == "floor" else self.floor.value * self.expected
        return (f"{head} ({self.floor.metric} {what} {fmt(shown, self.floor)}{at} vs {op} "
                f"{fmt(self.threshold, self.floor)}: threshold {self.multiple:.2g}x the {what}; {self.floor.basis})")


def _fmt(v: float, f: F.Floor) -> str:
    if f.kind == "ceiling":
        return f"{v:,.4g} tok/s"
    return f"{v * 1e3:,.4g} ms" if v < 10 else f"{v:,.4g} s"


def feasibility(gate: Any, inp: EngineFloorInputs, w: Workload, expected_mfu: float = 1.0,
                expected_mbu: float = 1.0) -> Feasibility | None:
    """Compare a gate's threshold with its floor; None when the gate has no floor (comparisons,
    ratios, acceptance, recorded-only gates)."""
    if gate.compare or gate.threshold is None or gate.direction is None:
        return None
    f = metric_floor(gate.metric, inp, w)
    if f is None:
        return None
    thr = float(gate.threshold.base)
    # a max on a time or a min on a rate can be infeasible; the other directions never are
    if (f.kind == "floor") != (gate.direction == "max"):
        return None
    mult = f.multiple(thr)
    if mult is None:
        return None
    expected = expected_mfu if f.bound == "compute" else expected_mbu
    needs = ""
    if mult * expected < 1.0:
        needs = _needs(gate.metric, inp, w, thr, expected)
    hw = "this CPU" if inp.hardware.is_cpu else inp.hardware.with_count(inp.gpus).describe()
    return Feasibility(gate.name, inp.engine, hw, f, thr, mult, expected, needs)


def _needs(metric: str, inp: EngineFloorInputs, w: Workload, thr: float, expected: float) -> str:
    parts = []
    if metric == "ttft" and not inp.hardware.is_cpu:
        one = F.prefill_floor(inp.model, inp.hardware, w.prompt, w.cached, 1, inp.draft).value / expected
        parts.append(f"needs >= {max(1, math.ceil(one / thr - 1e-12))} GPUs")
    elif metric in ("tpot", "itl", "e2e", "output_throughput", "decode_rate") and not inp.hardware.is_cpu:
        f1 = metric_floor(metric, _with_gpus(inp, 1), w)
        if f1 is not None:
            ratio = (f1.value / expected) / thr if f1.kind == "floor" else thr / (f1.value * expected)
            parts.append(f"needs >= {max(1, math.ceil(ratio - 1e-12))} GPUs")
    if metric in ("ttft", "e2e"):
        h = F.prefix_hits_needed(inp.model, inp.hardware, w.prompt, thr * expected, inp.gpus, inp.draft)
        parts.append(f">= {math.ceil(h * 100)}% prefix-cache hits" if h is not None
                     else "no prefix-cache hit rate suffices")
    if not parts:
        return "needs faster hardware"
    return " or ".join(parts) if parts[0].startswith("needs") else "needs " + " or ".join(parts)


def _with_gpus(inp: EngineFloorInputs, g: int) -> EngineFloorInputs:
    from dataclasses import replace

    return replace(inp, gpus=g)
