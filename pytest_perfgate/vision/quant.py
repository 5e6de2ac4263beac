"""Quantization paths of the vision tower, side by side, and what each costs and saves.

=======================  ======================================================  =================
path                     how                                                     where
=======================  ======================================================  =================
``fp32``                 unchanged (the CPU reference)                           CPU, GPU
``fp16`` / ``bf16``      ``model.to(dtype)`` (the GPU reference is fp16)         GPU; bf16 on CPU
``int8-weight-only``     torchao ``Int8WeightOnlyConfig``                        CPU, GPU
``int8-dynamic``         torchao ``Int8DynamicActivationInt8WeightConfig``        CPU, GPU
``fp8``                  torchao ``Float8DynamicActivationFloat8WeightConfig``   GPU, sm >= 8.9
``torch-dynamic-int8``   W8A8 plain Linear modules: torchao's int8 quantization   CPU
                         of weights (per channel) and tokens, ``torch._int_mm``
``damaged-w2``           every Linear weight rounded to 2 bits, one scale per    CPU, GPU
                         tensor (a deliberately broken quantization)
=======================  ======================================================  =================

Only ``nn.Linear`` layers are quantized (attention projections and MLPs: >95% of a ViT's weight
bytes); patch embedding, norms and position embeddings stay in the reference dtype.

``torch-dynamic-int8`` no longer goes through ``torch.ao.quantization`` (deprecated, to be removed,
like the quantized tensors its fbgemm kernel takes): torchao's quantization primitives
(:func:`torchao.quantization.quant_primitives.choose_qparams_affine` / ``quantize_affine``) make the
symmetric int8 weights per output channel and the int8 activations per token, and
``torch._int_mm`` multiplies them. It is kept beside torchao's own ``int8-dynamic`` (the same recipe as a tensor subclass) because the
subclass's dispatch costs more than the matmuls of a small tower on the CPU. The embedded tower's
shapes (width 64, 3 layers, 37 tokens, batch 16), one thread, busy 2-core machine, median of 5:
fp32 16.4 ms, this path 15.1 ms (torch.ao's old ``quantize_dynamic`` 11.4 ms), torchao
``Int8DynamicActivationInt8WeightConfig`` 34.0 ms; embedding cosine loss vs fp32 1.0e-4 (old 2.5e-4:
one scale per tensor), torchao's 0.85e-4.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PATHS = ("fp32", "fp16", "bf16", "int8-weight-only", "int8-dynamic", "fp8", "torch-dynamic-int8", "damaged-w2")


class Unavailable(RuntimeError):
    """A path this machine can't run (the message says why: no GPU, no FP8 units, no torchao)."""


@dataclass(frozen=True)
class Quantized:
    path: str
    model: Any
    reference_dtype: str
    param_bytes: int
    seconds: float  # time to quantize


def available(path: str, device: str) -> str | None:
    """None if ``path`` runs on ``device``, else the reason it doesn't."""
    import importlib.util

    import torch

    if path not in PATHS:
        return f"unknown quantization path {path!r} (paths: {', '.join(PATHS)})"
    if path in ("int8-weight-only", "int8-dynamic") and importlib.util.find_spec("torchao") is None and device != "cuda":
        return "torchao is not installed (pip install 'pytest-perfgate[cpu]')"
    if path == "fp8":
        if device != "cuda" or not torch.cuda.is_available():
            return "FP8 needs a CUDA GPU with FP8 units (sm >= 8.9: Ada, Hopper, Blackwell)"
        if torch.cuda.get_device_capability() < (8, 9):
            return f"FP8 needs sm >= 8.9, this GPU is sm {torch.cuda.get_device_capability()}"
    if path == "torch-dynamic-int8" and device != "cpu":
        return "the CPU's W8A8 path (on a GPU: int8-dynamic)"
    if path == "torch-dynamic-int8" and importlib.util.find_spec("torchao") is None:
        return "torchao is not installed (pip install 'pytest-perfgate[cpu]')"
    if path == "fp16" and device == "cpu":
        return "fp16 matmuls on the CPU are emulated (slow); the CPU reference is fp32 and bf16 is measured"
    return None


