"""What the bytes a quantized vision tower frees buy: KV-cache tokens of the language model.

One token of KV cache costs ``2 (K and V) x layers x kv_heads x head_dim x bytes(dtype)``, all read
from the LLM's config (``text_config`` of a VLM). The freed bytes are the tower's parameter bytes
before minus after quantization; the tokens are ``freed // per_token``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "float8_e4m3fn": 1, "int8": 1}


@dataclass(frozen=True)
class KVCost:
    layers: int
    kv_heads: int
    head_dim: int
    dtype: str
    bytes_per_token: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def kv_cost(config: Mapping[str, Any], dtype: str | None = None) -> KVCost:
    """KV-cache bytes per token from an LLM (or VLM) config dict; ``dtype`` overrides the config's."""
    c: Mapping[str, Any] = config.get("text_config") or config
    try:
        layers = int(c["num_hidden_layers"])
        heads = int(c["num_attention_heads"])
        kv = int(c.get("num_key_value_heads") or heads)
        head_dim = int(c.get("head_dim") or int(c["hidden_size"]) // heads)
    except KeyError as e:
        raise ValueError(f"LLM config has no {e.args[0]!r} (needed for the KV-cache cost)") from None
    dt = str(dtype or c.get("dtype") or c.get("torch_dtype") or config.get("torch_dtype") or "float16")
    dt = dt.removeprefix("torch.")
    if dt not in DTYPE_BYTES:
        raise ValueError(f"KV-cache dtype {dt!r} unknown ({', '.join(DTYPE_BYTES)})")
    return KVCost(layers, kv, head_dim, dt, 2 * layers * kv * head_dim * DTYPE_BYTES[dt])


def freed_kv_tokens(before_bytes: int, after_bytes: int, cost: KVCost) -> dict[str, Any]:
    """The memory entry of the phase-2 decision record."""
    freed = max(0, int(before_bytes) - int(after_bytes))
    return {"encoder_param_bytes_before": int(before_bytes), "encoder_param_bytes_after": int(after_bytes),
            "freed_bytes": freed, "kv_bytes_per_token": cost.bytes_per_token, "kv_cache": cost.as_dict(),
            "kv_tokens_freed": freed // cost.bytes_per_token}


#: Llama-style configs of the roadmap's language models (public configs), for the GPU report.
QWEN72B = {"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
           "dtype": "bfloat16"}
