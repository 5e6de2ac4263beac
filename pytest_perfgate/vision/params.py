"""``[params.phase2]`` of thresholds.toml as a typed workload, and the two pipelines it names.

:meth:`Phase2.parse` applies the ``embedded`` overrides as :func:`.suite.params` does (all of them
on the CPU, all but the CPU's own choices on a GPU) and names the key at fault.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES = ("quantized", "fp16")


@dataclass(frozen=True)
class Phase2:
    """The phase-2 workload (``[params.phase2]``) on one device."""

    vision_quant: str  # the gated quantization path
    paths: tuple[str, ...]  # every path measured side by side
    timing_batches: tuple[int, ...]
    requests: int  # image + text requests per pipeline (the same ones for both)
    max_tokens: int
    max_seconds: float
    device: str  # "cuda" or "cpu"
    warmup: int = 3
    encoder: str = "embedded"
    images: str = "embedded"
    fine_subsets: tuple[str, ...] | None = None
    max_per_class: int | None = None
    quantized: str | None = None  # [engines.NAME] of the quantized pipeline (a GPU runner's)
    fp16: str | None = None  # [engines.NAME] of the FP16 pipeline
    llm_config: str | None = None  # the LLM's config.json (the KV-cache cost of a token)

    @classmethod
    def parse(cls, raw: Mapping[str, Any], device: str) -> Phase2:
        from .suite import params

        p = params(raw, device)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        missing = [n for n, f in fields.items() if n != "device" and n not in p and f.default is dataclasses.MISSING]
        if missing:
            raise ValueError(f"thresholds.toml [params.phase2]: missing {', '.join(missing)}")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in p.items() if k in fields}
        try:
            return cls(device=device, **values)
        except TypeError as e:
            raise ValueError(f"thresholds.toml [params.phase2]: {e}") from None

    @property
    def reference_dtype(self) -> str:
        """The reference the quantized path is compared with: fp16 on a GPU, fp32 on the CPU."""
        return "fp16" if self.device == "cuda" else "fp32"

    def as_mapping(self) -> dict[str, Any]:
        """The table :func:`.suite.setup` reads."""
        return dataclasses.asdict(self)

    def engine(self, role: str) -> str | None:
        """The configured engine of pipeline ``role`` ("quantized" / "fp16"), None: the embedded one."""
        if role not in ROLES:
            raise ValueError(f"phase 2 pipeline {role!r}: one of {', '.join(ROLES)}")
        name: str | None = getattr(self, role)
        return name

    def embedded_pipeline(self, role: str) -> dict[str, Any]:
        """Arguments of the embedded pipeline ``role``: the tiny LLaVA on transformers, its vision
        tower quantized with ``vision_quant`` ("quantized") or in the reference dtype ("fp16")."""
        from .vlm import make_vlm

        self.engine(role)
        quant = self.vision_quant if role == "quantized" else self.reference_dtype
        return {"model": str(make_vlm()), "vision_quant": quant, "device": self.device}

    def llm(self) -> dict[str, Any]:
        """The LLM's config (``llm_config``, else the embedded LLaVA's language model)."""
        from .vlm import make_vlm

        path = Path(self.llm_config) if self.llm_config else make_vlm() / "config.json"
        cfg: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return cfg
