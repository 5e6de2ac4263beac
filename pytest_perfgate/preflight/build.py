"""Build one engine's vLLM config with vLLM's own classes (``EngineArgs`` ->
``create_engine_config``) on whatever machine this is, and turn what vLLM refuses into findings
that name the engine and the key. vLLM is imported here only."""

from __future__ import annotations

import dataclasses
import difflib
import importlib.abc
import os
import re
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

REFUSED, WARN, GPU, NOTE = "refused", "warn", "gpu", "note"
CRASHED = "crashed"  # vLLM took the preflight's child process down (a signal, an exit, no progress)
STEP_BUILD, STEP_BACKENDS = "config build", "attention backend enumeration"  # the steps a unit runs
# perfgate's own keys of the vLLM kinds (engines/vllm_server.py OWN_KEYS), never vLLM arguments
OWN_KEYS = frozenset({"startup_timeout", "env", "api", "request_timeout", "continuous_usage_stats", "port",
                      "timeout"})
# vLLM message -> the key at fault, where the message does not name an argument
_KEY_OF = ((r"vocabulary size|vocab_size", "speculative_config.model"),
           (r"attention heads .* divisible by tensor parallel|tensor parallel size", "tensor_parallel_size"),
           (r"[Dd]ecode context parallel", "decode_context_parallel_size"),
           (r"[Pp]refill context parallel|PCP", "prefill_context_parallel_size"),
           (r"max_model_len|max model len|maximum model length", "max_model_len"),
           (r"draft", "speculative_config"))


@dataclasses.dataclass(frozen=True)
class Finding:
    engine: str  # the engine (or plan variant) name
    key: str  # the argument at fault ("" = the engine as a whole)
    level: str  # REFUSED: vLLM raised building the config; WARN: vLLM's code refuses it at start; GPU: needs a
    # GPU to tell; NOTE: what the configuration implies; CRASHED: vLLM took the child process down
    message: str

    def line(self) -> str:
        where = f"[engines.{self.engine}] {self.key}" if self.key else f"[engines.{self.engine}]"
        tag = {REFUSED: "vLLM refuses", WARN: "will not start", GPU: "needs the GPU to check", NOTE: "note",
               CRASHED: "preflight crashed"}[self.level]
        return f"{where}: {tag}: {self.message}"


