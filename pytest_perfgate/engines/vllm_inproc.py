"""Engine kind ``vllm``: vLLM's ``AsyncLLM`` in this process (its engine core runs in a child).

The arguments are vLLM's own engine arguments (``AsyncEngineArgs`` fields: ``model``,
``speculative_config``, ``tensor_parallel_size``, ``gpu_memory_utilization``,
``enable_prefix_caching``, ``max_model_len``, ``dtype``, ...), passed through unchanged. An unknown
or invalid one raises :class:`EngineError` naming the key and carrying vLLM's own message.

Everything asynchronous runs on the shared engine loop (:data:`pytest_perfgate.contract.LOOP`): ``AsyncLLM`` is
created inside a coroutine on that loop so its output handler binds to it.
"""

from __future__ import annotations

import gc
import itertools
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from ..contract import Clock, EngineError, Request, RequestRecord, run_sync
from ..runtime.device import device_name
from ..runtime.redaction import redact_args
from .registry import model_args

KIND = "vllm"
_ids = itertools.count()


def create(name: str, args: Mapping[str, Any]) -> VLLMEngine:
    """Build (not start) an in-process vLLM engine; validates the arguments against vLLM."""
    engine = VLLMEngine(name, args)
    if _use_forkserver(args):  # its imports overlap with this process's import of vLLM below
        from .vllm_forkserver import warm

        warm()
    engine.engine_args()  # fail early on unknown/invalid argument names
    return engine


# Start options of the embedded default (tiny generated models), per device. Measured with
# benchmarks/bench_startup.py on the 2-core CPU runner: vLLM's CPU default (dynamo + inductor)
# started the baseline engine in 211 s and served the first 8,000-token prompt in 30 s; with
# enforce_eager 82 s and 15 s (same machine, same load); on a quieter machine with vLLM's compile
# cache warm, 78 s compiled vs 48 s eager (benchmarks/README.md). Tiny models gain nothing
# from compilation or CUDA graphs, so both devices run eagerly.
EMBEDDED_CPU_OPTIONS: dict[str, Any] = {
    "enforce_eager": True,
    # the model runs inside the engine-core process instead of a second spawned worker process (one
    # interpreter start of torch + vLLM less per engine: baseline start 46 -> 33 s on the idle 2-core
    # runner; with the fork server below 21 s, and 5 s for the next engine of the session)
    "distributed_executor_backend": "uni",
    # vLLM's CPU worker reserves this share of the machine's memory (refusing to start when less is free)
    "gpu_memory_utilization": 0.3,
}
EMBEDDED_CUDA_OPTIONS: dict[str, Any] = {
    "enforce_eager": True,  # no CUDA-graph capture for a 3M-parameter model
    "dtype": "bfloat16",  # the CPU default is float32; on a GPU the tensor cores want bf16
    "gpu_memory_utilization": 0.2,  # tiny models; leaves the GPU to other jobs on a shared runner
}
CPU_ONLY_ENV = ("VLLM_CPU_KVCACHE_SPACE",)  # vLLM CPU-backend variables, never set on a GPU


