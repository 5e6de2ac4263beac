"""Roofline floors of LLM inference (formulas and references in docs/metrics.md#physical-floors).

All times in seconds, rates in tokens/s, FLOPs and bytes as plain floats. ``gpus`` is the number of
devices one engine replica spreads its model over (tensor x pipeline parallel); their peaks and
bandwidths add up (the floor assumes perfect scaling, which is what makes it a floor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .hardware import Hardware
from .model import ModelSpec


@dataclass(frozen=True)
class Floor:
    """A physical bound of one metric: a time floor (``kind="floor"``: nothing finishes sooner) or a
    rate ceiling (``kind="ceiling"``: nothing serves faster), with the work it rests on."""

    metric: str  # "ttft" | "tpot" | "e2e" | "output_throughput"
    value: float  # seconds (floor) or tokens/s (ceiling)
    kind: str  # "floor" | "ceiling"
    bound: str  # "compute" | "memory": which roof is lower
    flops: float  # work of the unit measured (one prefill, one decode step, ...)
    bytes: float
    basis: str  # human-readable: what was assumed

    @property
    def efficiency_kind(self) -> str:
        """MFU for compute-bound work (prefill), MBU for memory-bound work (decode)."""
        return "MFU" if self.bound == "compute" else "MBU"

    def efficiency(self, observed: float) -> float | None:
        """Share of the roof the observed value reaches (MFU or MBU), in (0, 1] for honest data."""
        if not observed or not math.isfinite(observed) or observed <= 0:
            return None
        return self.value / observed if self.kind == "floor" else observed / self.value

    def multiple(self, threshold: float | None) -> float | None:
        """The threshold as a multiple of the floor: < 1 for a time target below its floor (or a rate
        target above its ceiling) -- infeasible."""
        if threshold is None or not self.value:
            return None
        return threshold / self.value if self.kind == "floor" else self.value / threshold if threshold else None


# ------------------------------------------------------------------------------------ prefill
def attention_pairs(prompt: int, cached: int = 0) -> float:
    """(query, key) pairs of causal attention over the new tokens ``cached..prompt-1``."""
    return (prompt * (prompt + 1) - cached * (cached + 1)) / 2


def prefill_flops(m: ModelSpec, prompt: int, cached: int = 0) -> float:
    """2 x active parameters per new token, plus causal attention (QK^T and PV: 4 x heads x head_dim
    per pair and layer), plus the LM head for the last token only."""
    new = max(prompt - cached, 0)
    linear = 2.0 * m.active_matmul_params() * new
    attn = 4.0 * m.layers * m.heads * m.hd * attention_pairs(prompt, min(cached, prompt))
    head = 2.0 * m.vocab * m.hidden if new else 0.0
    return linear + attn + head


def prefill_floor(m: ModelSpec, hw: Hardware, prompt: int, cached: int = 0, gpus: int | None = None,
                  draft: ModelSpec | None = None) -> Floor:
    """Time to first token >= max(FLOPs / peak, weight bytes / bandwidth) of the target (and the
    draft model of a speculative engine, which prefills the same prompt)."""
    g = gpus or hw.count
    flops = prefill_flops(m, prompt, cached) + (prefill_flops(draft, prompt, cached) if draft else 0.0)
    t_c = prefill_flops(m, prompt, cached) / (hw.peak(m.dtype) * g)
    if draft is not None:
        t_c += prefill_flops(draft, prompt, cached) / (hw.peak(draft.dtype) * g)
    nbytes = m.weight_bytes() + (draft.weight_bytes() if draft else 0.0)
    t_m = nbytes / (hw.mem_bandwidth * g)
    cache = f", {cached:,} cached" if cached else ""
    basis = (f"{prompt:,}-token prefill{cache} of {m.describe()}" + (f" + draft {draft.name}" if draft else "")
             + f" on {_hw_text(hw, g, m.dtype)}")
    return Floor("ttft", max(t_c, t_m), "floor", "compute" if t_c >= t_m else "memory", flops, nbytes, basis)


# ------------------------------------------------------------------------------------- decode
def decode_step(m: ModelSpec, batch: int, context: int) -> tuple[float, float]:
    """(FLOPs, bytes) of one decode step: ``batch`` sequences, each with ``context`` tokens in cache.
    Bytes: the weights once per step (of a MoE, only the experts the batch can reach) plus every
    sequence's KV cache."""
    flops = batch * (2.0 * m.active_matmul_params() + 4.0 * m.layers * m.heads * m.hd * context
                     + 2.0 * m.vocab * m.hidden)
    w = m.weight_bytes()
    if m.experts and not m.params_override:
        reach = min(m.experts, batch * max(m.experts_per_token, 1))
        per_expert = 3 * m.hidden * (m.moe_intermediate or m.intermediate) * m.dtype_bytes * m.layers
        w -= (m.experts - reach) * per_expert
    return flops, w + batch * context * m.kv_bytes_per_token()


