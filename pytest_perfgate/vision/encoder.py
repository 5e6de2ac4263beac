"""The vision encoder under test: a tiny CLIP-style tower trained here, or real weights.

:func:`make_encoder` trains, in about a minute on a CPU, a ``CLIPVisionModelWithProjection`` (ViT:
64-px images, 8-px patches, 4 layers, width 128) on the generated image sets' ``train`` split,
CLIP-style: image embeddings against a learned text-side embedding of every class name (a
symmetric contrastive InfoNCE over the batch's classes, logit scale learned). Its accuracies mean
something (a random tower's do not). The result is a Hugging Face model directory cached under
``<cache>/vision-<hash>`` keyed by the sha256 of :data:`PARAMS` (training is seeded and runs a
fixed number of steps, so the same parameters give the same model).

:func:`load_encoder` loads that directory, any local directory or a Hugging Face id
(``openai/clip-vit-large-patch14-336``): CLIP and SigLIP vision towers (with projection when the
checkpoint has one).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

GENERATOR_VERSION = 1
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

#: Everything that determines the trained encoder (images.PARAMS is part of the key too).
PARAMS: dict[str, Any] = {
    "image_size": 48,  # the 64-px images are resized to this (36 patches of 8 px)
    "patch_size": 8,
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "projection_dim": 64,
    "steps": 400,
    "batch_size": 64,
    "lr": 3e-3,
    "weight_decay": 0.05,
    "seed": 0,
}


@dataclass(frozen=True)
class Encoder:
    """A loaded vision tower and how to feed it."""

    model: Any  # torch.nn.Module: pixel_values -> embeddings (see embed())
    source: str
    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    info: Mapping[str, Any]


def params_hash(params: Mapping[str, Any], images_hash: str) -> str:
    blob = json.dumps({"version": GENERATOR_VERSION, "params": dict(params), "images": images_hash}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def make_encoder(out_dir: Path | None = None, params: Mapping[str, Any] | None = None,
                 images_params: Mapping[str, Any] | None = None) -> Path:
    """Train (or reuse) the tiny CLIP-style encoder; returns its model directory."""
    from . import images as imgs

    p = {**PARAMS, **(params or {})}
    ip = {**imgs.PARAMS, **(images_params or {})}
    digest = params_hash(p, imgs.params_hash(ip))
    def build(tmp: Path) -> dict[str, Any]:
        report = train(imgs.load_image_folder(imgs.make_images(out_dir, ip), fine=None), p, tmp)
        return {"params_hash": digest, "params": p, "images_params": ip, "training": report}

    root = Path(out_dir) if out_dir is not None else imgs.cache_root()
    return imgs.cached_build(root, f"vision-{digest[:16]}", build)


def _config(p: Mapping[str, Any]) -> Any:
    from transformers import CLIPVisionConfig

    return CLIPVisionConfig(
        image_size=int(p["image_size"]), patch_size=int(p["patch_size"]), hidden_size=int(p["hidden_size"]),
        intermediate_size=int(p["intermediate_size"]), num_hidden_layers=int(p["num_hidden_layers"]),
        num_attention_heads=int(p["num_attention_heads"]), projection_dim=int(p["projection_dim"]),
    )


def pixels(images: npt.NDArray[np.uint8], size: int, mean: tuple[float, ...] = CLIP_MEAN,
           std: tuple[float, ...] = CLIP_STD) -> Any:
    """uint8 (N, H, W, 3) -> normalised float32 (N, 3, size, size) torch tensor."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float().div_(255.0)
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False).clamp_(0, 1)
    m = torch.tensor(mean).view(1, 3, 1, 1)
    s = torch.tensor(std).view(1, 3, 1, 1)
    return (x - m) / s


