"""The registry of engine kinds.

An engine is what requests go to: vLLM in-process, an OpenAI-compatible server, a vLLM server
subprocess. Each kind is one module with a factory registered here. Heavy imports (vllm, torch,
aiohttp) happen inside the kind's module, which is imported only when that kind is created. The
protocol every engine follows is :class:`pytest_perfgate.contract.Engine`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from ..contract import Engine, EngineError

EngineFactory = Callable[[str, Mapping[str, Any]], Engine]

# kind -> "module:function" (imported lazily so that listing kinds costs nothing)
_REGISTRY: dict[str, str] = {
    "vllm": "pytest_perfgate.engines.vllm_inproc:create",
    "openai": "pytest_perfgate.engines.openai.engine:create",
    "vllm-server": "pytest_perfgate.engines.vllm_server:create",
    "transformers-vlm": "pytest_perfgate.engines.transformers_vlm:create",
}


def register(kind: str, target: str) -> None:
    """Register an engine kind implemented by ``"module:function"`` (name, args) -> Engine."""
    _REGISTRY[kind] = target


def model_args(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of engine ``name``'s arguments, which must name a model (for the vLLM kinds)."""
    if "model" not in args:
        raise EngineError(f"[engines.{name}] model: missing (the model directory or name to serve)")
    return dict(args)


def kinds() -> list[str]:
    return sorted(_REGISTRY)


def create(name: str, kind: str, args: Mapping[str, Any]) -> Engine:
    """Build (not start) engine ``name`` of ``kind`` with its own arguments ``args``."""
    target = _REGISTRY.get(kind)
    if target is None:
        raise EngineError(f"engine {name!r}: unknown kind {kind!r}; available kinds: {', '.join(kinds())}")
    module, func = target.split(":")
    factory: EngineFactory = getattr(importlib.import_module(module), func)
    return factory(name, args)
