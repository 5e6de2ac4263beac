"""Phase 2: the vision encoder's quality and speed under quantization.

* :mod:`.images`  - seeded generated image sets (shapes; rendered text; bar and line charts) written in
  ImageFolder layout, and the ImageFolder loader a user points at real images;
* :mod:`.encoder` - the tiny CLIP-style encoder trained on them (cached by parameter hash), and the
  loader of a Hugging Face id / local directory (CLIP ViT-L/14);
* :mod:`.quant`   - quantization paths side by side (bf16/fp16, torchao INT8 weight-only and dynamic,
  FP8, torch dynamic INT8 on CPU, and a deliberately damaged 2-bit path), parameter bytes, timing;
* :mod:`.quality` - embedding agreement and linear-probe accuracy drop, per image and per subset;
* :mod:`.vlm`     - the tiny vision-language model of the throughput gate;
* :mod:`.memory`  - the KV-cache tokens that freed encoder bytes buy.

The public face (``from pytest_perfgate import vision``; names load lazily): :class:`Phase2` (the
workload), :func:`setup` / :class:`VisionSetup`, :func:`run_path`, :func:`reference_result`,
:func:`side_by_side`, :func:`multimodal_requests`, :func:`freed_kv_tokens`, :func:`kv_cost`,
:func:`pipeline_peak_bytes`, :func:`device`.

Heavy imports (torch, PIL, matplotlib, transformers, torchao) happen inside the functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..runtime.lazy import lazy_face

__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "params": ("Phase2",),
    "suite": ("VisionSetup", "PathResult", "device", "setup", "run_path", "reference_result", "side_by_side",
              "multimodal_requests"),
    "quality": ("QualityReport",),
    "memory": ("freed_kv_tokens", "kv_cost"),
    "gpu_check": ("pipeline_peak_bytes",),
})

if TYPE_CHECKING:  # pragma: no cover
    from .gpu_check import pipeline_peak_bytes as pipeline_peak_bytes
    from .memory import freed_kv_tokens as freed_kv_tokens
    from .memory import kv_cost as kv_cost
    from .params import Phase2 as Phase2
    from .quality import QualityReport as QualityReport
    from .suite import PathResult as PathResult
    from .suite import VisionSetup as VisionSetup
    from .suite import device as device
    from .suite import multimodal_requests as multimodal_requests
    from .suite import reference_result as reference_result
    from .suite import run_path as run_path
    from .suite import setup as setup
    from .suite import side_by_side as side_by_side
