"""The fallback plans' variant engines, as data: perf_tests/test_phase1_fallbacks.py declares these
variants and the preflight builds the same ones with vLLM before a GPU is booked.

A variant is the failing engine's arguments with a few replaced; each comes with the GPUs it
needs, so a plan that vLLM (or the machine) cannot run says why in one line.

The fallback plans' public face (``from pytest_perfgate import plans``; perf_tests/test_phase1_fallbacks.py):
the variants :func:`tiered_kv`, :func:`context_parallel`, :func:`switch_draft`; plan A's sizing
:func:`gpu_kv_tokens`, :func:`eviction`, :data:`EXTERNAL_HITS`, :data:`EXTERNAL_QUERIES`; and an
engine's model shape, :func:`model_shape`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..config import EngineSpec, Thresholds
    from ..roofline.model import ModelSpec


@dataclass(frozen=True)
class Variant:
    plan: str  # [fallbacks.NAME]
    name: str  # the variant engine's name (perfgate_engines.variant)
    args: Mapping[str, Any]  # the arguments replaced on the base engine
    gpus: int = 0  # GPUs it needs (0: as the base engine)
    unavailable: str = ""  # why vLLM cannot run this plan on this model ("" = it can)
    notes: tuple[str, ...] = field(default=())


def tiered_kv(base: str, kv_offloading_gib: float) -> Variant:
    """Plan A: vLLM's CPU KV-cache offloading (``kv_offloading_size`` GiB of CPU memory)."""
    return Variant("tiered_kv_cache", f"{base}+tiered_kv",
                   {"kv_offloading_size": kv_offloading_gib, "kv_offloading_backend": "native"})


