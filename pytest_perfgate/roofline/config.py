"""``[hardware]`` and ``[models.NAME]`` of thresholds.toml, and which floor inputs an engine has.

``[hardware]`` describes the machine the configured (non-embedded) engines run on::

    [hardware]
    gpu = "H200"            # a known accelerator (floors/hardware.py KNOWN), or give the peaks:
    count = 8
    # peak_tflops = { bf16 = 989.4, fp8 = 1978.9 }   # dense, per device
    # memory_tb_s = 4.8                              # per device
    # allreduce_us = 21     # measured all-reduce latency per call (phase 3), for TP decode floors
    # expected_mfu = 0.53   # planning: share of peak a prefill reaches (feasibility uses floor / this)

The embedded default always uses this machine (detected GPU or the CPU probe).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .hardware import KNOWN, TERA, Hardware, from_accelerator, lookup, norm_dtype
from .model import ModelSpec, from_model_arg, from_table

HARDWARE_KEYS = {"gpu", "count", "name", "peak_tflops", "memory_tb_s", "allreduce_us", "expected_mfu",
                 "expected_mbu"}


# The share of the bf16 peak an 8,000-token prefill reached on an H200 (tests/fixtures/gpu/prefill_h200.json:
# 52-53% for Llama-shaped 1.8B/8.2B models; the plain bf16 GEMM 78%, INT8 GEMM 34% of its peak): the
# default expected_mfu of a known [hardware] gpu, so a floor is not planned at 100% of the datasheet.
MEASURED_GPU_MFU = 0.53


class FloorsConfigError(ValueError):
    """(table, key, message) of a bad [hardware] / [models] entry; config.py turns it into a ConfigError."""

    def __init__(self, table: str, key: str | None, message: str) -> None:
        self.table, self.key, self.message = table, key, message
        super().__init__(f"[{table}] {key}: {message}" if key else f"[{table}]: {message}")


@dataclass(frozen=True)
class FloorsConfig:
    hardware: Hardware | None = None  # from [hardware]; None: detect
    models: Mapping[str, ModelSpec] = None  # type: ignore[assignment]
    model_ids: Mapping[str, str] = None  # type: ignore[assignment]  # [models.X] model = "hub/id" -> X
    expected_mfu: float = 1.0
    expected_mbu: float = 1.0

    def model_for(self, engine_name: str, model_arg: Any, parents: tuple[str, ...] = ()) -> ModelSpec | None:
        """[models.<engine>] (or of an engine it extends), [models.X] with ``model`` = the argument,
        else the argument's own config.json (local directory or HF cache)."""
        models = self.models or {}
        for n in (engine_name, *parents):
            if n in models:
                return models[n]
        if isinstance(model_arg, str):
            key = (self.model_ids or {}).get(model_arg)
            if key is not None:
                return models[key]
            if model_arg in models:
                return models[model_arg]
            try:
                return from_model_arg(model_arg)
            except (OSError, ValueError):
                return None
        return None


