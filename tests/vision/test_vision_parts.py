"""Parts of the phase-2 package on a small random CLIP tower and tiny image folders: quantization
paths (bytes, agreement, the damaged path), the KV-cache arithmetic, the ImageFolder loader's errors,
data URIs and chat messages, and the probe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_perfgate.vision import images, memory, quality, quant, vlm


@pytest.fixture(scope="module")
def tower() -> Any:
    import torch
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(0)
    cfg = CLIPVisionConfig(image_size=32, patch_size=8, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, projection_dim=32)
    return CLIPVisionModelWithProjection(cfg).eval()


@pytest.fixture(scope="module")
def pixels() -> Any:
    import torch

    return torch.randn(24, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def _cos_loss(a: Any, b: Any) -> float:
    from pytest_perfgate.vision.encoder import embed

    ea, eb = embed(a, pixels_cache[0]), embed(b, pixels_cache[0])
    return float(1 - np.mean(np.sum(ea * eb, axis=1)))


pixels_cache: list[Any] = []


@pytest.mark.parametrize("path", ["bf16", "int8-weight-only", "int8-dynamic", "torch-dynamic-int8"])
def test_int8_paths_shrink_the_tower_and_keep_embeddings(tower: Any, pixels: Any, path: str) -> None:
    pixels_cache[:] = [pixels]
    q = quant.quantize(tower, path, "cpu")
    before = quant.param_bytes(tower)
    assert q.param_bytes < before * (0.6 if path != "bf16" else 0.55), (q.param_bytes, before)
    loss = _cos_loss(tower, q.model)
    assert 0 < loss < 0.01, loss  # small but measured: never exactly the reference


def test_damaged_path_destroys_agreement(tower: Any, pixels: Any) -> None:
    pixels_cache[:] = [pixels]
    q = quant.quantize(tower, "damaged-w2", "cpu")
    assert _cos_loss(tower, q.model) > 0.05


def test_native_int8_linear_matches_float() -> None:
    """The torch-only W8A8 path (GPU machines without torchao) is exact to int8 rounding."""
    import torch

    lin = torch.nn.Linear(64, 48)
    x = torch.randn(5, 64)
    ref = lin(x)
    for path, tol in (("int8-dynamic", 0.05), ("int8-weight-only", 0.02)):
        got = quant.NativeQuantLinear(lin, path)(x)
        assert got.shape == ref.shape
        assert float((got - ref).abs().max()) < tol * float(ref.abs().max()), path


def test_unavailable_paths_say_why() -> None:
    assert "CUDA" in (quant.available("fp8", "cpu") or "")
    assert "unknown" in (quant.available("int4", "cpu") or "")
    with pytest.raises(quant.Unavailable, match="fp8"):
        quant.quantize(object(), "fp8", "cpu")


def test_kv_tokens_from_the_llm_config() -> None:
    cost = memory.kv_cost(memory.QWEN72B)
    assert cost.bytes_per_token == 2 * 80 * 8 * 128 * 2  # 327,680 B: K and V, 80 layers, 8 KV heads, 128 dims, bf16
    m = memory.freed_kv_tokens(600_000_000, 300_000_000, cost)
    assert m["freed_bytes"] == 300_000_000 and m["kv_tokens_freed"] == 300_000_000 // 327_680
    vlm_cfg = {"text_config": {"num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 256, "dtype": "float32"}}
    assert memory.kv_cost(vlm_cfg).bytes_per_token == 2 * 4 * 4 * 64 * 4
    with pytest.raises(ValueError, match="num_hidden_layers"):
        memory.kv_cost({"hidden_size": 8})


def _folder(root: Path, layout: dict[str, dict[str, int]]) -> Path:
    from PIL import Image

    for sub, classes in layout.items():
        for cls, n in classes.items():
            d = root / sub / cls
            d.mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (16, 16), (i * 20 % 256, 0, 0)).save(d / f"{i}.png")
    return root


def test_image_folder_layout(tmp_path: Path) -> None:
    root = _folder(tmp_path / "imgs", {"objects": {"cat": 4, "dog": 4}, "ocr": {"a": 3, "b": 3}})
    s = images.load_image_folder(root, fine=["ocr"], size=8)
    assert s.images.shape == (14, 8, 8, 3)
    assert s.classes == {"objects": ("cat", "dog"), "ocr": ("a", "b")} and s.fine == frozenset({"ocr"})
    assert 0 < int((~s.train).sum()) < 14  # every class split into fit and eval images
    with pytest.raises(images.ImageSetError, match="not folders here"):
        images.load_image_folder(root, fine=["charts"])


@pytest.mark.parametrize("layout,match", [
    ({"objects": {"cat": 3}}, "at least 2 class folders"),
    ({"objects": {"cat": 3, "dog": 1}}, "at least 2 images"),
])
def test_image_folder_errors_name_the_path(tmp_path: Path, layout: dict[str, dict[str, int]], match: str) -> None:
    root = _folder(tmp_path / "imgs", layout)
    with pytest.raises(images.ImageSetError, match=match):
        images.load_image_folder(root)
    with pytest.raises(images.ImageSetError, match="not found"):
        images.load_image_folder(tmp_path / "nowhere")


def test_data_uri_round_trip_and_messages() -> None:
    img = np.zeros((8, 8, 3), dtype=np.uint8)
    img[2:5, 2:5] = 200
    uri = vlm.data_uri(img)
    assert uri.startswith("data:image/png;base64,")
    msgs, imgs = vlm.split_messages(vlm.multimodal_messages("what?", [uri]))
    assert np.array_equal(np.asarray(imgs[0]), img)
    assert msgs[0]["content"] == [{"type": "image"}, {"type": "text", "text": "what?"}]
    with pytest.raises(ValueError, match="data URI"):
        vlm.decode_data_uri("http://example.com/x.png")


def test_probe_separates_separable_classes() -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 40)
    x = rng.normal(size=(120, 8)) + 3 * np.eye(8)[y]
    probe = quality.fit_probe(x, y, 3)
    assert float(np.mean(probe.predict(x) == y)) > 0.95


def test_decision_api_reads_phase2_memory(tmp_path: Path) -> None:
    """Phase 3 and the memory gates read phase 2's memory figures outside pytest too."""
    import json

    import pytest_perfgate
    from pytest_perfgate.store.decisions import gate_value

    doc = {"schema": "pytest-perfgate/decisions/1", "phases": {"phase2": {"outcome": "passed", "verdicts": [
        {"gate": "vision_kv_tokens_freed", "observed": 1234.0}]}}}
    (tmp_path / "decisions.json").write_text(json.dumps(doc))
    entry = pytest_perfgate.decision("phase2", tmp_path)
    assert entry is not None and gate_value(entry, "vision_kv_tokens_freed") == 1234.0
    assert gate_value(entry, "nope") is None and pytest_perfgate.decision("phase3", tmp_path) is None
