"""The registry of engine kinds: the one place an engine kind is described.

An engine is what requests go to: vLLM in-process, an OpenAI-compatible server, a launched server
subprocess. Each kind is one :class:`EngineKind`: its factory, the modules it needs installed
(checked before anything starts, :mod:`.requirements`), the arguments its ``[engines.NAME]`` table
takes (``perfgate check``, :mod:`.check`) and whether it is a vLLM engine (the embedded start
options, the GPU preflight). Heavy imports (vllm, torch, aiohttp) happen inside the kind's module,
which is imported only when that kind is created. The protocol every engine follows is
:class:`pytest_perfgate.contract.Engine`.

Kinds come from three places, looked up in this order:

* :func:`register` (in a ``conftest.py``, say);
* the built-in kinds (:data:`BUILTIN`);
* the ``pytest_perfgate.engines`` **entry-point group** of any installed distribution, so that a
  user's package adds a kind without editing ours::

      [project.entry-points."pytest_perfgate.engines"]
      mystack = "mypkg.engine:KIND"      # an EngineKind, or a factory (name, args) -> Engine

  An entry point may not replace a built-in kind (that is an error naming the distribution).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..contract import Engine, EngineError
from ..runtime.redaction import add_secrets_of

EngineFactory = Callable[[str, Mapping[str, Any]], Engine]
ENTRY_POINT_GROUP = "pytest_perfgate.engines"


def _resolve(target: str) -> Any:
    """The object ``"module:attribute"`` names (imported now)."""
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class EngineKind:
    """One engine kind.

    ``factory``: ``"module:function"`` (imported when the kind is created) or the function itself,
    ``(name, args) -> Engine``. ``requires``: the modules the kind imports (a missing one is one
    line with the command that fixes it). ``arguments``: the keys an ``[engines.NAME]`` table of
    this kind takes, as names, a function returning them (None when they cannot be known here) or
    ``"module:attribute"`` naming either; None: not checked. ``vllm``: a vLLM engine (takes the
    embedded default's start options, is preflighted, ``device = "cuda"`` needs a CUDA device)."""

    name: str
    factory: str | EngineFactory
    requires: tuple[str, ...] = ()
    arguments: str | Iterable[str] | Callable[[], Iterable[str] | None] | None = None
    vllm: bool = False
    origin: str = "built in"  # where the kind came from, for messages

    def create(self, engine: str, args: Mapping[str, Any]) -> Engine:
        """Build (not start) engine ``engine`` of this kind."""
        factory: EngineFactory = _resolve(self.factory) if isinstance(self.factory, str) else self.factory
        return factory(engine, args)

    def known_arguments(self) -> frozenset[str] | None:
        """The keys this kind's table takes; None when they are not checked or cannot be known."""
        found: Any = _resolve(self.arguments) if isinstance(self.arguments, str) else self.arguments
        if callable(found):
            found = found()
        return None if found is None else frozenset(found)


BUILTIN: tuple[EngineKind, ...] = (
    EngineKind("vllm", "pytest_perfgate.engines.vllm_inproc:create", ("vllm", "transformers", "tokenizers"),
               "pytest_perfgate.engines.check:vllm_engine_arguments", vllm=True),
    EngineKind("openai", "pytest_perfgate.engines.openai.engine:create", (),
               "pytest_perfgate.engines.openai.engine:_KNOWN"),
    EngineKind("vllm-server", "pytest_perfgate.engines.vllm_server:create", ("vllm", "transformers"),
               "pytest_perfgate.engines.vllm_server:known_arguments", vllm=True),
    EngineKind("server", "pytest_perfgate.engines.server:create", (), "pytest_perfgate.engines.server:KNOWN_KEYS"),
    EngineKind("transformers-vlm", "pytest_perfgate.engines.transformers_vlm:create", (),
               "pytest_perfgate.engines.transformers_vlm:_KEYS"),
)
_BUILTIN = {k.name: k for k in BUILTIN}
VLLM_KINDS: tuple[str, ...] = tuple(k.name for k in BUILTIN if k.vllm)
_REGISTERED: dict[str, EngineKind] = {}


def register(kind: str | EngineKind, target: str | EngineFactory | None = None) -> None:
    """Register an engine kind: an :class:`EngineKind`, or a name and its factory
    (``"module:function"`` or the function, ``(name, args) -> Engine``). Replaces a kind of that name."""
    if isinstance(kind, EngineKind):
        _REGISTERED[kind.name] = dataclasses.replace(kind, origin="register()")
        return
    if target is None:
        raise TypeError(f"register({kind!r}): give the kind's factory ('module:function' or the function)")
    _REGISTERED[kind] = EngineKind(kind, target, origin="register()")


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _where(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    who = f"distribution {dist.name} {dist.version}" if dist is not None else "an installed distribution"
    return f"entry point {ep.name} = {ep.value!r} of {who} (group {ENTRY_POINT_GROUP})"


def _from_entry_point(ep: importlib.metadata.EntryPoint) -> EngineKind:
    if ep.name in _BUILTIN:
        raise EngineError(f"{_where(ep)}: {ep.name!r} is a built-in engine kind and cannot be replaced; "
                          "give the kind another name")
    try:
        obj = ep.load()
    except Exception as e:  # the user's package failed to import: say which one
        raise EngineError(f"{_where(ep)}: cannot load it: {type(e).__name__}: {e}") from None
    if isinstance(obj, EngineKind):
        return dataclasses.replace(obj, name=ep.name, origin=_where(ep))
    if callable(obj):
        return EngineKind(ep.name, obj, origin=_where(ep))
    raise EngineError(f"{_where(ep)}: names a {type(obj).__name__}, not an EngineKind or a factory (name, args) -> Engine")


def lookup(kind: str) -> EngineKind | None:
    """The engine kind called ``kind`` (registered, built in, or an entry point), else None."""
    found = _REGISTERED.get(kind) or _BUILTIN.get(kind)
    if found is not None:
        return found
    for ep in _entry_points():
        if ep.name == kind:
            return _from_entry_point(ep)
    return None


def kinds() -> list[str]:
    """Every kind's name, sorted (entry points are listed without importing their packages)."""
    return sorted({*_REGISTERED, *_BUILTIN, *(ep.name for ep in _entry_points())})


def is_vllm(kind: str) -> bool:
    """Is ``kind`` a vLLM engine kind (:attr:`EngineKind.vllm`)? False for an unknown kind."""
    try:
        found = lookup(kind)
    except EngineError:  # an entry point that does not load: said where the kind is created
        return False
    return found is not None and found.vllm


def model_args(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of engine ``name``'s arguments, which must name a model (for the vLLM kinds)."""
    if "model" not in args:
        raise EngineError(f"[engines.{name}] model: missing (the model directory or name to serve)")
    return dict(args)


def create(name: str, kind: str, args: Mapping[str, Any]) -> Engine:
    """Build (not start) engine ``name`` of ``kind`` with its own arguments ``args``."""
    found = lookup(kind)
    if found is None:
        raise EngineError(f"engine {name!r}: unknown kind {kind!r}; available kinds: {', '.join(kinds())}")
    add_secrets_of(args)  # masked in every cause from now on (runtime.redaction.clean)
    return found.create(name, args)