def context_parallel(base: str, tp: int, heads: int, kv_heads: int, mla: bool,
                     speculative_config: Mapping[str, Any] | None = None) -> Variant:
    """Plan B through vLLM 0.32's context parallelism, as its own code allows it:

    - prefill context parallelism (``prefill_context_parallel_size``) only on MLA attention
      backends (``AttentionBackend.supports_pcp`` is False for every other backend), on TP x 2 GPUs;
    - decode context parallelism (``decode_context_parallel_size``) for GQA/MQA models only when
      ``tensor_parallel_size`` > the model's KV heads, with dcp <= TP // KV heads and the query heads
      per KV head divisible by dcp (``ModelConfig.verify_with_parallel_config``): the plan raises TP to
      the smallest such size and needs that many GPUs.
    """
    name = f"{base}+context_parallel"
    if mla:
        return Variant("sequence_parallel", name, {"prefill_context_parallel_size": 2}, gpus=2 * tp)
    dcp = 2
    t = next((t for t in range(max(tp, 1), 4 * max(heads, 1) + 1)
              if t > kv_heads and heads % t == 0 and t // max(kv_heads, 1) >= dcp
              and (heads // max(kv_heads, 1)) % dcp == 0), 0)
    why_pcp = ("prefill context parallelism is MLA-only in vLLM 0.32 (supports_pcp is False for every "
               "non-MLA attention backend)")
    if not t:
        return Variant("sequence_parallel", name, {"prefill_context_parallel_size": 2}, gpus=2 * tp,
                       unavailable=f"{why_pcp}, and decode context parallelism needs tensor_parallel_size > "
                                   f"{kv_heads} KV heads dividing {heads} query heads: no such size")
    args: dict[str, Any] = {"tensor_parallel_size": t, "decode_context_parallel_size": dcp}
    note = f"{why_pcp}; decode context parallelism {dcp} needs tensor_parallel_size > {kv_heads} KV heads: TP {t} on {t} GPUs"
    if speculative_config is not None and t != tp:
        # vLLM allows a draft TP of 1 or the target's; the draft's heads need not divide the raised TP
        args["speculative_config"] = {**speculative_config, "draft_tensor_parallel_size": 1}
        note += ", the draft on 1 (draft_tensor_parallel_size = 1)"
    return Variant("sequence_parallel", name, args, gpus=t, notes=(note,))


def switch_draft(base: str, speculative_config: Mapping[str, Any], drafts: Sequence[str]) -> list[Variant]:
    """One variant per candidate draft (``[params.phase1] candidate_drafts``)."""
    return [Variant("switch_draft_model", f"{base}[draft {i + 1}]", {"speculative_config": {**speculative_config,
                                                                                        "model": d}})
            for i, d in enumerate(drafts)]


def variants(base: str, args: Mapping[str, Any], phase1: Mapping[str, Any], shape: Mapping[str, Any] | None,
             fallbacks: Sequence[str]) -> list[Variant]:
    """The variants of the plans in ``fallbacks`` on engine ``base`` (``args``); ``phase1`` is the
    effective ``[params.phase1]`` (embedded overrides applied for an embedded engine), ``shape`` the
    model's config.json (heads, KV heads, MLA) or None when unknown."""
    out: list[Variant] = []
    if "tiered_kv_cache" in fallbacks:
        out.append(tiered_kv(base, float(phase1.get("kv_offloading_gib", 64))))
    if "sequence_parallel" in fallbacks and shape is not None:
        heads = int(shape.get("num_attention_heads", 1))
        kv = int(shape.get("num_key_value_heads", heads))
        mla = bool(shape.get("kv_lora_rank"))  # DeepSeek-style multi-head latent attention
        sc = args.get("speculative_config")
        out.append(context_parallel(base, int(args.get("tensor_parallel_size", 1) or 1), heads, kv, mla,
                                    sc if isinstance(sc, Mapping) else None))
    sc = args.get("speculative_config")
    if "switch_draft_model" in fallbacks and isinstance(sc, Mapping):
        out += switch_draft(base, sc, [str(d) for d in phase1.get("candidate_drafts", ())])
    return out


# ---------------------------------------------------------------- plan A: evict, then re-send
EXTERNAL_HITS = "vllm:external_prefix_cache_hits"  # tokens served from the KV connector (the CPU tier)
EXTERNAL_QUERIES = "vllm:external_prefix_cache_queries"


def gpu_kv_tokens(counters: Mapping[str, float]) -> int | None:
    """Tokens the GPU KV cache holds (``vllm:cache_config_info`` labels num_gpu_blocks x block_size)."""
    import re

    for key in counters:
        if key.startswith("vllm:cache_config_info"):
            blocks = re.search(r'num_gpu_blocks="(\d+)"', key)
            size = re.search(r'block_size="(\d+)"', key)
            if blocks and size:
                return int(blocks.group(1)) * int(size.group(1))
    return None


def eviction(gpu_tokens: int, cpu_tokens: int, prompt_tokens: int, prompts: int) -> tuple[int, int] | str:
    """(re-sent prompts k, filler prompts f) of plan A: f distinct prompts of ``prompt_tokens`` hold
    10% more tokens than the GPU tier (so none of the k first ones stays on the GPU), and the k + f
    prompts fit in the CPU tier (so the k come back from it, the oldest entries of its LRU); else
    the sentence saying what the plan needs."""
    f = -(-int(1.1 * gpu_tokens) // prompt_tokens) + 1
    k = min(prompts, cpu_tokens // prompt_tokens - f)
    if k < 1:
        need = (f + 1) * prompt_tokens
        return (f"plan A needs a CPU tier larger than the GPU tier: it holds {cpu_tokens:,} tokens and the GPU "
                f"{gpu_tokens:,}; evicting the GPU and keeping one {prompt_tokens:,}-token prompt needs "
                f"{need:,} CPU tokens (raise [params.phase1] kv_offloading_gib by "
                f"{(need - cpu_tokens) / max(cpu_tokens, 1):.0%} or more)")
    return k, f


def model_shape(thresholds: Thresholds, spec: EngineSpec) -> ModelSpec | None:
    """The model shape of engine ``spec`` (its ``[models.*]`` table, of an engine it extends, or its
    model's config.json), or None when neither says it."""
    from ..roofline.config import parse

    return parse(thresholds.hardware, thresholds.models).model_for(
        spec.name, spec.args.get("model"), (spec.extends,) if spec.extends else ())
