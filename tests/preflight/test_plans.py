"""The fallback plans' variants (pytest_perfgate.preflight.plans): what vLLM 0.32's own rules allow
for plan B on Qwen2.5-72B, and plan A's eviction arithmetic (issue 26 items 6 and 7)."""

from __future__ import annotations

from pytest_perfgate.preflight.plans import context_parallel, eviction, gpu_kv_tokens, switch_draft, tiered_kv

SC = {"method": "draft_model", "model": "Qwen/Qwen2.5-7B-Instruct", "num_speculative_tokens": 5}


def test_plan_b_on_qwen72b_needs_tp_16_not_2_x_tp() -> None:
    """Prefill CP is MLA-only; decode CP needs TP > the 8 KV heads: 16 GPUs (the old skip said TP x 2 = 8)."""
    v = context_parallel("speculative", 4, heads=64, kv_heads=8, mla=False, speculative_config=SC)
    assert v.gpus == 16 and not v.unavailable
    assert v.args == {"tensor_parallel_size": 16, "decode_context_parallel_size": 2,
                      "speculative_config": {**SC, "draft_tensor_parallel_size": 1}}
    assert "MLA-only" in v.notes[0] and "tensor_parallel_size > 8 KV heads: TP 16 on 16 GPUs" in v.notes[0]
    mla = context_parallel("speculative", 4, heads=128, kv_heads=128, mla=True)
    assert mla.args == {"prefill_context_parallel_size": 2} and mla.gpus == 8


def test_plan_b_without_any_context_parallel_size_says_so() -> None:
    v = context_parallel("s", 1, heads=6, kv_heads=6, mla=False)
    assert v.unavailable.startswith("prefill context parallelism is MLA-only")


def test_plan_a_evicts_more_than_the_gpu_tier_and_fits_the_cpu_tier() -> None:
    gpu, kv = 1_100_000, 327_680  # 72B TP 4 at 0.9 of 4 H200; 320 KiB of KV a token
    assert eviction(gpu, 64 * 2**30 // kv, 8000, 100) == (
        "plan A needs a CPU tier larger than the GPU tier: it holds 209,715 tokens and the GPU 1,100,000; evicting "
        "the GPU and keeping one 8,000-token prompt needs 1,232,000 CPU tokens (raise [params.phase1] "
        "kv_offloading_gib by 487% or more)")
    k, f = eviction(gpu, 512 * 2**30 // kv, 8000, 100)  # type: ignore[misc]
    assert f * 8000 > 1.1 * gpu and (k + f) * 8000 <= 512 * 2**30 // kv and k == 56


def test_gpu_kv_tokens_from_vllms_cache_config_info() -> None:
    key = 'vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="68750"}'
    assert gpu_kv_tokens({key: 1.0, "vllm:prefix_cache_hits": 3.0}) == 1_100_000
    assert gpu_kv_tokens({}) is None


def test_variants_keep_the_base_arguments_apart() -> None:
    assert tiered_kv("s", 512).args == {"kv_offloading_size": 512, "kv_offloading_backend": "native"}
    (d,) = switch_draft("s", SC, ["Qwen/Qwen2.5-14B-Instruct"])
    assert d.args == {"speculative_config": {**SC, "model": "Qwen/Qwen2.5-14B-Instruct"}} and SC["model"].endswith("7B-Instruct")