def _positive(table: str, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise FloorsConfigError(table, key, f"must be a positive number, got {v!r}")
    return float(v)


def parse_hardware(t: Mapping[str, Any]) -> tuple[Hardware | None, float, float]:
    """The [hardware] table -> (Hardware or None when empty, expected_mfu, expected_mbu)."""
    for k in t:
        if k not in HARDWARE_KEYS:
            raise FloorsConfigError("hardware", k, f"unknown key (allowed: {', '.join(sorted(HARDWARE_KEYS))})")
    # a known GPU plans with the measured share of its peak, not 100% (an explicit value wins)
    default_mfu = MEASURED_GPU_MFU if isinstance(t.get("gpu"), str) and lookup(t["gpu"]) is not None else 1.0
    mfu = _positive("hardware", "expected_mfu", t.get("expected_mfu", default_mfu))
    mbu = _positive("hardware", "expected_mbu", t.get("expected_mbu", 1.0))
    for k, v in (("expected_mfu", mfu), ("expected_mbu", mbu)):
        if v > 1.0:
            raise FloorsConfigError("hardware", k, f"is a share of peak in (0, 1], got {v!r}")
    if not t or set(t) <= {"expected_mfu", "expected_mbu"}:
        return None, mfu, mbu
    count = t.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise FloorsConfigError("hardware", "count", f"must be a positive integer, got {count!r}")
    base: Hardware | None = None
    if "gpu" in t:
        gname = t["gpu"]
        acc = lookup(gname) if isinstance(gname, str) else None
        if acc is None:
            raise FloorsConfigError("hardware", "gpu", f"unknown accelerator {gname!r} (known: {', '.join(KNOWN)}; "
                                    "or give peak_tflops and memory_tb_s)")
        base = from_accelerator(acc, count, f"thresholds.toml [hardware] gpu = {gname!r}; {acc.source}")
    peaks: dict[str, float] = dict(base.peak_flops) if base else {}
    if "peak_tflops" in t:
        pt = t["peak_tflops"]
        if not isinstance(pt, Mapping) or not pt:
            raise FloorsConfigError("hardware", "peak_tflops", "must be a table of dtype = TFLOP/s, e.g. { bf16 = 989 }")
        for d, v in pt.items():
            try:
                peaks[norm_dtype(d)] = _positive("hardware", f"peak_tflops.{d}", v) * TERA
            except ValueError as e:
                if isinstance(e, FloorsConfigError):
                    raise
                raise FloorsConfigError("hardware", f"peak_tflops.{d}", str(e)) from None
    bw = base.mem_bandwidth if base else None
    if "memory_tb_s" in t:
        bw = _positive("hardware", "memory_tb_s", t["memory_tb_s"]) * TERA
    if not peaks:
        raise FloorsConfigError("hardware", "gpu", "missing: name a known accelerator (gpu = \"H200\") or give peak_tflops")
    if bw is None:
        raise FloorsConfigError("hardware", "memory_tb_s", "missing: the memory bandwidth per device (TB/s)")
    name = t.get("name", base.name if base else "accelerator")
    if not isinstance(name, str):
        raise FloorsConfigError("hardware", "name", f"must be a string, got {name!r}")
    ar = _positive("hardware", "allreduce_us", t["allreduce_us"]) * 1e-6 if "allreduce_us" in t else None
    src = base.source if base else "thresholds.toml [hardware]"
    if base and ("peak_tflops" in t or "memory_tb_s" in t):
        src += " (peaks/bandwidth overridden in [hardware])"
    return Hardware(name, count, peaks, bw, src, ar), mfu, mbu


def parse(hardware: Mapping[str, Any], models: Mapping[str, Any]) -> FloorsConfig:
    hw, mfu, mbu = parse_hardware(hardware)
    specs: dict[str, ModelSpec] = {}
    ids: dict[str, str] = {}
    for name, t in models.items():
        if not isinstance(t, Mapping):
            raise FloorsConfigError("models", name, "must be a table")
        try:
            specs[name] = from_table(name, t)
        except ValueError as e:
            key, _, msg = str(e).partition(": ")
            raise FloorsConfigError(f"models.{name}", key, msg) from None
        if isinstance(t.get("model"), str):
            ids[t["model"]] = name
    return FloorsConfig(hw, specs, ids, mfu, mbu)


@dataclass(frozen=True)
class EngineFloorInputs:
    """What an engine's floors need: its model (and draft), its devices, and where they come from."""

    engine: str
    model: ModelSpec
    hardware: Hardware
    gpus: int
    draft: ModelSpec | None = None
    num_speculative: int = 0
    allreduce_s: float | None = None  # per-call all-reduce latency ([hardware] allreduce_us or phase 3)


def engine_inputs(
    fc: FloorsConfig,
    name: str,
    args: Mapping[str, Any],
    *,
    embedded: bool,
    parents: tuple[str, ...] = (),
    detect: Callable[[], Hardware | None] | None = None,
) -> EngineFloorInputs | str:
    """The floor inputs of engine ``name``, or a sentence saying what is missing."""
    if embedded or fc.hardware is None:
        hw = detect() if detect is not None else None
        if hw is None:
            return "no hardware description: add [hardware] (gpu, count) to thresholds.toml"
    else:
        hw = fc.hardware
    model = fc.model_for(name, args.get("model"), parents)
    if model is None:
        return (f"no model description for engine {name!r} (model {args.get('model')!r}): add "
                f"[models.{name}] with its config.json shape to thresholds.toml")
    dtype = args.get("dtype")
    if isinstance(dtype, str) and dtype != "auto":
        model = replace(model, dtype=norm_dtype(dtype))
    if isinstance(args.get("kv_cache_dtype"), str) and args["kv_cache_dtype"] not in ("auto", ""):
        try:
            model = replace(model, kv_dtype=norm_dtype(str(args["kv_cache_dtype"]).split("_")[0]))
        except ValueError:
            pass
    tp = int(args.get("tensor_parallel_size", 1) or 1) * int(args.get("pipeline_parallel_size", 1) or 1)
    gpus = 1 if hw.is_cpu else (tp if ("tensor_parallel_size" in args or "pipeline_parallel_size" in args)
                               else hw.count)
    draft, k = None, 0
    sc = args.get("speculative_config")
    if isinstance(sc, Mapping):
        k = int(sc.get("num_speculative_tokens", 0) or 0)
        if sc.get("model"):
            draft = fc.model_for("", sc.get("model"))
            if draft is not None and isinstance(dtype, str) and dtype != "auto":
                draft = replace(draft, dtype=norm_dtype(dtype))
    return EngineFloorInputs(name, model, hw, gpus, draft, k, hw.interconnect_allreduce_s)