def decode_floor(m: ModelSpec, hw: Hardware, batch: int = 1, context: int = 1, gpus: int | None = None,
                 draft: ModelSpec | None = None, num_speculative: int = 0, allreduce_s: float | None = None) -> Floor:
    """Time per output token >= one decode step's max(FLOPs / peak, bytes / bandwidth). With
    speculation, the best case accepts all ``k`` drafts: one target step plus ``k`` draft steps
    yield ``k + 1`` tokens. With tensor parallelism over ``gpus`` and a measured all-reduce latency,
    each target step adds :func:`allreduce_per_token` (communication the roofline cannot hide)."""
    g = gpus or hw.count
    flops, nbytes = decode_step(m, batch, context)
    t_c, t_m = flops / (hw.peak(m.dtype) * g), nbytes / (hw.mem_bandwidth * g)
    t = max(t_c, t_m)
    if draft is not None and num_speculative > 0:
        df, db = decode_step(draft, batch, context)
        # verifying k+1 tokens costs (k+1)x the target's FLOPs; the weights are read once
        t_c = ((num_speculative + 1) * flops + num_speculative * df) / (hw.peak(m.dtype) * g)
        t_m = (nbytes + num_speculative * db) / (hw.mem_bandwidth * g)
        t = max(t_c, t_m) / (num_speculative + 1)
        flops, nbytes = (num_speculative + 1) * flops + num_speculative * df, nbytes + num_speculative * db
    spec = f", {num_speculative} speculative tokens all accepted" if draft is not None and num_speculative else ""
    ar = allreduce_per_token(m, g, allreduce_s)
    if ar and allreduce_s:
        t += ar / (num_speculative + 1 if draft is not None and num_speculative else 1)
        spec += f", + {ar * 1e3:.3g} ms TP all-reduce per step ({2 * m.layers} x {allreduce_s * 1e6:.3g} us)"
    basis = f"decode at batch {batch}, {context:,} tokens of context{spec}, {m.describe()} on {_hw_text(hw, g, m.dtype)}"
    return Floor("tpot", t, "floor", "compute" if t_c >= t_m else "memory", flops, nbytes, basis)


def throughput_ceiling(m: ModelSpec, hw: Hardware, batch: int = 1, context: int = 1, gpus: int | None = None,
                       draft: ModelSpec | None = None, num_speculative: int = 0,
                       allreduce_s: float | None = None) -> Floor:
    """Output tokens/s <= batch / per-token decode floor at that batch."""
    f = decode_floor(m, hw, batch, context, gpus, draft, num_speculative, allreduce_s)
    return Floor("output_throughput", batch / f.value, "ceiling", f.bound, f.flops, f.bytes,
                 f.basis.replace("decode at", "throughput at"))


