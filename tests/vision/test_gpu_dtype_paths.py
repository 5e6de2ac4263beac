"""The GPU phase-2 dtype paths, checked with CPU tensors (issue 26 items 4 and 5)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _tiny_llava() -> object:
    vision = transformers.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                           num_attention_heads=2, image_size=32, patch_size=8)
    text = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                    num_key_value_heads=2, vocab_size=64)
    cfg = transformers.LlavaConfig(vision_config=vision, text_config=text, image_token_index=63)
    torch.manual_seed(0)
    return transformers.LlavaForConditionalGeneration(cfg).eval()


def test_a_half_precision_tower_feeds_the_float32_projector() -> None:
    """Defect 5: the fp16 pipeline's tower output went into the fp32 projector uncast."""
    from pytest_perfgate.vision.vlm import cast_to_projector

    m = _tiny_llava()
    m.model.vision_tower.to(torch.bfloat16)  # the CPU's half type; fp16 on CUDA is the same dtype logic
    px = torch.randn(1, 3, 32, 32)
    with pytest.raises(RuntimeError, match="dtype"), torch.inference_mode():
        m.model.get_image_features(pixel_values=px)
    assert cast_to_projector(m) is not None
    with torch.inference_mode():
        feats = m.model.get_image_features(pixel_values=px)
    while not isinstance(feats, torch.Tensor):  # a tensor, a list of them or an output object, by version
        feats = feats[0] if isinstance(feats, (list, tuple)) else feats.pooler_output
    assert feats.dtype == torch.float32


def test_torchao_fp8_quantizes_a_bfloat16_copy_of_a_half_reference() -> None:
    """Defect 4: torchao's FP8 PerRow asserts bfloat16 weights; the GPU reference is fp16."""
    from pytest_perfgate.vision.quant import torchao_weight_dtype

    assert torchao_weight_dtype("fp8", torch.float16) is torch.bfloat16
    assert torchao_weight_dtype("fp8", torch.float32) is torch.bfloat16
    assert torchao_weight_dtype("fp8", torch.bfloat16) is None
    assert torchao_weight_dtype("int8-dynamic", torch.float16) is None


def test_phase2_on_a_gpu_gates_the_configured_path_not_the_cpu_one() -> None:
    """Defect 3: encoder = "embedded" pulled the embedded table's CPU-only torch-dynamic-int8 onto a GPU."""
    from pathlib import Path

    from pytest_perfgate.config import load_thresholds
    from pytest_perfgate.vision.suite import params

    p2 = load_thresholds(Path(__file__).parents[2] / "thresholds.toml").params["phase2"]
    gpu, cpu = params(p2, "cuda"), params(p2, "cpu")
    assert gpu["vision_quant"] == "int8-dynamic" and cpu["vision_quant"] == "torch-dynamic-int8"
    assert gpu["max_per_class"] == cpu["max_per_class"] == 100  # the embedded budgets still apply


def test_a_siglip_tower_without_a_local_preprocessor_gets_siglips_normalisation(tmp_path: object,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 12: a SigLIP tower named by hub id got CLIP's mean/std."""
    from pytest_perfgate.vision.encoder import CLIP_MEAN, normalisation

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert normalisation("google/siglip-no-such-tower", "siglip_vision_model") == ((0.5,) * 3, (0.5,) * 3)
    assert normalisation("openai/clip-no-such-tower", "clip_vision_model")[0] == CLIP_MEAN
