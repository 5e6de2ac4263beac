"""GPU preflight: every configured vLLM engine of thresholds.toml, and the fallback plans'
variant engines, built with vLLM's own config classes on this machine (no GPU needed) before a GPU
hour is spent, in a child process (``child.py``). Each refusal is one line naming the engine and the key
(docs/engines.md#preflight).

Levels: ``refused`` (vLLM raised building the config: the engine cannot start anywhere),
``warn`` (the config builds but vLLM's code refuses it at start, or the machine of ``[hardware]``
has too few GPUs for it), ``gpu`` (only the GPU itself can tell; said, not guessed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Thresholds
from ..engines.registry import VLLM_KINDS as VLLM_KINDS  # the vLLM engine kinds (EngineKind.vllm)
from .build import CRASHED, GPU, NOTE, REFUSED, STEP_BACKENDS, STEP_BUILD, WARN, Finding
from .models import Resolved, resolve
from .plans import Variant, variants

GPU_ONLY = ("memory profiling and the KV-cache size at gpu_memory_utilization", "attention backend selection",
            "CUDA-graph capture", "NCCL initialisation across the tensor-parallel ranks")


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    built: list[str] = field(default_factory=list)  # "<engine>: <model source>" of every config built
    skipped: list[str] = field(default_factory=list)  # engines not built, with why
    seconds: float = 0.0

    @property
    def refused(self) -> list[Finding]:
        return [f for f in self.findings if f.level == REFUSED]

    @property
    def crashed(self) -> list[Finding]:
        return [f for f in self.findings if f.level == CRASHED]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == WARN]

    def failed(self, strict: bool) -> bool:
        return bool(self.refused or self.crashed or (strict and self.warnings))

    def lines(self) -> list[str]:
        order = {CRASHED: 0, REFUSED: 0, WARN: 1, GPU: 2, NOTE: 3}
        out = [f"preflight: {f.line()}" for f in sorted(self.findings, key=lambda f: order[f.level])]
        out += [f"preflight: not built: {s}" for s in self.skipped]
        if self.built:
            out.append(f"preflight: {len(self.built)} vLLM config(s) built in {self.seconds:.1f} s "
                       f"({len(self.refused)} refused, {len(self.warnings)} will not start"
                       + (f", {len(self.crashed)} crashed the preflight" if self.crashed else "")
                       + "); the GPU alone "
                       f"checks {', '.join(GPU_ONLY)}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.__dict__ for f in self.findings], "built": self.built, "skipped": self.skipped,
                "seconds": round(self.seconds, 2)}


def _phase1(th: Thresholds, embedded: bool) -> dict[str, Any]:
    raw = dict(th.params.get("phase1", {}))
    over = raw.pop("embedded", {})
    return {**raw, **over} if embedded else raw


class _Builder:
    """Builds configs in THIS process (vLLM imported here): the child's side of :func:`run`. Every
    result is an event (``emit``) so that a parent learns it even if the process dies on the next
    step; units in ``skip`` (already reported by an earlier child) are resolved for their shape only."""

    def __init__(self, th: Thresholds, tmp: Path, embedded: Callable[[], Any] | None,
                 emit: Callable[[dict[str, Any]], None], skip: frozenset[str] = frozenset()) -> None:
        self.th, self.tmp, self.embedded, self.emit, self.skip = th, tmp, embedded, emit, skip
        self.gpus = int(th.hardware.get("count", 0) or 0) if th.hardware else 0

    def _local(self, engine: str, args: dict[str, Any], parents: tuple[str, ...]) -> tuple[dict[str, Any], list[Resolved]] | None:
        """``args`` with the target and draft models replaced by local directories."""
        out, found = dict(args), []
        mml = int(args.get("max_model_len", 0) or 0)
        r = resolve(str(args.get("model", "")), self.th.models, (engine, *parents), self.tmp / engine, self.embedded, mml)
        if isinstance(r, str):
            self._skipped(engine, f"[engines.{engine}] model: {r}")
            return None
        out["model"] = str(r.path)
        found.append(r)
        sc = args.get("speculative_config")
        if isinstance(sc, Mapping) and isinstance(sc.get("model"), str):
            d = resolve(str(sc["model"]), self.th.models, (), self.tmp / f"{engine}-draft", self.embedded, mml)
            if isinstance(d, str):
                self._skipped(engine, f"[engines.{engine}] speculative_config.model: {d}")
                return None
            out["speculative_config"] = {**sc, "model": str(d.path)}
            found.append(d)
        return out, found

    def _skipped(self, unit: str, text: str) -> None:
        if unit not in self.skip:
            self.emit({"ev": "skipped", "unit": unit, "text": text})

    def _findings(self, findings: list[Finding]) -> None:
        for f in findings:
            self.emit({"ev": "finding", "f": dataclasses.asdict(f)})

    def engine(self, engine: str, args: Mapping[str, Any], parents: tuple[str, ...] = (), gpus: int = 0) -> Any:
        """Build one engine; its findings are emitted. The target config.json, or None."""
        from .build import after_build, create

        local = self._local(engine, dict(args), parents)
        if local is None:
            return None
        largs, found = local
        if engine in self.skip:
            return found[0].config
        self.emit({"ev": "step", "unit": engine, "step": STEP_BUILD})
        config, findings = create(engine, largs)
        self._findings(findings)
        self.emit({"ev": "built", "unit": engine, "text": f"{engine}: " + "; draft ".join(r.source for r in found)})
        if config is not None:
            world = config.parallel_config.world_size * config.parallel_config.data_parallel_size
            need = max(world, gpus)
            if self.gpus and need > self.gpus:
                self._findings([Finding(engine, "tensor_parallel_size", WARN,
                                        f"needs {need} GPUs; [hardware] count = {self.gpus}")])
            self.emit({"ev": "step", "unit": engine, "step": STEP_BACKENDS})
            self._findings(after_build(engine, config))
        self.emit({"ev": "done", "unit": engine})
        return found[0].config

    def variant(self, base: str, args: Mapping[str, Any], v: Variant, parents: tuple[str, ...]) -> None:
        name = f"{v.name} (plan {v.plan})"
        if v.unavailable:
            if name not in self.skip:
                self._findings([Finding(name, next(iter(v.args), ""), WARN, v.unavailable)])
                self.emit({"ev": "done", "unit": name})
            return
        if name not in self.skip:  # before the build: a build that takes the child down keeps them
            self._findings([Finding(name, next(iter(v.args), ""), NOTE, n) for n in v.notes])
        self.engine(name, {**args, **v.args}, (base, *parents), v.gpus)


def build_here(th: Thresholds, aliases: Mapping[str, str], embedded: Callable[[], Any] | None,
               only: set[str] | None, emit: Callable[[dict[str, Any]], None],
               skip: frozenset[str] = frozenset()) -> None:
    """Build every selected engine and its fallback variants IN THIS PROCESS, emitting events (the
    child's side of :func:`run`; vLLM is imported here, and a fault in it takes this process down)."""
    from .build import quiet_vllm
    from .child import WORK_ENV

    given = os.environ.get(WORK_ENV)  # the supervisor's (it removes it, however this process ends)
    with (contextlib.nullcontext(given) if given else tempfile.TemporaryDirectory(prefix="perfgate-preflight-")) as tmp, \
            quiet_vllm():
        b = _Builder(th, Path(tmp), embedded, emit, skip)
        for name, spec in th.engines.items():
            if only is not None and name not in only:
                continue
            if spec.kind not in VLLM_KINDS:
                b._skipped(name, f"[engines.{name}]: kind {spec.kind!r} is not a vLLM kind (nothing to build)")
                continue
            parents = _parents(th, name)
            shape = b.engine(name, spec.args, parents)
            plays = aliases.get("speculative") == name or (not aliases.get("speculative")
                                                          and "speculative_config" in spec.args)
            if plays and shape is not None:
                emb = str(spec.args.get("model", "")).startswith("embedded:")
                for v in variants(name, spec.args, _phase1(th, emb), shape, list(th.fallbacks)):
                    b.variant(name, spec.args, v, parents)


def run(th: Thresholds, aliases: Mapping[str, str] | None = None,
        embedded: Callable[[], Any] | None = None, only: set[str] | None = None,
        progress: Callable[[str], None] | None = None) -> Report:
    """Build every ``[engines.*]`` of a vLLM kind (or those in ``only``) and the fallback variants of
    the engine that plays ``speculative`` (``aliases``), else of every configured engine with a
    ``speculative_config``.

    vLLM never runs in this process: the builds run in a child process (``child.py``) with a deadline
    a step; a child that dies (a signal such as SIGABRT from vLLM's C++ code, an exit, no progress
    within the deadline) is one ``crashed`` finding naming the engine, the step and the cause, and a
    fresh child goes on with the engines not built yet. ``embedded`` given: the child uses the cached
    embedded models (``perfgate models make``), never generating them."""
    from .child import supervise

    t0 = time.perf_counter()
    report = Report()
    supervise(th, dict(aliases or {}), embedded is not None, only, report, progress)
    report.seconds = time.perf_counter() - t0
    return report


def _parents(th: Thresholds, name: str) -> tuple[str, ...]:
    out: list[str] = []
    cur = th.engines[name].extends
    while cur and cur in th.engines and cur not in out:
        out.append(cur)
        cur = th.engines[cur].extends
    return tuple(out)


def header(th: Thresholds, default: str | None, aliases: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The pytest header's preflight: (lines, {gate: line} of the gates whose engine vLLM refuses or
    that will not start) for the configured vLLM engines this session selects (``--perfgate-engine``);
    nothing for the embedded default (its own tests build it). ``PERFGATE_PREFLIGHT=0`` skips it."""
    import os

    from ..engines.requirements import installed

    chosen = {n for n in (default, *aliases.values()) if n and n in th.engines and th.engines[n].kind in VLLM_KINDS}
    if not chosen or os.environ.get("PERFGATE_PREFLIGHT", "1") == "0" or not installed("vllm"):
        return [], {}
    report = run(th, aliases, only=chosen)  # in a child process: vLLM stays out of the test session
    role_of = {**({r: default for r in ("baseline", "speculative")} if default else {}), **aliases}
    bad_engines = {f.engine.split(" ")[0]: f.line() for f in report.findings if f.level in (REFUSED, CRASHED, WARN)}
    bad: dict[str, str] = {}
    for g in th.gates.values():
        for role in (g.engine, *(g.runs or ())):
            name = role_of.get(role or "", "")
            line = bad_engines.get(name)
            if line:
                bad.setdefault(g.name, f"gate {g.name}: engine {name}: {line}")
    return report.lines(), bad


__all__ = ["CRASHED", "GPU", "NOTE", "REFUSED", "WARN", "Finding", "Report", "build_here", "header", "run"]