def embedded_start(args: Mapping[str, Any], cuda: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """(engine arguments, environment defaults) of an embedded engine on this device: the CPU or a
    CUDA GPU. Explicit arguments from thresholds.toml win over the defaults; the device's own
    settings replace the other device's (float32 -> bfloat16 on CUDA)."""
    out = dict(args)
    if cuda:
        for k, v in EMBEDDED_CUDA_OPTIONS.items():
            if k == "dtype" and out.get("dtype") in (None, "auto", "float32"):
                out[k] = v
            else:
                out.setdefault(k, v)
        return out, {}
    for k, v in EMBEDDED_CPU_OPTIONS.items():
        out.setdefault(k, v)
    # vLLM's CPU backend sizes its KV cache from this variable (GiB); 1 fits 8K prompts
    return out, {"VLLM_CPU_KVCACHE_SPACE": "1"}


def _on_cpu_uniproc(args: Mapping[str, Any]) -> bool:
    return args.get("distributed_executor_backend") == "uni" and device_name() == "cpu"


@contextmanager
def _uniproc_env(args: Mapping[str, Any]) -> Iterator[None]:
    """vLLM's CPU platform turns ``distributed_executor_backend = "uni"`` into its multiprocessing
    executor unless ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` while the config is built; set it for that
    moment only (``AsyncLLM`` still runs its engine core in a child process; vLLM's warning about the
    global seed then concerns that child, not this process)."""
    if not _on_cpu_uniproc(args):
        yield
        return
    old = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = old


def forkserver_args(args: Mapping[str, Any]) -> bool:
    """Would these engine arguments start their engine core from the warm fork server on a CPU?
    Eager (no inductor, whose settings are read at import) and single-process; no device check."""
    return (os.environ.get("PERFGATE_VLLM_FORKSERVER", "1") != "0" and args.get("enforce_eager") is True
            and args.get("distributed_executor_backend") == "uni")


def _use_forkserver(args: Mapping[str, Any]) -> bool:
    """Eager single-process CPU engines start their engine core from the warm fork server
    (:mod:`.vllm_forkserver`); ``PERFGATE_VLLM_FORKSERVER=0`` turns it off (vLLM's own spawn)."""
    return forkserver_args(args) and _on_cpu_uniproc(args)


def _launcher(args: Mapping[str, Any]) -> AbstractContextManager[None]:
    if not _use_forkserver(args):
        return nullcontext()
    from .vllm_forkserver import launching

    return launching()


def _arg_error(name: str, err: BaseException, args: Mapping[str, Any]) -> EngineError:
    """An EngineError naming the offending config key (when we can tell) and vLLM's message."""
    msg = str(err).strip() or type(err).__name__
    m = re.search(r"keyword argument '([^']+)'", msg)
    key = m.group(1) if m else next((k for k in args if k in msg), None)
    where = f"[engines.{name}] {key}" if key else f"[engines.{name}]"
    return EngineError(f"{where}: vLLM rejected the engine argument: {msg}")


class VLLMEngine:
    """One ``AsyncLLM``; see the module docstring."""

    kind = KIND

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self.name = name
        self.args: dict[str, Any] = model_args(name, args)
        self._llm: Any = None
        self._tokenizer: Any = None
        self._resolved: dict[str, Any] = {}

    # -- lifecycle -----------------------------------------------------------------------------
    def engine_args(self) -> Any:
        """``AsyncEngineArgs`` from the configured arguments (metrics logging on by default)."""
        from vllm.engine.arg_utils import AsyncEngineArgs

        kwargs = {"disable_log_stats": False, **self.args}
        try:
            return AsyncEngineArgs(**kwargs)
        except (TypeError, ValueError) as err:
            raise _arg_error(self.name, err, self.args) from err

    def start(self) -> None:
        if self._llm is not None:
            return
        engine_args = self.engine_args()
        if device_name() == "cpu":  # floors: this CPU's measured peak, once per machine (roofline/probe.py)
            try:
                from ..roofline.probe import cpu_hardware

                cpu_hardware(run=True)
            except Exception:
                pass

        async def _make() -> Any:
            from vllm.usage.usage_lib import UsageContext
            from vllm.v1.engine.async_llm import AsyncLLM

            with _uniproc_env(self.args):
                config = engine_args.create_engine_config(UsageContext.ENGINE_CONTEXT)
            with _launcher(self.args):
                return AsyncLLM.from_vllm_config(config, enable_log_requests=engine_args.enable_log_requests,
                                                 disable_log_stats=engine_args.disable_log_stats)

        try:
            self._llm = run_sync(_make())
        except EngineError:
            raise
        except Exception as err:  # config validation (pydantic), engine-core startup failure, ...
            if isinstance(err, TypeError | ValueError) and any(k in str(err) for k in self.args):
                raise _arg_error(self.name, err, self.args) from err
            raise EngineError(f"[engines.{self.name}] vLLM failed to start: {type(err).__name__}: {err}") from err
        self._resolved = self._resolve()

    def stop(self) -> None:
        llm, self._llm = self._llm, None
        if llm is None:
            return

        async def _shutdown(engine: Any) -> None:
            engine.shutdown()

        try:
            run_sync(_shutdown(llm), timeout=120)
        finally:
            del llm
            gc.collect()
            _empty_device_cache()

    # -- requests ------------------------------------------------------------------------------
    def _prompt(self, request: Request) -> Any:
        from vllm.inputs import TextPrompt, TokensPrompt

        if request.api == "chat":
            text = request.prompt if isinstance(request.prompt, str) else self.tokenizer().decode(list(request.prompt))
            ids = self.tokenizer().apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, Mapping):  # transformers may return a BatchEncoding
                ids = ids["input_ids"]
            return TokensPrompt(prompt_token_ids=list(ids))
        if isinstance(request.prompt, str):
            return TextPrompt(prompt=request.prompt)
        return TokensPrompt(prompt_token_ids=list(request.prompt))

    def _sampling(self, request: Request) -> Any:
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        return SamplingParams(
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            ignore_eos=request.ignore_eos,
            output_kind=RequestOutputKind.DELTA,
            **dict(request.extra),
        )

    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        """Stream ``request`` through AsyncLLM; fill ``record`` (never raises)."""
        record.token_count_source = "server"
        record.tag = record.tag or request.tag
        record.expected_prompt_tokens = request.prompt_tokens
        llm = self._llm
        if llm is None:
            record.error = "engine not started"
            return
        try:
            prompt, params = self._prompt(request), self._sampling(request)
        except Exception as err:
            record.error = f"bad request: {type(err).__name__}: {err}"[:300]
            return
        record.sent_ns = clock()
        n_out = 0
        finish: str | None = None
        try:
            async for out in llm.generate(prompt, params, f"perfgate-{self.name}-{next(_ids)}"):
                t = clock()  # arrival time first, before looking at the content
                if record.prompt_tokens is None and out.prompt_token_ids is not None:
                    record.prompt_tokens = len(out.prompt_token_ids)
                new = sum(len(c.token_ids) for c in out.outputs)
                if new:
                    record.chunk_ns.append(t)
                    record.chunk_tokens.append(new)
                    n_out += new
                for c in out.outputs:
                    finish = c.finish_reason or finish
                if out.finished:
                    record.end_ns = t
        except Exception as err:
            record.error = f"{type(err).__name__}: {err}"[:300] or type(err).__name__
        record.output_tokens = n_out
        record.finish_reason = finish
        if record.end_ns is None:
            record.end_ns = clock()
            if record.error is None:
                record.error = "stream ended without a finished output"

    # -- observation ---------------------------------------------------------------------------
    async def counters(self) -> dict[str, float]:
        """vLLM's in-memory Prometheus metrics as a flat dict (see :func:`flatten_metrics`)."""
        if self._llm is None:
            return {}
        from vllm.v1.metrics.reader import get_metrics_snapshot

        served = self._resolved.get("served_model_name")
        return flatten_metrics(get_metrics_snapshot(), served)

    def info(self) -> dict[str, Any]:
        import vllm

        return {
            "name": self.name,
            "kind": KIND,
            "vllm_version": vllm.__version__,
            "model": self.args.get("model"),
            "args": redact_args(dict(self.args)),
            "resolved": dict(self._resolved),
            "device": device_name(),
        }

    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            src = self.args.get("tokenizer") or self.args["model"]
            self._tokenizer = AutoTokenizer.from_pretrained(
                src, trust_remote_code=bool(self.args.get("trust_remote_code"))
            )
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer().encode(text, add_special_tokens=False))

    def _resolve(self) -> dict[str, Any]:
        """A few settings vLLM resolved from the arguments (for the report)."""
        cfg = getattr(self._llm, "vllm_config", None)
        if cfg is None:
            return {}
        mc, cc, sc = cfg.model_config, cfg.cache_config, cfg.speculative_config
        out: dict[str, Any] = {
            "served_model_name": getattr(mc, "served_model_name", None),
            "max_model_len": getattr(mc, "max_model_len", None),
            "dtype": str(getattr(mc, "dtype", "")),
            "block_size": getattr(cc, "block_size", None),
            "enable_prefix_caching": getattr(cc, "enable_prefix_caching", None),
            "num_gpu_blocks": getattr(cc, "num_gpu_blocks", None),
            "tensor_parallel_size": getattr(cfg.parallel_config, "tensor_parallel_size", None),
        }
        if sc is not None:
            out["speculative"] = {
                "method": getattr(sc, "method", None),
                "num_speculative_tokens": getattr(sc, "num_speculative_tokens", None),
                "draft_model": getattr(getattr(sc, "draft_model_config", None), "model", None),
            }
        return out


