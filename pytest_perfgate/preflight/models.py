"""Where the preflight gets a model's config.json: the model's own (a local directory, the
Hugging Face cache, a generated embedded model), else one written from the ``[models.*]`` shapes of
thresholds.toml. Nothing is downloaded."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

EMBEDDED_PREFIX = "embedded:"
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "f16": "float16", "fp32": "float32", "f32": "float32"}
# architecture of a shapes-only model, by its id (vLLM needs one to build a ModelConfig)
_ARCH = (("qwen2", "Qwen2ForCausalLM", "qwen2"), ("qwen", "Qwen2ForCausalLM", "qwen2"),
         ("mixtral", "MixtralForCausalLM", "mixtral"), ("mistral", "MistralForCausalLM", "mistral"),
         ("llama", "LlamaForCausalLM", "llama"))
ASSUMED_MAX_POSITIONS = 32768  # Qwen2.5 / Llama-3 config.json value; stated in the source line


class Resolved:
    """A model directory with a config.json and where it came from (said in the report)."""

    def __init__(self, path: Path, source: str, config: Mapping[str, Any]) -> None:
        self.path, self.source, self.config = path, source, config


def _hf_cached(model: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        p = try_to_load_from_cache(model, "config.json")
    except Exception:  # an id that is no repo id (a missing local path, say)
        return None
    return Path(p).parent if isinstance(p, str) else None


def shapes_table(models: Mapping[str, Any], model: str, names: tuple[str, ...]) -> tuple[str, Mapping[str, Any]] | None:
    """([models.X] name, table) describing ``model``: the table whose ``model`` key is the id, else
    one named after the engine or an engine it extends."""
    for name, t in models.items():
        if isinstance(t, Mapping) and t.get("model") == model:
            return name, t
    for n in names:
        t = models.get(n)
        if isinstance(t, Mapping):
            return n, t
    return None


def config_from_shapes(model: str, t: Mapping[str, Any], max_model_len: int = 0) -> dict[str, Any]:
    """A config.json for vLLM from a [models.*] table (its keys are config.json names already)."""
    arch = next(((a, m) for key, a, m in _ARCH if key in model.lower()), ("LlamaForCausalLM", "llama"))
    cfg: dict[str, Any] = {k: v for k, v in t.items() if k not in ("model", "dtype", "params", "kv_cache_dtype")}
    dtype = str(t.get("dtype", t.get("torch_dtype", "bf16")))
    cfg.update(architectures=[arch[0]], model_type=arch[1], torch_dtype=_DTYPES.get(dtype, dtype))
    cfg.setdefault("max_position_embeddings", max(ASSUMED_MAX_POSITIONS, max_model_len))
    cfg.setdefault("rms_norm_eps", 1e-6)
    cfg.setdefault("tie_word_embeddings", False)
    return cfg


def resolve(model: str, models: Mapping[str, Any], names: tuple[str, ...], tmp: Path,
            embedded: Callable[[], Any] | None, max_model_len: int = 0) -> Resolved | str:
    """The model directory for ``model``, or a sentence saying why there is none."""
    if model.startswith(EMBEDDED_PREFIX):
        if embedded is None:
            return f"{model}: embedded models not generated yet (`perfgate models make`)"
        try:
            ms = embedded()
        except LookupError as e:
            return f"{model}: {e}"
        path = getattr(ms, model[len(EMBEDDED_PREFIX):], None)
        if path is None:
            return f"{model}: unknown embedded model (target, draft, draft_independent)"
        return Resolved(Path(path), "generated embedded model", json.loads((Path(path) / "config.json").read_text()))
    local = Path(model).expanduser()
    if (local / "config.json").is_file():
        return Resolved(local, f"{local}/config.json", json.loads((local / "config.json").read_text()))
    cached = _hf_cached(model)
    if cached is not None:
        return Resolved(cached, "config.json from the Hugging Face cache",
                        json.loads((cached / "config.json").read_text()))
    found = shapes_table(models, model, names)
    if found is None:
        return (f"{model}: no local config.json and no [models.*] table with model = {model!r} "
                "(add its config.json shape to thresholds.toml)")
    table, t = found
    cfg = config_from_shapes(model, t, max_model_len)
    d = tmp / table
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    src = f"shapes of [models.{table}]"
    if "max_position_embeddings" not in t:
        src += f" (max_position_embeddings assumed {cfg['max_position_embeddings']})"
    return Resolved(d, src, cfg)