def e2e_floor(m: ModelSpec, hw: Hardware, prompt: int, output: int, cached: int = 0, gpus: int | None = None,
              draft: ModelSpec | None = None, num_speculative: int = 0, allreduce_s: float | None = None) -> Floor:
    """Prefill floor plus ``output - 1`` decode-step floors (context grows from the prompt)."""
    p = prefill_floor(m, hw, prompt, cached, gpus, draft)
    d = decode_floor(m, hw, 1, prompt + output // 2, gpus, draft, num_speculative, allreduce_s)
    t = p.value + max(output - 1, 0) * d.value
    bound = "compute" if p.value >= max(output - 1, 0) * d.value else "memory"
    return Floor("e2e", t, "floor", bound, p.flops + max(output - 1, 0) * d.flops,
                 p.bytes + max(output - 1, 0) * d.bytes, f"{p.basis}, then {output - 1} decode steps")


# ------------------------------------------------------------------------- tensor parallel
def allreduce_per_token(m: ModelSpec, tp: int, allreduce_s: float | None) -> float:
    """Tensor-parallel decode adds two all-reduces per layer (after attention and after the MLP)
    per step: ``2 x layers x latency`` (latency measured for the step's message size, e.g. phase 3's
    NCCL timings). Zero without tensor parallelism."""
    return 0.0 if tp <= 1 or not allreduce_s else 2.0 * m.layers * allreduce_s


# ---------------------------------------------------------------------- speculative decoding
def expected_accepted_length(alpha: float, k: int) -> float:
    """Tokens per target step with ``k`` drafts accepted i.i.d. with probability ``alpha``:
    (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al. 2023, eq. 1)."""
    if not 0.0 <= alpha <= 1.0 or k < 0:
        raise ValueError(f"acceptance must be in [0, 1] and k >= 0, got {alpha}, {k}")
    return float(k + 1) if alpha == 1.0 else (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def spec_speedup_ceiling(alpha: float, k: int, draft_cost: float) -> float:
    """Walltime speed-up ceiling of speculative decoding: E[accepted length] / (1 + k x c), with ``c``
    the draft step's cost relative to a target step (Leviathan et al. 2023, theorem 3.8). Below 1,
    speculation slows decoding. It never shortens prefill (TTFT)."""
    if draft_cost < 0:
        raise ValueError(f"draft cost must be >= 0, got {draft_cost}")
    return expected_accepted_length(alpha, k) / (1.0 + k * draft_cost)


def breakeven_acceptance(k: int, draft_cost: float) -> float:
    """Smallest acceptance rate at which speculation is not slower (speed-up ceiling >= 1)."""
    lo, hi = 0.0, 1.0
    if spec_speedup_ceiling(1.0, k, draft_cost) < 1.0:
        return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if spec_speedup_ceiling(mid, k, draft_cost) < 1.0 else (lo, mid)
    return hi


# ---------------------------------------------------------------------------- feasibility
def gpus_needed(m: ModelSpec, hw: Hardware, prompt: int, target_s: float, draft: ModelSpec | None = None) -> int:
    """Fewest devices whose summed peak brings the prefill floor under ``target_s``."""
    one = prefill_floor(m, hw, prompt, 0, 1, draft).value
    return max(1, math.ceil(one / target_s - 1e-12))


def prefix_hits_needed(m: ModelSpec, hw: Hardware, prompt: int, target_s: float, gpus: int | None = None,
                       draft: ModelSpec | None = None) -> float | None:
    """Smallest share of the prompt served from the prefix cache that brings the prefill floor
    under ``target_s``; None when even a fully cached prompt is above it."""
    if prefill_floor(m, hw, prompt, prompt - 1, gpus, draft).value > target_s:
        return None
    lo, hi = 0, prompt - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if prefill_floor(m, hw, prompt, mid, gpus, draft).value <= target_s:
            hi = mid
        else:
            lo = mid + 1
    return lo / prompt


def _hw_text(hw: Hardware, gpus: int, dtype: str) -> str:
    from .hardware import norm_dtype

    d = norm_dtype(dtype)
    peak = hw.peak(dtype)
    peak_t = f"{peak / 1e12:.4g} TFLOP/s" if peak >= 1e12 else f"{peak / 1e9:.4g} GFLOP/s"
    dev = hw.name if hw.is_cpu else f"{gpus}x {hw.name}" if gpus != 1 else hw.name
    return f"{dev} ({d} {peak_t}, {hw.mem_bandwidth / 1e12:.3g} TB/s each)"
