"""What the hardware allows: peak FLOP/s per dtype and memory bandwidth, per device, times a count.

Three sources, in order of precedence:

* ``[hardware]`` in thresholds.toml: ``gpu = "H200"`` and ``count = 8`` (a known accelerator), or
  explicit ``peak_tflops = { bf16 = 989 }`` and ``memory_bandwidth = "4.8 TB/s"`` per device;
* auto-detection: ``torch.cuda.get_device_name`` and ``device_count`` matched against
  :data:`KNOWN` (vendor datasheets, cited in docs/metrics.md);
* on a machine without an accelerator: a measured peak (:mod:`.probe`), cached per machine.

No torch at import: detection and probing import it lazily.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

TERA = 1e12

# dtype spellings -> the keys of ``peak_flops``
_DTYPES = {
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "tf32", "fp8": "fp8",
    "float8": "fp8", "float8_e4m3fn": "fp8", "e4m3": "fp8", "int8": "int8",
}  # fmt: skip
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp8": 1, "int8": 1}


def norm_dtype(dtype: str | None, default: str = "bf16") -> str:
    """``"bfloat16"`` -> ``"bf16"``; ``None``/``"auto"`` -> ``default``; unknown -> ValueError."""
    if dtype is None:
        return default
    d = str(dtype).lower().removeprefix("torch.")
    if d in ("", "auto"):
        return default
    if d not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (use one of {', '.join(sorted(set(_DTYPES)))})")
    return _DTYPES[d]


@dataclass(frozen=True)
class Accelerator:
    """One device's dense (no sparsity) peak FLOP/s per dtype and its memory bandwidth (bytes/s)."""

    name: str
    peak_flops: Mapping[str, float]
    mem_bandwidth: float
    memory_gib: float = 0.0
    source: str = ""
    patterns: tuple[str, ...] = ()  # regexes matched against torch.cuda.get_device_name()


def _acc(name: str, pats: tuple[str, ...], tflops: Mapping[str, float], tb_s: float, gib: float, src: str) -> Accelerator:
    return Accelerator(name, {k: v * TERA for k, v in tflops.items()}, tb_s * TERA, gib, src, pats)


# Dense peaks from the vendors' datasheets (the "with sparsity" figures halved). See docs/metrics.md.
KNOWN: dict[str, Accelerator] = {a.name: a for a in (
    _acc("B200", (r"\bB200\b",), {"bf16": 2250, "fp16": 2250, "fp8": 4500, "tf32": 1100, "fp32": 75, "int8": 4500},
         8.0, 180, "NVIDIA DGX B200 datasheet (72 PFLOPS FP8 sparse / 8 GPUs; 64 TB/s HBM3e / 8)"),
    _acc("H200-NVL", (r"\bH200\b.*NVL",), {"bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "tf32": 417.5, "fp32": 60,
                                          "int8": 1670.5},
         4.8, 141, "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL: 1,671 TFLOPS BF16 sparse)"),
    _acc("H200", (r"\bH200\b",), {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7, "fp32": 66.9,
                                  "int8": 1978.9},
         4.8, 141, "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM)"),
    _acc("H100-PCIe", (r"\bH100\b.*PCIe",), {"bf16": 756.5, "fp16": 756.5, "fp8": 1513, "tf32": 378, "fp32": 51.2,
                                             "int8": 1513},
         2.0, 80, "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe)"),
    _acc("H100-NVL", (r"\bH100\b.*NVL",), {"bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "tf32": 417.5, "fp32": 60,
                                          "int8": 1670.5},
         3.9, 94, "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL: 1,671 TFLOPS BF16 sparse)"),
    _acc("H100", (r"\bH100\b",), {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7, "fp32": 66.9,
                                  "int8": 1978.9},
         3.35, 80, "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)"),
    _acc("A100-40GB", (r"\bA100\b.*40GB",), {"bf16": 312, "fp16": 312, "tf32": 156, "fp32": 19.5, "int8": 624},
         1.555, 40, "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM)"),
    _acc("A100", (r"\bA100\b",), {"bf16": 312, "fp16": 312, "tf32": 156, "fp32": 19.5, "int8": 624},
         2.039, 80, "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM)"),
    _acc("L40S", (r"\bL40S\b",), {"bf16": 362.05, "fp16": 362.05, "fp8": 733, "tf32": 183, "fp32": 91.6,
                                  "int8": 733},
         0.864, 48, "NVIDIA L40S datasheet"),
    _acc("L4", (r"\bL4\b",), {"bf16": 121, "fp16": 121, "fp8": 242.5, "tf32": 60, "fp32": 30.3, "int8": 242.5},
         0.3, 24, "NVIDIA L4 Tensor Core GPU datasheet"),
    _acc("MI300X", (r"MI300X",), {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7, "fp32": 163.4,
                                  "int8": 2614.9},
         5.3, 192, "AMD Instinct MI300X accelerator datasheet"),
)}  # fmt: skip


def lookup(device_name: str) -> Accelerator | None:
    """The known accelerator a device name (``torch.cuda.get_device_name``) or table name refers to."""
    if device_name in KNOWN:
        return KNOWN[device_name]
    key = device_name.strip().upper()
    for acc in KNOWN.values():
        if acc.name.upper() == key:
            return acc
    for acc in KNOWN.values():  # most specific first (H100-PCIe before H100)
        if any(re.search(p, device_name, re.I) for p in acc.patterns):
            return acc
    return None


@dataclass(frozen=True)
class Hardware:
    """``count`` devices of one kind. Peaks and bandwidth are per device; totals scale with count."""

    name: str
    count: int
    peak_flops: Mapping[str, float]
    mem_bandwidth: float
    source: str = ""
    interconnect_allreduce_s: float | None = None  # measured all-reduce latency per call (phase 3)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def peak(self, dtype: str | None) -> float:
        """Per-device peak FLOP/s for ``dtype``; a dtype missing from the table falls back to fp32
        on a CPU (its probe measures fp32) and raises ValueError elsewhere."""
        d = norm_dtype(dtype)
        if d in self.peak_flops:
            return self.peak_flops[d]
        if d == "tf32" and "fp32" in self.peak_flops:
            return self.peak_flops["fp32"]
        if self.is_cpu and "fp32" in self.peak_flops:
            return self.peak_flops["fp32"]
        raise ValueError(f"no peak FLOP/s for {d} on {self.name} (known: {', '.join(self.peak_flops)})")

    @property
    def is_cpu(self) -> bool:
        return self.name.lower().startswith("cpu")

    def with_count(self, n: int) -> Hardware:
        return replace(self, count=n)

    def describe(self) -> str:
        return self.name if self.is_cpu or self.count == 1 else f"{self.count}x {self.name}"

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name, "count": self.count, "source": self.source,
            "peak_tflops": {k: round(v / TERA, 3) for k, v in self.peak_flops.items()},
            "memory_bandwidth_tb_s": round(self.mem_bandwidth / TERA, 4),
        }  # fmt: skip


def from_accelerator(acc: Accelerator, count: int = 1, source: str = "") -> Hardware:
    return Hardware(acc.name, count, dict(acc.peak_flops), acc.mem_bandwidth, source or acc.source)