def flatten_metrics(metrics: list[Any], served_model_name: str | None = None) -> dict[str, float]:
    """Flatten ``vllm.v1.metrics.reader`` objects into ``{prometheus_name: value}``.

    Names drop the ``_total`` suffix; the per-position vector becomes
    ``vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}``; histograms give ``_sum`` and
    ``_count``. Series of other models are skipped; the ``engine`` (data-parallel rank) label is
    summed over for counters and averaged for gauges.
    """
    from vllm.v1.metrics.reader import Counter, Gauge, Histogram, Vector

    sums: dict[str, float] = {}
    gauges: dict[str, list[float]] = {}
    for m in metrics:
        labels = dict(m.labels)
        if served_model_name and labels.get("model_name") not in (None, served_model_name):
            continue
        extra = {k: v for k, v in labels.items() if k not in ("model_name", "engine")}
        base = m.name.removesuffix("_total")
        if isinstance(m, Vector):
            for i, v in enumerate(m.values):
                key = _series(base, {**extra, "position": str(i)})
                sums[key] = sums.get(key, 0.0) + float(v)
        elif isinstance(m, Counter):
            key = _series(base, extra)
            sums[key] = sums.get(key, 0.0) + float(m.value)
        elif isinstance(m, Gauge):
            gauges.setdefault(_series(base, extra), []).append(float(m.value))
        elif isinstance(m, Histogram):
            for suffix, hv in (("_sum", float(m.sum)), ("_count", float(m.count))):
                key = _series(base + suffix, extra)
                sums[key] = sums.get(key, 0.0) + hv
    for key, vals in gauges.items():
        sums[key] = sum(vals) / len(vals)
    return sums


def _series(name: str, labels: Mapping[str, str]) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _empty_device_cache() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass
