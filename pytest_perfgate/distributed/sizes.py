"""Message sizes of an all-reduce benchmark: the decode-step activation of tensor-parallel inference
(from a model config) and an nccl-tests-style sweep (``-b MIN -e MAX -f FACTOR``).

Pure Python (no torch): sizes are bytes; the benchmark turns them into element counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DTYPE_BYTES: Mapping[str, int] = {
    "float32": 4, "float": 4, "fp32": 4,
    "float16": 2, "half": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2,
    "float64": 8, "int32": 4, "int64": 8, "int8": 1, "uint8": 1,
}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)\s*$", re.IGNORECASE)


class SizeError(ValueError):
    """A bad size, sweep or model config; the message names the key."""


def parse_size(text: str | int, where: str = "size") -> int:
    """``"8"``, ``"8B"``, ``"64K"``, ``"256M"``, ``"1G"`` (nccl-tests: K/M/G are powers of 1024) -> bytes."""
    if isinstance(text, bool):
        raise SizeError(f"{where}: expected a byte size, got {text!r}")
    if isinstance(text, int):
        if text <= 0:
            raise SizeError(f"{where}: must be > 0 bytes, got {text}")
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise SizeError(f"{where}: cannot read {text!r} as a byte size (e.g. 8, 64K, 256M, 1G)")
    value = float(m.group(1))
    if m.group(2):
        value *= 1024 ** ("KMGT".index(m.group(2).upper()) + 1)
    n = int(value)
    if n <= 0 or n != value:
        raise SizeError(f"{where}: must be a positive whole number of bytes, got {text!r}")
    return n


def sweep(min_bytes: str | int, max_bytes: str | int, factor: int = 2) -> list[int]:
    """nccl-tests' size list: min, min*factor, ... up to and including max."""
    lo, hi = parse_size(min_bytes, "sweep min"), parse_size(max_bytes, "sweep max")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
        raise SizeError(f"sweep factor: must be an integer >= 2, got {factor!r}")
    if lo > hi:
        raise SizeError(f"sweep: min {lo} B > max {hi} B")
    out = [lo]
    while out[-1] * factor <= hi:
        out.append(out[-1] * factor)
    return out


@dataclass(frozen=True)
class DecodeShape:
    """What one decoded token costs in all-reduces on a Megatron-style tensor-parallel model:
    ``layers`` blocks x ``allreduces_per_layer`` (2: after attention and after the MLP), each of
    ``batch x hidden x dtype bytes``."""

    layers: int
    hidden: int
    dtype: str
    batch: int = 1
    allreduces_per_layer: int = 2

    @property
    def message_bytes(self) -> int:
        return self.batch * self.hidden * DTYPE_BYTES[self.dtype]

    @property
    def allreduces_per_token(self) -> int:
        return self.layers * self.allreduces_per_layer

    def to_dict(self) -> dict[str, Any]:
        return {"layers": self.layers, "hidden": self.hidden, "dtype": self.dtype, "batch": self.batch,
                "allreduces_per_layer": self.allreduces_per_layer, "message_bytes": self.message_bytes,
                "allreduces_per_token": self.allreduces_per_token}


def decode_shape(config: Mapping[str, Any] | str | Path, batch: int = 1, dtype: str | None = None) -> DecodeShape:
    """The decode step of a Hugging Face ``config.json`` (a path, a model directory or the dict):
    ``num_hidden_layers``, ``hidden_size``, and ``dtype``/``torch_dtype`` unless ``dtype`` is given."""
    where = "model config"
    if not isinstance(config, Mapping):
        p = Path(config)
        p = p / "config.json" if p.is_dir() else p
        where = str(p)
        try:
            config = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SizeError(f"{where}: cannot read the model config: {e}") from None
        if not isinstance(config, Mapping):
            raise SizeError(f"{where}: not a JSON object")
    cfg = config.get("text_config", config) if "hidden_size" not in config else config
    vals: dict[str, int] = {}
    for key in ("num_hidden_layers", "hidden_size"):
        v = cfg.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise SizeError(f"{where}: key {key!r} must be a positive integer, got {v!r}")
        vals[key] = v
    dt = dtype or cfg.get("dtype") or cfg.get("torch_dtype") or "bfloat16"
    if not isinstance(dt, str) or dt.removeprefix("torch.") not in DTYPE_BYTES:
        raise SizeError(f"{where}: key 'dtype' = {dt!r} is not one of {', '.join(sorted(DTYPE_BYTES))}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
        raise SizeError(f"decode batch: must be a positive integer, got {batch!r}")
    return DecodeShape(vals["num_hidden_layers"], vals["hidden_size"], dt.removeprefix("torch."), batch)
