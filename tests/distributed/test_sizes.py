"""Message sizes: nccl-tests sweep and the decode-step activation from a model config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_perfgate.distributed.sizes import SizeError, decode_shape, parse_size, sweep


def test_parse_size_nccl_tests_units() -> None:
    assert [parse_size(s) for s in ("8", "8B", "1K", "64K", "256M", "1G", 12)] == [
        8, 8, 1024, 65536, 256 * 2**20, 2**30, 12]
    for bad in ("", "x", "0", "-1", "1.5", True):
        with pytest.raises(SizeError, match="sweep min|size"):
            parse_size(bad)  # type: ignore[arg-type]


def test_sweep_like_nccl_tests() -> None:
    assert sweep("8", "1M", 8) == [8, 64, 512, 4096, 32768, 262144]
    assert sweep(8, 8, 2) == [8]
    assert sweep("1K", "4K", 2) == [1024, 2048, 4096]
    with pytest.raises(SizeError, match="factor"):
        sweep(8, 64, 1)
    with pytest.raises(SizeError, match="min 64 B > max 8 B"):
        sweep(64, 8)


def test_decode_shape_from_config(tmp_path: Path) -> None:
    cfg = {"num_hidden_layers": 80, "hidden_size": 8192, "torch_dtype": "bfloat16"}  # Qwen2.5-72B
    s = decode_shape(cfg, batch=8)
    assert (s.message_bytes, s.allreduces_per_token) == (8 * 8192 * 2, 160)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": "80"}))
    with pytest.raises(SizeError, match=r"config.json: key 'num_hidden_layers'"):
        decode_shape(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"text_config": cfg}))
    assert decode_shape(tmp_path, dtype="float32").message_bytes == 8192 * 4
    with pytest.raises(SizeError, match="dtype"):
        decode_shape(cfg, dtype="float7")
