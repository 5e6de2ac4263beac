"""The phase-2 dtype paths a GPU run takes, run on this device (scripts/gpu-check.sh): ``python -m
pytest_perfgate.vision.gpu_paths [--cpu]``. Exit 1 when a path that must run fails (a defect),
0 when each ran or said why it cannot here.

1. the fp16 pipeline: a half-precision vision tower before a float32 projector (transformers'
   LLaVA, tiny), through :func:`pytest_perfgate.vision.vlm.cast_to_projector`;
2. torchao FP8 (PerRow) of an fp16 reference (:func:`pytest_perfgate.vision.quant.quantize`, a
   bfloat16 copy), forward included; "skipped: <why>" where this device has no FP8.
"""

from __future__ import annotations

import sys
from typing import Any


def _tiny_llava() -> Any:
    import torch
    import transformers

    vision = transformers.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                           num_attention_heads=2, image_size=32, patch_size=8)
    text = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                    num_key_value_heads=2, vocab_size=64)
    torch.manual_seed(0)
    tf: Any = transformers
    return tf.LlavaForConditionalGeneration(tf.LlavaConfig(vision_config=vision, text_config=text,
                                                           image_token_index=63)).eval()


def fp16_pipeline(device: str) -> str:
    import torch

    from .vlm import cast_to_projector

    half = torch.float16 if device == "cuda" else torch.bfloat16
    m = _tiny_llava().to(device)
    m.model.vision_tower.to(half)
    cast_to_projector(m)
    with torch.inference_mode():
        m.model.get_image_features(pixel_values=torch.randn(2, 3, 32, 32, device=device))
    return f"ok: {str(half).removeprefix('torch.')} tower -> float32 projector on {device}"


def fp8_of_fp16(device: str) -> str:
    import torch

    from .quant import Unavailable, quantize

    ref = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256))
    ref = ref.to(device, torch.float16 if device == "cuda" else torch.float32).eval()
    try:
        q = quantize(ref, "fp8", device)
    except Unavailable as e:
        return f"skipped: {e}"
    x = torch.randn(16, 256, device=device, dtype=next(q.model.parameters()).dtype)
    with torch.inference_mode():
        y = q.model(x)
    return f"ok: fp8 of a {q.reference_dtype} reference ({q.param_bytes} B), forward {tuple(y.shape)} {y.dtype}"


def main(argv: list[str]) -> int:
    import torch

    device = "cpu" if "--cpu" in argv or not torch.cuda.is_available() else "cuda"
    bad = 0
    print("| phase-2 path | result |\n|---|---|")
    for name, check in (("fp16 pipeline (tower -> projector dtype)", fp16_pipeline),
                        ("torchao FP8 on the fp16 reference", fp8_of_fp16)):
        try:
            out = check(device)
        except Exception as e:  # a defect: the path must run or say why it cannot
            out, bad = f"DEFECT: {type(e).__name__}: {e}", bad + 1
        print(f"| {name} | {out} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
