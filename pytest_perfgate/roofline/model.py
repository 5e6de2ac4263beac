"""A transformer's shape, enough to count FLOPs and bytes: from an HF ``config.json`` or a table.

Sources: the engine's model directory (vLLM engines, local paths), the Hugging Face cache when the
model is a hub id already downloaded there (never the network), or a ``[models.NAME]`` table in
thresholds.toml for remote servers (keys = the ``config.json`` names below, or ``params`` for a
parameter count alone).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hardware import DTYPE_BYTES, norm_dtype


@dataclass(frozen=True)
class ModelSpec:
    """Dense or MoE decoder-only transformer (Llama/Qwen/Mistral/Mixtral shapes)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    dtype: str = "bf16"  # weights and activations
    head_dim: int = 0  # 0: hidden // heads
    experts: int = 0  # MoE: routed experts per layer (0 = dense)
    experts_per_token: int = 0
    moe_intermediate: int = 0  # 0: intermediate
    shared_expert_intermediate: int = 0
    tied_embeddings: bool = False
    kv_dtype: str = ""  # "" = dtype
    params_override: float = 0.0  # a stated parameter count (``params = "72B"``) wins over the shape

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[norm_dtype(self.dtype)]

    @property
    def kv_bytes_per_elem(self) -> int:
        return DTYPE_BYTES[norm_dtype(self.kv_dtype or self.dtype)]

    # ---- parameter counts
    def _attn_params(self) -> int:
        q = self.hidden * self.heads * self.hd
        kv = 2 * self.hidden * self.kv_heads * self.hd
        return q + kv + self.heads * self.hd * self.hidden

    def _mlp_params(self, active: bool) -> int:
        if not self.experts:
            return 3 * self.hidden * self.intermediate
        per_expert = 3 * self.hidden * (self.moe_intermediate or self.intermediate)
        n = self.experts_per_token if active else self.experts
        shared = 3 * self.hidden * self.shared_expert_intermediate
        return n * per_expert + shared + self.hidden * self.experts  # + router

    def layer_params(self, active: bool = True) -> int:
        """Matrix parameters of the decoder layers (norms and biases are negligible)."""
        return self.layers * (self._attn_params() + self._mlp_params(active))

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def total_params(self) -> float:
        if self.params_override:
            return self.params_override
        emb = self.embedding_params * (1 if self.tied_embeddings else 2)
        return float(self.layer_params(active=False) + emb)

    def active_matmul_params(self) -> float:
        """Parameters every token multiplies through (decoder layers, active experts only)."""
        if self.params_override:
            return self.params_override - self.embedding_params * (1 if self.tied_embeddings else 2)
        return float(self.layer_params(active=True))

    # ---- bytes
    def weight_bytes(self) -> float:
        """Bytes read per forward pass: every layer weight (all experts of a MoE: a batch touches
        them) and the LM head; the embedding table is gathered, not read whole."""
        return (self.layer_params(active=False) if not self.params_override else self.active_matmul_params()) \
            * self.dtype_bytes + self.embedding_params * self.dtype_bytes

    def kv_bytes_per_token(self) -> int:
        """K and V of one token across all layers."""
        return 2 * self.layers * self.kv_heads * self.hd * self.kv_bytes_per_elem

    def describe(self) -> str:
        moe = f", {self.experts} experts ({self.experts_per_token} active)" if self.experts else ""
        return f"{self.name} ({self.total_params() / 1e9:.3g}B params, {self.layers} layers, {norm_dtype(self.dtype)}{moe})"


# config.json keys (with the aliases of common model families) -> ModelSpec fields
_HF_KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "multi_query_group_num"),
    "intermediate": ("intermediate_size", "n_inner", "ffn_hidden_size"),
    "vocab": ("vocab_size",),
    "head_dim": ("head_dim",),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_topk", "num_experts_per_token"),
    "moe_intermediate": ("moe_intermediate_size",),
    "shared_expert_intermediate": ("shared_expert_intermediate_size",),
}