def train(data: Any, p: Mapping[str, Any], out: Path) -> dict[str, Any]:
    """Train the tower on ``data``'s train split (all subsets, one class space) and save it to ``out``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matmuls: one thread is ~10x cheaper in CPU time on a shared machine
    try:
        return _train(data, p, out)
    finally:
        torch.set_num_threads(threads)


def _train(data: Any, p: Mapping[str, Any], out: Path) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from transformers import CLIPVisionModelWithProjection

    torch.manual_seed(int(p["seed"]))
    model: Any = CLIPVisionModelWithProjection(_config(p))
    names = [f"{s}/{c}" for s, cs in data.classes.items() for c in cs]
    offset = {s: i for s, i in zip(data.classes, np.cumsum([0] + [len(c) for c in data.classes.values()]),
                                   strict=False)}
    gl = np.asarray([offset[s] + int(y) for s, y in zip(data.subsets, data.labels, strict=True)])
    tr = np.flatnonzero(data.train)
    x_all = pixels(data.images, int(p["image_size"]))
    text = torch.nn.Embedding(len(names), int(p["projection_dim"]))  # the text side: one embedding per class name
    scale = torch.nn.Parameter(torch.tensor(np.log(10.0), dtype=torch.float32))
    params = [*model.parameters(), *text.parameters(), scale]
    steps = int(p["steps"])
    opt = torch.optim.AdamW(params, lr=float(p["lr"]), weight_decay=float(p["weight_decay"]))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=float(p["lr"]), total_steps=steps, pct_start=0.1)
    rng = np.random.default_rng(int(p["seed"]))
    y_all = torch.from_numpy(gl)
    t0 = time.perf_counter()
    model.train()
    losses: list[float] = []
    for _ in range(steps):
        idx = torch.from_numpy(rng.choice(tr, int(p["batch_size"]), replace=False))
        xb = x_all[idx]
        if rng.random() < 0.5:  # brightness jitter keeps the tower from memorising colours
            xb = xb * float(rng.uniform(0.8, 1.2))
        img = F.normalize(model(pixel_values=xb).image_embeds, dim=-1)
        txt = F.normalize(text.weight, dim=-1)
        logits = scale.exp().clamp(max=100) * img @ txt.T  # image -> every class name
        loss = F.cross_entropy(logits, y_all[idx])
        # text -> image direction over the classes present in the batch (symmetric CLIP loss)
        present = torch.unique(y_all[idx])
        t2i = logits.T[present]
        target = (y_all[idx][None, :] == present[:, None]).float()
        loss = loss + F.cross_entropy(t2i, target / target.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        sched.step()
        losses.append(float(loss))
        if len(losses) % 50 == 0:
            print(f"perfgate: training the tiny vision encoder: step {len(losses)}/{steps}, loss {losses[-1]:.3f}",
                  flush=True)
    model.eval()
    ev = np.flatnonzero(~data.train)
    with torch.no_grad():
        emb = F.normalize(model(pixel_values=x_all[ev]).image_embeds, dim=-1)
        pred = (emb @ F.normalize(text.weight, dim=-1).T).argmax(1).numpy()
    acc = {s: float(np.mean(pred[np.asarray([data.subsets[i] == s for i in ev])]
                            == gl[ev][np.asarray([data.subsets[i] == s for i in ev])]))
           for s in data.classes}
    model.save_pretrained(out, safe_serialization=True)
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_mean": list(CLIP_MEAN), "image_std": list(CLIP_STD),
        "size": {"shortest_edge": int(p["image_size"])},
        "crop_size": {"height": int(p["image_size"]), "width": int(p["image_size"])},
        "image_processor_type": "CLIPImageProcessor"}, indent=1))
    np.save(out / "class_text_embeddings.npy", text.weight.detach().numpy())
    (out / "classes.json").write_text(json.dumps(names))
    return {"seconds": round(time.perf_counter() - t0, 1), "steps": steps, "final_loss": round(losses[-1], 4),
            "zero_shot_eval_accuracy": {k: round(v, 4) for k, v in acc.items()}}


SIGLIP_MEAN = SIGLIP_STD = (0.5, 0.5, 0.5)  # SigLIP preprocessor_config.json


RGB = tuple[float, float, float]


def normalisation(source: str, kind: str) -> tuple[RGB, RGB]:
    """(image_mean, image_std) of a tower: its preprocessor_config.json (a local directory, or a hub
    id's file through transformers' cache), else its family's: SigLIP normalises to [-1, 1] with
    0.5 / 0.5, not CLIP's statistics (which a hub id's SigLIP tower once got)."""
    pre: Path | None = Path(source) / "preprocessor_config.json"
    if pre is None or not pre.is_file():
        try:
            from transformers.utils import hub

            found = hub.cached_file(source, "preprocessor_config.json", _raise_exceptions_for_missing_entries=False)
            pre = Path(found) if found else None
        except Exception:  # offline, no such repo: the family's defaults below
            pre = None
    default: tuple[RGB, RGB] = (SIGLIP_MEAN, SIGLIP_STD) if kind.startswith("siglip") else (CLIP_MEAN, CLIP_STD)
    if pre is None or not pre.is_file():
        return default
    d = json.loads(pre.read_text())
    m, s = d.get("image_mean", default[0]), d.get("image_std", default[1])
    return (float(m[0]), float(m[1]), float(m[2])), (float(s[0]), float(s[1]), float(s[2]))


def load_encoder(source: str, dtype: str = "float32", device: str = "cpu") -> Encoder:
    """Load a vision tower from a local directory or a Hugging Face id (CLIP or SigLIP)."""
    import torch
    from transformers import AutoConfig

    try:
        cfg = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as e:
        raise ValueError(f"vision encoder {source!r}: not a model directory or Hugging Face id: {e}") from None
    kind = getattr(cfg, "model_type", "")
    import transformers

    cls: Any
    if kind in ("clip", "clip_vision_model"):
        cls = transformers.CLIPVisionModelWithProjection
    elif kind in ("siglip", "siglip_vision_model"):
        cls = transformers.SiglipVisionModel
    else:
        raise ValueError(f"vision encoder {source!r}: model_type {kind!r} is not a CLIP or SigLIP vision tower")
    model = cls.from_pretrained(source, dtype=getattr(torch, dtype)).to(device).eval()
    vcfg = getattr(cfg, "vision_config", cfg)
    mean, std = normalisation(source, kind)
    info: dict[str, Any] = {"source": source, "model_type": kind, "class": cls.__name__,
                            "image_size": int(vcfg.image_size), "patch_size": int(vcfg.patch_size),
                            "hidden_size": int(vcfg.hidden_size), "layers": int(vcfg.num_hidden_layers)}
    from .images import DONE

    done = Path(source) / DONE
    if done.is_file():
        info["training"] = json.loads(done.read_text()).get("training")
    return Encoder(model, source, int(vcfg.image_size), mean, std, info)


def embed(model: Any, x: Any, batch: int = 128) -> npt.NDArray[np.float32]:
    """L2-normalised image embeddings (projected when the tower has a projection), float32 numpy."""
    import torch
    import torch.nn.functional as F

    dev = next((t.device for t in model.parameters()), torch.device("cpu"))
    dtype = _input_dtype(model)
    outs = []
    with torch.inference_mode():
        for i in range(0, x.shape[0], batch):
            out = model(pixel_values=x[i : i + batch].to(dev, dtype))
            e = getattr(out, "image_embeds", None)
            if e is None:
                e = out.pooler_output
            outs.append(F.normalize(e.float(), dim=-1).cpu())
    return torch.cat(outs).numpy().astype(np.float32)


def _input_dtype(model: Any) -> Any:
    import torch

    emb = getattr(getattr(model, "vision_model", model), "embeddings", None)
    w = getattr(getattr(emb, "patch_embedding", None), "weight", None)
    return w.dtype if isinstance(w, torch.Tensor) and w.is_floating_point() else torch.float32