def quantize(reference: Any, path: str, device: str) -> Quantized:
    """A quantized copy of ``reference`` (an nn.Module on ``device``); raises :class:`Unavailable`."""
    import torch

    why = available(path, device)
    if why:
        raise Unavailable(f"{path}: {why}")
    ref_dtype = next(reference.parameters()).dtype
    t = time.perf_counter()
    model = copy.deepcopy(reference)
    if path in ("fp32", "fp16", "bf16"):
        model = model.to({"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[path])
    elif path == "torch-dynamic-int8":
        model = model.float()
        _swap_linears(model, path)
    elif path == "damaged-w2":
        damage_2bit(model)
    elif _has_torchao():
        from torchao.quantization import quantize_

        cast = torchao_weight_dtype(path, ref_dtype)
        if cast is not None:  # the inputs follow the patch embedding's dtype (encoder._input_dtype)
            model = model.to(cast)
        try:
            quantize_(model, _torchao_config(path))
        except AssertionError as e:  # torchao's own checks (device capability, dtype) are assertions
            raise Unavailable(f"{path}: torchao refused it: {e}") from e
    else:  # a CUDA machine without torchao: the same recipes on torch's own kernels
        _swap_linears(model, path)
    model.eval()
    return Quantized(path, model, str(ref_dtype).removeprefix("torch."), param_bytes(model),
                     time.perf_counter() - t)


def torchao_weight_dtype(path: str, ref_dtype: Any) -> Any:
    """The dtype a copy is cast to before torchao quantizes it, or None. torchao 0.18's FP8 with
    ``PerRow`` granularity asserts "PerRow quantization only works for bfloat16 precision" on fp16 or
    fp32 weights: an fp16 reference (the GPU's) is quantized from a bfloat16 copy."""
    import torch

    return torch.bfloat16 if path == "fp8" and ref_dtype != torch.bfloat16 else None


def _has_torchao() -> bool:
    import importlib.util

    return importlib.util.find_spec("torchao") is not None


def _torchao_config(path: str) -> Any:
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
    )

    if path == "int8-weight-only":
        return Int8WeightOnlyConfig()
    if path == "int8-dynamic":
        return Int8DynamicActivationInt8WeightConfig()
    from torchao.quantization import PerRow

    return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())


#: The outlier channel of the damaged path: its max |w| is this multiple of the tensor's own max.
OUTLIER = 2.0


def damage_2bit(model: Any) -> None:
    """Round every Linear weight to 2-bit signed levels {-2,-1,0,1} x one per-tensor scale set by an
    outlier channel (``OUTLIER`` x the largest weight, as one outlier channel does to a per-tensor
    scale): weights under half a step (|w| < OUTLIER x max|w| / 4) become 0. A deliberately broken
    quantization; the quality gates must fail it."""
    import torch

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                w = m.weight
                scale = OUTLIER * w.abs().max() / 2
                m.weight.copy_((w / scale).round().clamp(-2, 1) * scale)


def param_bytes(model: Any) -> int:
    """Bytes of the model's parameters and buffers as stored: quantized tensor subclasses count
    their inner data and scales."""
    import torch

    seen: set[int] = set()
    alive: list[Any] = []  # the tensors seen, kept so that a temporary's id is not reused by the next

    def size(t: Any) -> int:
        if isinstance(t, torch.Tensor):
            if id(t) in seen:
                return 0
            seen.add(id(t))
            alive.append(t)
            if hasattr(t, "__tensor_flatten__") and type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
                names, _ = t.__tensor_flatten__()
                return sum(size(getattr(t, n)) for n in names)
            if isinstance(t, torch.nn.Parameter) and type(t.data) is not torch.Tensor:
                return size(t.data)
            return t.numel() * t.element_size()
        if isinstance(t, (tuple, list)):
            return sum(size(x) for x in t)
        return 0

    total = 0
    for _, v in model.state_dict(keep_vars=True).items():
        total += size(v)
    return total


def time_images_per_second(model: Any, x: Any, batch: int, *, min_seconds: float = 0.5,
                           max_iters: int = 200) -> dict[str, float]:
    """Images/s of ``model`` on ``batch`` images of ``x`` (warmed up; CUDA synchronised)."""
    import torch

    dev = next((t.device for t in model.parameters()), torch.device("cpu"))
    from .encoder import _input_dtype

    xb = x[:batch].to(dev, _input_dtype(model))
    sync: Callable[[], None] = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    with torch.inference_mode():
        model(pixel_values=xb)
        sync()
        n = 0
        t = time.perf_counter()
        while n < max_iters and (time.perf_counter() - t < min_seconds or n < 2):
            model(pixel_values=xb)
            n += 1
        sync()
        dt = time.perf_counter() - t
    return {"batch": float(batch), "iters": float(n), "ms_per_batch": 1000 * dt / n, "images_per_s": batch * n / dt}


