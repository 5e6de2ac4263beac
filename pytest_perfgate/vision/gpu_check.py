"""Phase 2 on a CUDA GPU (``scripts/gpu-check.sh``): CLIP ViT-L/14-336 with random weights, bf16 vs
INT8 (weight-only, dynamic) vs FP8, images/s at batch 1 and 32, embedding agreement, parameter bytes,
torch.cuda peak memory, and the KV-cache tokens the freed bytes buy for the roadmap's 72B model.

Random weights: no download, no network. Agreement (1 - mean cosine) is meaningful with random
weights, a probe accuracy is not (the CPU suite measures that on the trained tiny tower).
Run: ``python -m pytest_perfgate.vision.gpu_check`` (prints a Markdown table; < 3 minutes on an H200).
"""

from __future__ import annotations

import sys
import time
from typing import Any

VIT_L_336 = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                 image_size=336, patch_size=14, projection_dim=768, hidden_act="quick_gelu")


def vit_l(dtype: Any) -> Any:
    import torch
    import transformers

    tf: Any = transformers
    torch.manual_seed(0)
    m: Any = tf.CLIPVisionModelWithProjection(tf.CLIPVisionConfig(**VIT_L_336))
    return m.to("cuda", dtype).eval()


def peak_bytes(model: Any, x: Any) -> int:
    import torch

    from .encoder import _input_dtype

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        model(pixel_values=x.to("cuda", _input_dtype(model)))
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def pipeline_peak_bytes(vision: Any, path: str) -> dict[str, int]:
    """torch.cuda peak memory of the encoder stage of both pipelines: the reference tower and the
    ``path`` tower, each encoding 32 images (the language model is the same in both pipelines; its
    share is what the freed bytes buy, ``vision_kv_tokens_freed``)."""
    from .quant import quantize

    x = vision.pixels[:32]
    ref = peak_bytes(vision.encoder.model, x)
    q = quantize(vision.encoder.model, path, "cuda")
    return {"fp16": ref, "quantized": peak_bytes(q.model, x)}


def main() -> int:
    import torch
    import torch.nn.functional as F

    from .memory import QWEN72B, freed_kv_tokens, kv_cost
    from .quant import Unavailable, param_bytes, quantize, time_images_per_second

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    ref = vit_l(torch.bfloat16)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 3, 336, 336, generator=gen)
    with torch.inference_mode():
        e_ref = F.normalize(ref(pixel_values=x[:32].to("cuda", torch.bfloat16)).image_embeds.float(), dim=-1)
    ref_bytes = param_bytes(ref)
    print(f"CLIP ViT-L/14-336 random weights on {torch.cuda.get_device_name(0)}, torch {torch.__version__}; "
          f"reference bf16, {ref_bytes / 1e6:.1f} MB of parameters")
    print()
    print("| path | img/s b=1 | img/s b=32 | vs bf16 b=1 | vs bf16 b=32 | 1-mean cos | param MB | peak MB b=32 | KV tokens freed (72B, bf16) |")
    print("|---|---|---|---|---|---|---|---|---|")
    base: dict[int, float] = {}
    for path in ("bf16", "int8-weight-only", "int8-dynamic", "fp8"):
        try:
            model = ref if path == "bf16" else quantize(ref, path, "cuda").model
        except Unavailable as why:
            print(f"| {path} | skipped: {why} |||||||")
            continue
        except Exception as err:  # a kernel this GPU/torch lacks: say so, keep going
            print(f"| {path} | failed: {type(err).__name__}: {str(err)[:120]} |||||||")
            continue
        ips = {b: time_images_per_second(model, x, b, min_seconds=1.0)["images_per_s"] for b in (1, 32)}
        if path == "bf16":
            base = ips
        with torch.inference_mode():
            from .encoder import _input_dtype

            e = F.normalize(model(pixel_values=x[:32].to("cuda", _input_dtype(model))).image_embeds.float(), dim=-1)
        cos = float(1 - (e * e_ref).sum(-1).mean())
        pb = param_bytes(model)
        mem = freed_kv_tokens(ref_bytes, pb, kv_cost(QWEN72B))
        print(f"| {path} | {ips[1]:,.0f} | {ips[32]:,.0f} | {ips[1] / base[1]:.2f}x | {ips[32] / base[32]:.2f}x | "
              f"{cos:.5f} | {pb / 1e6:.1f} | {peak_bytes(model, x[:32]) / 1e6:,.0f} | {mem['kv_tokens_freed']:,} |")
        if path != "bf16":
            del model
            torch.cuda.empty_cache()
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
