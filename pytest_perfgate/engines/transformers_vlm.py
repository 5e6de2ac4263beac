"""Engine kind ``transformers-vlm``: a vision-language model generating in this process with
transformers (``AutoModelForImageTextToText``), its vision tower optionally quantized.

The embedded phase-2 engine (vLLM 0.32's CPU build can't serve a CLIP-tower model here: see
:mod:`pytest_perfgate.vision.vlm`). Requests are OpenAI chat requests: ``Request.extra["messages"]``
holds the chat messages with ``image_url`` parts (base64 data URIs), exactly what the ``openai``
engine sends to a server, so the same request list drives both. Generation is real (greedy or
sampled ``generate``); every new token is timed as it leaves ``generate`` through a streamer, so TTFT
includes image decoding, preprocessing, the vision tower and the prefill. Requests run one at a
time (``generate`` does not batch across calls).

Arguments: ``model`` (directory or Hugging Face id; ``"embedded:vlm"`` is the generated tiny
LLaVA), ``vision_quant`` (a :data:`pytest_perfgate.vision.quant.PATHS` name, default ``fp32``),
``dtype`` (of the language model, default ``float32``), ``device`` (``cpu``/``cuda``), ``threads``.
Counters: ``perfgate:vision_encoder_seconds`` / ``perfgate:vision_encoder_calls`` (the tower's own
forward time, measured with hooks), ``perfgate:generation_tokens``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..contract import Clock, EngineError, Request, RequestRecord
from ..runtime.redaction import redact_args
from ..vision.vlm import cast_to_projector

KIND = "transformers-vlm"
_KEYS = {"model", "vision_quant", "dtype", "device", "threads"}


def create(name: str, args: Mapping[str, Any]) -> TransformersVLMEngine:
    unknown = sorted(set(args) - _KEYS)
    if unknown:
        raise EngineError(f"[engines.{name}] {unknown[0]}: unknown argument of a {KIND} engine "
                          f"(arguments: {', '.join(sorted(_KEYS))})")
    if "model" not in args:
        raise EngineError(f"[engines.{name}] model: missing (the model directory or name to serve)")
    from ..vision.quant import PATHS

    vq = str(args.get("vision_quant", "fp32"))
    if vq not in PATHS:
        raise EngineError(f"[engines.{name}] vision_quant: {vq!r} is not one of {', '.join(PATHS)}")
    return TransformersVLMEngine(name, args)


class TransformersVLMEngine:
    kind = KIND

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self.name = name
        self.args = dict(args)
        self.device = str(args.get("device", "cpu"))
        self.vision_quant = str(args.get("vision_quant", "fp32"))
        self._model: Any = None
        self._proc: Any = None
        self._lock = threading.Lock()
        self._enc_ns = 0
        self._enc_calls = 0
        self._tokens = 0
        self._t0 = 0
        self.tower_bytes: dict[str, int] = {}

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        if self._model is not None:
            return
        import torch
        import transformers

        tf: Any = transformers
        AutoModelForImageTextToText, AutoProcessor = tf.AutoModelForImageTextToText, tf.AutoProcessor
        from ..vision.quant import param_bytes, quantize

        if "threads" in self.args:
            torch.set_num_threads(int(self.args["threads"]))
        src = str(self.args["model"])
        try:
            self._proc = AutoProcessor.from_pretrained(src)
            model = AutoModelForImageTextToText.from_pretrained(
                src, dtype=getattr(torch, str(self.args.get("dtype", "float32")))).to(self.device).eval()
        except Exception as e:
            raise EngineError(f"[engines.{self.name}] model: could not load {src!r}: {type(e).__name__}: {e}") from e
        tower = model.model.vision_tower
        before = param_bytes(tower)
        if self.vision_quant != "fp32":
            try:
                q = quantize(tower, self.vision_quant, self.device)
            except Exception as e:
                raise EngineError(f"[engines.{self.name}] vision_quant: {e}") from e
            model.model.vision_tower = q.model
            tower = q.model
        self.tower_bytes = {"before": before, "after": param_bytes(tower)}
        cast_to_projector(model)
        tower.register_forward_pre_hook(self._enc_start)
        tower.register_forward_hook(self._enc_end)
        self._model = model

    def _enc_start(self, *_: Any) -> None:
        self._t0 = time.perf_counter_ns()

    def _enc_end(self, *_: Any) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
        self._enc_ns += time.perf_counter_ns() - self._t0
        self._enc_calls += 1

    def stop(self) -> None:
        self._model = None
        self._proc = None

    # -- requests ------------------------------------------------------------------------------
    def _inputs(self, request: Request) -> Any:
        from ..vision.vlm import split_messages

        messages = request.extra.get("messages")
        if messages is None:
            if not isinstance(request.prompt, str):
                raise ValueError("needs a text prompt or extra['messages']")
            messages = [{"role": "user", "content": request.prompt}]
        msgs, images = split_messages(messages)
        text = self._proc.apply_chat_template(list(msgs), add_generation_prompt=True, tokenize=False)
        return self._proc(images=images or None, text=text, return_tensors="pt").to(self.device)

    def _generate_blocking(self, request: Request, record: RequestRecord, clock: Clock,
                           push: Any) -> None:
        import torch
        from transformers.generation.streamers import BaseStreamer

        class _Timer(BaseStreamer):
            first = True

            def put(self, value: Any) -> None:
                if self.first:  # the prompt
                    self.first = False
                    return
                push(clock(), int(value.numel()))

            def end(self) -> None:
                pass

        with self._lock:
            record.sent_ns = clock()
            inputs = self._inputs(request)
            record.prompt_tokens = int(inputs["input_ids"].shape[1])
            sample = request.temperature > 0
            kw: dict[str, Any] = {"do_sample": sample, "max_new_tokens": request.max_tokens,
                                  "streamer": _Timer(), "pad_token_id": self._proc.tokenizer.pad_token_id}
            if sample:
                kw["temperature"] = request.temperature
            if request.ignore_eos:
                kw["min_new_tokens"] = request.max_tokens
            with torch.inference_mode():
                out = self._model.generate(**inputs, **kw)
            n = int(out.shape[1] - inputs["input_ids"].shape[1])
            record.finish_reason = "length" if n >= request.max_tokens else "stop"

    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        record.token_count_source = "server"
        record.tag = record.tag or request.tag
        record.expected_prompt_tokens = request.prompt_tokens
        if self._model is None:
            record.error = "engine not started"
            return
        loop = asyncio.get_running_loop()
        n_out = 0

        def push(t: int, n: int) -> None:
            nonlocal n_out
            record.chunk_ns.append(t)
            record.chunk_tokens.append(n)
            n_out += n

        try:
            await loop.run_in_executor(None, self._generate_blocking, request, record, clock, push)
        except Exception as e:
            record.error = f"{type(e).__name__}: {e}"[:300]
        record.output_tokens = n_out
        self._tokens += n_out
        record.end_ns = record.chunk_ns[-1] if record.chunk_ns and record.error is None else clock()

    # -- observation ---------------------------------------------------------------------------
    async def counters(self) -> dict[str, float]:
        return {"perfgate:vision_encoder_seconds": self._enc_ns / 1e9,
                "perfgate:vision_encoder_calls": float(self._enc_calls),
                "perfgate:generation_tokens": float(self._tokens)}

    def info(self) -> dict[str, Any]:
        import transformers

        from ..runtime.device import device_name

        return {"name": self.name, "kind": KIND, "transformers_version": transformers.__version__,
                "model": self.args.get("model"), "args": redact_args(dict(self.args)),
                "vision_quant": self.vision_quant, "vision_tower_bytes": dict(self.tower_bytes),
                "device": device_name() if self.device == "cuda" else "cpu"}

    def tokenizer(self) -> Any:
        if self._proc is None:
            import transformers

            tf: Any = transformers
            self._proc = tf.AutoProcessor.from_pretrained(str(self.args["model"]))
        return self._proc.tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer().encode(text, add_special_tokens=False))
