"""The phase-2 measurements, pytest-free: load the encoder and images named by ``[params.phase2]``,
compare every quantization path with the reference side by side, build the multimodal requests.

Reference dtype: fp16 on a GPU (the roadmap's baseline), fp32 on the CPU (fp16 matmuls are emulated
there; bf16 is measured as a path). The probe is fitted on the reference embeddings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .quality import QualityReport


@dataclass
class VisionSetup:
    encoder: Any  # encoder.Encoder (reference dtype, on device)
    images: Any  # images.ImageSet
    pixels: Any  # torch tensor (N, 3, S, S) float32, CPU
    reference: npt.NDArray[np.float32]  # reference embeddings of every image
    device: str
    reference_dtype: str
    embedded: bool
    results: dict[str, PathResult] = field(default_factory=dict)


@dataclass(frozen=True)
class PathResult:
    path: str
    status: str  # "ok" or the reason it did not run
    param_bytes: int = 0
    timing: Mapping[int, Mapping[str, float]] = field(default_factory=dict)  # batch -> images/s ...
    quality: QualityReport | None = None


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# Keys of [params.phase2.embedded] that are the CPU's own choices: the W8A8 torch-dynamic-int8 path runs on the
# CPU only, so on a GPU the embedded encoder keeps [params.phase2] vision_quant (the gated path).
CPU_CHOICES = ("vision_quant",)


def params(phase2: Mapping[str, Any], on: str) -> dict[str, Any]:
    """The effective ``[params.phase2]`` on device ``on``: its ``embedded`` overrides apply to the
    embedded encoder, all of them on the CPU and all but :data:`CPU_CHOICES` on a GPU."""
    raw = dict(phase2)
    emb = dict(raw.pop("embedded", {}))
    if str(raw.get("encoder", "embedded")) == "embedded":
        raw.update({k: v for k, v in emb.items() if on == "cpu" or k not in CPU_CHOICES})
    return raw


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one CPU thread inside (tiny matmuls on a shared CPU: stable timings, ~10x less CPU
    time than two contending threads); the previous setting is restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def setup(params: Mapping[str, Any], dev: str | None = None) -> VisionSetup:
    """Encoder + images + reference embeddings from ``[params.phase2]``."""
    with one_thread():
        return _setup(params, dev)


def _setup(params: Mapping[str, Any], dev: str | None) -> VisionSetup:
    from . import encoder as enc
    from . import images as imgs

    dev = dev or device()
    src = str(params.get("encoder", "embedded"))
    embedded = src == "embedded"
    source = str(enc.make_encoder()) if embedded else src
    ref_dtype = "float16" if dev == "cuda" else "float32"
    e = enc.load_encoder(source, dtype=ref_dtype, device=dev)
    root = imgs.make_images() if str(params.get("images", "embedded")) == "embedded" else params["images"]
    fine = params.get("fine_subsets")
    if fine is not None and str(params.get("images", "embedded")) != "embedded":
        fine = list(fine)
    data = imgs.load_image_folder(root, fine=fine, max_per_class=params.get("max_per_class"))
    x = enc.pixels(data.images, e.image_size, e.mean, e.std)
    ref = enc.embed(e.model, x)
    return VisionSetup(e, data, x, ref, dev, ref_dtype, embedded)


def run_path(s: VisionSetup, path: str, batches: Sequence[int]) -> PathResult:
    """Quantize, time (images/s per batch size) and score one path against the reference."""
    with one_thread():
        return _run_path(s, path, batches)


def _run_path(s: VisionSetup, path: str, batches: Sequence[int]) -> PathResult:
    from .encoder import embed
    from .quality import evaluate_quality
    from .quant import Unavailable, quantize, time_images_per_second

    try:
        q = quantize(s.encoder.model, path, s.device)
    except Unavailable as e:
        r = PathResult(path, f"skipped: {e}")
        s.results[path] = r
        return r
    timing = {b: time_images_per_second(q.model, s.pixels, b) for b in batches if b <= s.pixels.shape[0]}
    d = s.images
    ev = ~d.train
    emb = np.array(s.reference, copy=True)  # train rows: unused by the quantized side (the probe is fitted on the reference)
    emb[ev] = embed(q.model, s.pixels[ev])
    rep = evaluate_quality(path, s.reference, emb, d.subsets, d.labels, d.train, d.classes, d.fine)
    r = PathResult(path, "ok", q.param_bytes, timing, rep)
    s.results[path] = r
    del q
    return r


def reference_result(s: VisionSetup, batches: Sequence[int]) -> PathResult:
    from .quant import param_bytes, time_images_per_second

    name = {"float16": "fp16", "float32": "fp32"}[s.reference_dtype]
    with one_thread():
        timing = {b: time_images_per_second(s.encoder.model, s.pixels, b) for b in batches if b <= s.pixels.shape[0]}
    r = PathResult(name + " (reference)", "ok", param_bytes(s.encoder.model), timing, None)
    s.results["reference"] = r
    return r


def side_by_side(s: VisionSetup) -> tuple[str, list[str]]:
    """A Markdown table of every path and the sentences saying which beats the reference and why."""
    ref = s.results["reference"]
    batches = sorted(ref.timing)
    head = ["path", "status", "param MB"] + [f"img/s b={b}" for b in batches] + [f"vs ref b={b}" for b in batches] + [
        "top-1 drop", "top-1 drop fine", "1-mean cos"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    verdicts: list[str] = []
    for name, r in s.results.items():
        if r.status != "ok":
            lines.append(f"| {name} | {r.status} |" + " |" * (len(head) - 2))
            continue
        ips = [r.timing[b]["images_per_s"] for b in batches if b in r.timing]
        rel = [r.timing[b]["images_per_s"] / ref.timing[b]["images_per_s"] for b in batches if b in r.timing]
        q = r.quality
        qcols = ["-", "-", "-"] if q is None else [
            f"{q.drops('all').mean():+.2%}", f"{q.drops('fine').mean():+.2%}" if q.fine else "-",
            f"{q.cos_losses('all').mean():.4f}"]
        label = ref.path if name == "reference" else name
        lines.append(f"| {label} | ok | {r.param_bytes / 1e6:.2f} | " + " | ".join(f"{v:,.0f}" for v in ips) + " | "
                     + " | ".join(f"{v:.2f}x" for v in rel) + " | " + " | ".join(qcols) + " |")
        if name != "reference" and rel:
            best = max(range(len(rel)), key=lambda i: rel[i])
            verdicts.append(_why(name, rel[best], batches[best], s.device))
    return "\n".join(lines), verdicts


_KERNELS = {
    "int8-weight-only": "int8 weights scaled inside the matmul (torchao's weight-only kernel): a quarter of the "
                        "fp32 weight bytes to read; wins where the matmul is memory-bound (small layers, small "
                        "batches), not where it is compute-bound",
    "int8-dynamic": "activations quantized per token at run time + torch._int_mm (int8 GEMM); the quantize/"
                    "dequantize kernels around every Linear cost more than the GEMM saves on small layers",
    "torch-dynamic-int8": "fbgemm/oneDNN dynamic int8 Linear (packed int8 weights, per-batch activation scale)",
    "fp8": "per-row FP8 (e4m3) weights and activations on torch._scaled_mm (Hopper FP8 tensor cores)",
    "bf16": "bfloat16 everywhere (on CPUs with AVX512-BF16/AMX a native GEMM, else converted)",
    "fp16": "float16 everywhere",
    "damaged-w2": "a deliberately broken 2-bit quantization on float kernels (fake-quantized, mostly zero "
                  "weights): its speed is not a result",
}


def _why(path: str, ratio: float, batch: int, dev: str) -> str:
    what = "beats" if ratio > 1.0 else "does not beat"
    return (f"{path} {what} the reference on {dev}: best {ratio:.2f}x at batch {batch} "
            f"({(ratio - 1) * 100:+.0f}%); kernel: {_KERNELS.get(path, path)}")


def multimodal_requests(s: VisionSetup, n: int, max_tokens: int, seed: int = 0) -> list[Any]:
    """``n`` chat requests, each one eval image (a PNG data URI, at the tower's input size) + a question."""
    from ..contract import Request
    from .vlm import data_uri, multimodal_messages

    rng = np.random.default_rng(seed)
    ev = np.flatnonzero(~s.images.train)
    pick = rng.choice(ev, size=min(n, ev.size), replace=False)
    questions = {"shapes": "Which shape is this?", "text": "Read the word in the image.",
                 "bars": "Which bar is the tallest?", "trend": "Describe the trend of the line."}
    out = []
    for i in pick:
        sub = s.images.subsets[int(i)]
        q = questions.get(sub, "Describe the image.")
        uri = data_uri(s.images.images[int(i)])
        out.append(Request(prompt=q, max_tokens=max_tokens, api="chat", tag=sub,
                           extra={"messages": multimodal_messages(q, [uri])}))
    return out