def _swap_linears(model: Any, path: str) -> None:
    """Replace every nn.Linear by :class:`NativeQuantLinear` (torch's own kernels, no torchao) or, for
    ``torch-dynamic-int8``, by :func:`DynamicInt8Linear`."""
    import torch

    make = DynamicInt8Linear if path == "torch-dynamic-int8" else functools.partial(NativeQuantLinear, path=path)
    for m in list(model.modules()):
        for child_name, child in list(m.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(m, child_name, make(child))


@functools.cache
def _dynamic_int8_class() -> Any:
    import torch
    from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine, quantize_affine

    def int8(t: Any) -> tuple[Any, Any]:  # the weights (the activations: forward, the same recipe)
        """``t`` (rows x K) as symmetric int8 per row (levels -127..127) and the rows' scales (rows x 1)."""
        block = (1, t.shape[-1])
        scale, zero = choose_qparams_affine(t, MappingType.SYMMETRIC, block, torch.int8, quant_min=-127,
                                            quant_max=127, scale_dtype=torch.float32)
        return quantize_affine(t, block, scale, zero, torch.int8, -127, 127), scale.reshape(-1, 1)

    class _DynamicInt8Linear(torch.nn.Module):
        """W8A8: int8 weights per output channel and int8 activations per token, both by torchao's
        symmetric affine quantization, multiplied by ``torch._int_mm`` (int32 accumulation)."""

        qweight: Any
        wscale: Any
        bias: Any

        def __init__(self, lin: Any) -> None:
            super().__init__()
            q, scale = int8(lin.weight.detach().float())
            self.register_buffer("qweight", q)
            self.register_buffer("wscale", scale.reshape(1, -1))
            self.register_buffer("bias", None if lin.bias is None else lin.bias.detach().float().clone())

        def forward(self, x: Any) -> Any:
            shape = x.shape
            x2 = x.reshape(-1, shape[-1]).float()
            # per token, the weights' recipe (int8 above: scale = max|x| / 127, levels -127..127; the
            # test checks they agree), written out: choose_qparams_affine's checks cost more than the matmuls
            xs = x2.abs().amax(1, keepdim=True).clamp(min=torch.finfo(torch.float32).eps) / 127
            xq = (x2 / xs).round().clamp(-127, 127).to(torch.int8)
            pad = max(0, 17 - xq.shape[0])  # torch._int_mm takes more than 16 rows
            acc = torch._int_mm(torch.nn.functional.pad(xq, (0, 0, 0, pad)) if pad else xq, self.qweight.t())
            y = acc[: xq.shape[0]].float() * xs * self.wscale
            if self.bias is not None:
                y = y + self.bias
            return y.to(x.dtype).reshape(*shape[:-1], -1)

    return _DynamicInt8Linear


def DynamicInt8Linear(lin: Any) -> Any:  # noqa: N802 - a class made lazily (torch, torchao imports)
    """``lin`` as a dynamic int8 Linear: torchao's per-channel int8 weights on torch's dynamic kernel."""
    return _dynamic_int8_class()(lin)


@functools.cache
def _native_linear_class() -> Any:
    import torch

    class _NativeQuantLinear(torch.nn.Module):
        """W8A8 dynamic int8 on ``torch._int_mm`` (per-token activation and per-channel weight scales),
        int8 weight-only (dequantize, then a float matmul) or per-row FP8 on ``torch._scaled_mm``."""

        def __init__(self, lin: Any, path: str) -> None:
            super().__init__()
            self.path = path
            self.out_dtype = lin.weight.dtype
            w = lin.weight.detach().float()
            if path == "fp8":
                scale = w.abs().amax(1, keepdim=True).clamp(min=1e-12) / 448.0
                self.register_buffer("qweight", (w / scale).to(torch.float8_e4m3fn))
            else:
                scale = w.abs().amax(1, keepdim=True).clamp(min=1e-12) / 127.0
                self.register_buffer("qweight", (w / scale).round().clamp(-127, 127).to(torch.int8))
            self.register_buffer("wscale", scale.float())
            self.register_buffer("bias", None if lin.bias is None else lin.bias.detach().clone())

        qweight: Any
        wscale: Any
        bias: Any

        def forward(self, x: Any) -> Any:
            shape = x.shape
            x2 = x.reshape(-1, shape[-1])
            if self.path == "int8-weight-only":
                y = torch.nn.functional.linear(x2, (self.qweight.to(x.dtype) * self.wscale.to(x.dtype)))
            elif self.path == "int8-dynamic":
                xs = x2.float().abs().amax(1, keepdim=True).clamp(min=1e-12) / 127.0
                xq = (x2.float() / xs).round().clamp(-127, 127).to(torch.int8)
                pad = max(0, 17 - xq.shape[0])  # torch._int_mm needs more than 16 rows
                xq_p = torch.nn.functional.pad(xq, (0, 0, 0, pad)) if pad else xq
                acc = torch._int_mm(xq_p, self.qweight.t())[: xq.shape[0]]
                y = (acc.float() * xs * self.wscale.t()).to(x.dtype)
            else:  # fp8
                xs = x2.float().abs().amax(1, keepdim=True).clamp(min=1e-12) / 448.0
                xq = (x2.float() / xs).to(torch.float8_e4m3fn)
                y = torch._scaled_mm(xq, self.qweight.t(), scale_a=xs, scale_b=self.wscale.t(),
                                     out_dtype=x.dtype)
            if self.bias is not None:
                y = y + self.bias.to(y.dtype)
            return y.reshape(*shape[:-1], -1)

    return _NativeQuantLinear


def NativeQuantLinear(lin: Any, path: str) -> Any:  # noqa: N802 - a class made lazily (torch import)
    return _native_linear_class()(lin, path)
