"""What an engine needs installed, checked before anything is measured.

A missing optional dependency (vLLM, tokenizers, transformers, torch, a CUDA device for a GPU
engine) is found with :func:`importlib.util.find_spec` (nothing heavy is imported) and reported as
one line with the command that fixes it, instead of the same ``No module named 'vllm'`` traceback
in every test. No pytest import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FIX = "pip install 'pytest-perfgate[engine]'"

# engine kind -> modules it imports (the openai kind talks HTTP and loads a tokenizer only if asked)
KIND_MODULES: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "transformers", "tokenizers"),
    "vllm-server": ("vllm", "transformers"),
}
# the embedded default builds its tiny models with these (perfgate models make)
EMBEDDED_MODULES = ("torch", "transformers", "tokenizers")
GPU_DEVICES = ("cuda", "gpu")


def installed(module: str) -> bool:
    """Is ``module`` importable? (Without importing it; a blocked import counts as missing.)"""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Missing:
    """What is missing for some engines, and the one line that says so."""

    engines: tuple[str, ...]
    modules: tuple[str, ...]
    cuda: bool = False

    def message(self) -> str:
        who = ", ".join(repr(e) for e in self.engines)
        parts = []
        if self.modules:
            parts.append(f"{', '.join(self.modules)} {'is' if len(self.modules) == 1 else 'are'} not installed "
                         f"(fix: {FIX})")
        if self.cuda:
            parts.append("no CUDA device is visible (a GPU engine needs a CUDA GPU and a CUDA build of vLLM)")
        return f"perfgate: engine {who} cannot start: " + "; ".join(parts)


def modules_for(kind: str, args: Mapping[str, Any], embedded: bool) -> tuple[str, ...]:
    mods = list(KIND_MODULES.get(kind, ()))
    if embedded:
        mods += [m for m in EMBEDDED_MODULES if m not in mods]
    return tuple(mods)


def wants_gpu(kind: str, args: Mapping[str, Any]) -> bool:
    return kind in KIND_MODULES and str(args.get("device", "")).lower() in GPU_DEVICES


def cuda_visible() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def check(engines: Iterable[tuple[str, str, Mapping[str, Any], bool]]) -> Missing | None:
    """``engines``: (name, kind, args, uses the embedded models). None when everything is there."""
    names: list[str] = []
    missing: list[str] = []
    cuda = False
    for name, kind, args, embedded in engines:
        lack = [m for m in modules_for(kind, args, embedded) if not installed(m)]
        gpu = wants_gpu(kind, args) and not lack and not cuda_visible()
        if lack or gpu:
            names.append(name)
            missing += [m for m in lack if m not in missing]
            cuda = cuda or gpu
    if not names:
        return None
    return Missing(tuple(names), tuple(missing), cuda)