@contextmanager
def quiet_vllm() -> Iterator[None]:
    """vLLM's INFO lines off and no hub access while configs are built (restored afterwards)."""
    saved = {k: os.environ.get(k) for k in ("VLLM_LOGGING_LEVEL", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    patched = _as_on_a_gpu()
    try:
        yield
    finally:
        patched()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _as_on_a_gpu() -> Callable[[], None]:
    """The CUDA build of vLLM has Triton; this CPU build may not, and then vLLM picks Model Runner V1
    (``VllmConfig.use_v2_model_runner``), which refuses what V2 runs (prefill context parallelism).
    Decide as on a GPU while configs are built; returns the undo."""
    import vllm.config.vllm as vc

    old = getattr(vc, "HAS_TRITON", True)
    vc.HAS_TRITON = True  # type: ignore[attr-defined]

    def undo() -> None:
        vc.HAS_TRITON = old  # type: ignore[attr-defined]

    return undo


def _key_of(msg: str, args: Mapping[str, Any]) -> str:
    m = re.search(r"keyword argument '([^']+)'", msg)
    if m:
        return m.group(1)
    for pattern, key in _KEY_OF:
        if re.search(pattern, msg):
            return key
    return next((k for k in args if re.search(rf"\b{re.escape(k)}\b", msg)), "")


def _message(err: BaseException) -> str:
    msg = str(err).strip() or type(err).__name__
    errors = getattr(err, "errors", None)  # pydantic: the first error's own text, not the input dump
    if callable(errors):
        try:
            first = errors()[0]
            msg = str(first.get("msg", msg)).removeprefix("Value error, ")
        except Exception:
            pass
    return " ".join(msg.split())


def _cpu_only(err: BaseException) -> bool:
    """Raised by vLLM's CPU platform (a GPU build would not): not this configuration's fault."""
    frames = traceback.extract_tb(err.__traceback__)
    return any(f.filename.replace(os.sep, "/").endswith("vllm/platforms/cpu.py") for f in frames)


def unknown_keys(args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, message) of arguments that are no ``EngineArgs`` field, with the closest names."""
    from vllm.engine.arg_utils import EngineArgs

    names = [f.name for f in dataclasses.fields(EngineArgs)]
    out = []
    for k in args:
        if k not in names:
            close = difflib.get_close_matches(k, names, n=2)
            out.append((k, "no such vLLM engine argument" + (f" (did you mean {' or '.join(close)}?)" if close else "")))
    return out


def create(engine: str, args: Mapping[str, Any]) -> tuple[Any, list[Finding]]:
    """(VllmConfig or None, findings) of ``args`` (model paths already local)."""
    from vllm.engine.arg_utils import EngineArgs

    kwargs = {k: v for k, v in args.items() if k not in OWN_KEYS}
    bad = unknown_keys(kwargs)
    if bad:
        return None, [Finding(engine, k, REFUSED, m) for k, m in bad]
    try:
        ea = EngineArgs(**{"skip_tokenizer_init": True, **kwargs})
        return ea.create_engine_config(), []
    except Exception as e:
        msg = _message(e)
        if _cpu_only(e):
            return None, [Finding(engine, _key_of(msg, kwargs), GPU, f"vLLM's CPU platform refused it here: {msg}")]
        return None, [Finding(engine, _key_of(msg, kwargs), REFUSED, f"{type(e).__name__}: {msg}")]


# vLLM's platform modules. Importing another platform's module is never safe: vllm/platforms/rocm.py
# does ``import vllm._C``, and on a CPU without AVX512-BF16 (where vLLM's CPU platform loaded
# ``_C_AVX2`` or ``_C_AVX512``, which register the same ``_C`` torch library) that second registration
# is a c10::Error -> std::terminate -> SIGABRT, which no ``except`` catches (issue 38).
OTHER_PLATFORMS = ("vllm.platforms.rocm", "vllm.platforms.xpu", "vllm.platforms.tpu")


class _OtherPlatformImport(ImportError):
    pass


class _PlatformGuard(importlib.abc.MetaPathFinder):
    """Refuses imports of other platforms' modules (ImportError, which the caller handles)."""

    def __init__(self, blocked: frozenset[str]) -> None:
        self.blocked = blocked

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname in self.blocked:
            raise _OtherPlatformImport(f"{fullname}: another platform's module (not imported by the preflight)")
        return None


@contextmanager
def platform_guard() -> Iterator[frozenset[str]]:
    """While active, importing a platform module of vLLM other than the current one raises ImportError."""
    import sys

    from vllm.platforms import current_platform

    here = type(current_platform).__module__
    blocked = frozenset(m for m in OTHER_PLATFORMS if m != here and m not in sys.modules)
    guard = _PlatformGuard(blocked)
    sys.meta_path.insert(0, guard)
    try:
        yield blocked
    finally:
        sys.meta_path.remove(guard)


def _other_platform(backend: Any) -> bool:
    """Is the backend's module another platform's by its name (ROCm, AITER, AMD, XPU, TPU)?"""
    module = str(getattr(backend, "value", "") or "").lower()
    parts = set(re.split(r"[._]", module)) | set(str(getattr(backend, "name", "")).lower().split("_"))
    return bool(parts & {"rocm", "aiter", "amd", "xpu", "tpu"})


def backends_with(feature: str, mla: bool) -> tuple[list[str], list[str]]:
    """(backends whose ``supports_<feature>()`` is True, backends not importable here) among vLLM's
    attention backends of the model's kind (MLA or not). Another platform's backends (ROCm, XPU,
    TPU) are never imported: their source is read, as for any backend not importable here."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    yes, missing = [], []
    with platform_guard():
        for b in AttentionBackendEnum:
            try:
                if _other_platform(b):
                    raise _OtherPlatformImport(b.name)
                cls = b.get_class()
                is_mla = bool(getattr(cls, "is_mla", lambda: False)())
                if is_mla == mla and getattr(cls, f"supports_{feature}")():
                    yes.append(b.name)
            except Exception:  # not importable on this machine: read its source instead (no override: False)
                if _source_sets(b, f"supports_{feature}"):
                    missing.append(b.name)
    return yes, missing


def _source_sets(backend: Any, attr: str) -> bool:
    """Does the backend's module source set ``attr``? (A backend with no module in this vLLM, or one
    registered at run time, cannot be selected for this model: False.)"""
    import importlib.util

    module = str(getattr(backend, "value", "") or "").rpartition(".")[0]
    try:
        spec = importlib.util.find_spec(module) if module else None
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None:
        return False
    try:
        return attr in open(spec.origin).read()
    except OSError:
        return True


def after_build(engine: str, config: Any) -> list[Finding]:
    """What vLLM checks only when the engine starts, checked from its own code where the CPU can."""
    out: list[Finding] = []
    pc, mc = config.parallel_config, config.model_config
    if pc.prefill_context_parallel_size > 1:
        yes, missing = backends_with("pcp", bool(mc.use_mla))
        if not yes:
            out.append(Finding(engine, "prefill_context_parallel_size", WARN,
                               f"no {'MLA' if mc.use_mla else 'non-MLA'} attention backend of vLLM supports prefill "
                               f"context parallelism (supports_pcp); backend selection fails at start"
                               + (f" (not importable here, confirm on the GPU: {', '.join(missing)})" if missing
                                  else " (backends not importable here set no supports_pcp in their source)")))
    if pc.decode_context_parallel_size > 1:
        yes, _ = backends_with("dcp", bool(mc.use_mla))
        if not yes:
            out.append(Finding(engine, "decode_context_parallel_size", WARN,
                               "no attention backend of this model's kind supports decode context parallelism"))
    return out