def _get(cfg: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return None


def from_hf_config(cfg: Mapping[str, Any], name: str = "", dtype: str | None = None) -> ModelSpec:
    """A spec from a ``config.json`` dict (``text_config`` of multimodal models is used when present)."""
    if isinstance(cfg.get("text_config"), Mapping):
        cfg = {**cfg["text_config"], "torch_dtype": cfg.get("torch_dtype") or cfg["text_config"].get("torch_dtype")}
    vals: dict[str, Any] = {}
    for fld, keys in _HF_KEYS.items():
        v = _get(cfg, keys)
        if v is not None:
            vals[fld] = int(v)
    missing = [f for f in ("layers", "hidden", "heads", "vocab") if f not in vals]
    if missing:
        raise ValueError(f"config.json of {name or 'the model'} lacks {', '.join(missing)}")
    vals.setdefault("kv_heads", vals["heads"])
    vals.setdefault("intermediate", 4 * vals["hidden"])
    if vals.get("experts_per_token") and not vals.get("experts"):
        vals.pop("experts_per_token")
    wdtype = norm_dtype(dtype if dtype not in (None, "auto") else (cfg.get("torch_dtype") or cfg.get("dtype")), "bf16")
    return ModelSpec(name=name or str(cfg.get("_name_or_path") or cfg.get("model_type") or "model"), dtype=wdtype,
                     tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), **vals)


def _hf_cache_config(repo_id: str) -> Path | None:
    """``config.json`` of a hub model already in the local Hugging Face cache (no network)."""
    home = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub")
    snaps = home / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    try:
        found = sorted(snaps.glob("*/config.json"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return None
    return found[-1] if found else None


def from_model_arg(model: str, dtype: str | None = None) -> ModelSpec | None:
    """Spec of an engine's ``model`` argument: a local directory, or a hub id in the local cache."""
    p = Path(model)
    cfg_path = p / "config.json" if p.is_dir() else _hf_cache_config(model) if "/" in model and not p.exists() else None
    if cfg_path is None or not cfg_path.is_file():
        return None
    cfg = json.loads(cfg_path.read_text())
    return from_hf_config(cfg, name=p.name if p.is_dir() else model, dtype=dtype)


_TABLE_KEYS = {"model", "params", "dtype", "kv_cache_dtype", "tie_word_embeddings", "torch_dtype",
               *(k for keys in _HF_KEYS.values() for k in keys)}


def from_table(name: str, t: Mapping[str, Any]) -> ModelSpec:
    """A ``[models.NAME]`` table: config.json keys (``num_hidden_layers``, ``hidden_size``, ...),
    ``dtype``, optional ``params`` ("72.7B" or a number) and ``model`` (the hub id it describes).
    Raises ValueError("key: message")."""
    for k in t:
        if k not in _TABLE_KEYS:
            raise ValueError(f"{k}: unknown key (config.json names such as num_hidden_layers, hidden_size, "
                             "num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, "
                             "num_local_experts, num_experts_per_tok; or dtype, params, model)")
    for k, v in t.items():
        if k in ("model", "dtype", "kv_cache_dtype", "torch_dtype", "tie_word_embeddings", "params"):
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{k}: must be a positive integer, got {v!r}")
    try:
        spec = from_hf_config({k: v for k, v in t.items() if k != "params"}, name=str(t.get("model", name)),
                              dtype=t.get("dtype"))
    except ValueError as e:
        raise ValueError(f"num_hidden_layers: {e} (give the config.json shape keys)") from None
    if t.get("kv_cache_dtype") is not None:
        spec = _replace(spec, kv_dtype=norm_dtype(str(t["kv_cache_dtype"])))
    if "params" in t:
        spec = _replace(spec, params_override=parse_count(t["params"]))
    return spec


def parse_count(v: Any) -> float:
    """``"72.7B"``, ``"850M"``, ``7e9`` -> a number; ValueError otherwise."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return float(v)
    if isinstance(v, str):
        s = v.strip().upper().replace("_", "").replace(",", "")
        mult = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}.get(s[-1:], 1.0)
        try:
            x = float(s[:-1] if mult != 1.0 else s) * mult
        except ValueError:
            x = -1.0
        if x > 0:
            return x
    raise ValueError(f"params: must be a count such as \"72.7B\" or 7e9, got {v!r}")


def _replace(spec: ModelSpec, **kw: Any) -> ModelSpec:
    from dataclasses import replace

    return replace(spec, **kw)
