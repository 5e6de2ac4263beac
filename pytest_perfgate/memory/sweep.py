"""Allocator-setting sweep: the same workload in child processes, one per setting and repeat.

The setting is environment (``PYTORCH_CUDA_ALLOC_CONF``, glibc tunables) given to a fresh process,
so it is in place before CUDA initialises. Repeats are interleaved (repeat 0 of every setting,
then repeat 1, ...) so drift of the machine spreads over all settings, and repeat ``r`` of every
setting runs the churn with seed ``base seed + r`` (the same requests under every setting).
The best setting is the one with the largest Hodges-Lehmann gain in max safe batch over the
reference, reported with a Bonferroni-split exact lower bound (see :mod:`.compare`).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .child import ALLOCATOR_ENV, MARK
from .compare import RatioBound, ratio_bound

ROADMAP_SETTING = "max_split_size_mb:128,garbage_collection_threshold:0.8"


@dataclass(frozen=True)
class Setting:
    name: str
    env: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.env.items()) or "(allocator defaults)"


CUDA_SETTINGS: tuple[Setting, ...] = (
    Setting("default", {}),
    Setting("roadmap", {"PYTORCH_CUDA_ALLOC_CONF": ROADMAP_SETTING}),
    Setting("expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
)


class SweepError(RuntimeError):
    """A child process failed in a way that is not an out-of-memory result."""


@dataclass(frozen=True, kw_only=True)
class ChildRun:
    setting: str
    repeat: int
    result: Mapping[str, Any]
    seconds: float

    @property
    def max_safe_batch(self) -> int:
        return int(self.result["max_safe_batch"])

    def fragmentation(self, definition: str) -> float | None:
        v = self.result["memory"]["fragmentation"][definition]["max"]
        return None if v is None else float(v)

    @property
    def peak_reserved(self) -> int:
        return int(self.result["memory"]["peak_reserved_bytes"])


def child_env(setting: Setting, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: allocator variables of the parent removed, the setting's added,
    and this package importable."""
    env = {k: v for k, v in (base if base is not None else os.environ).items() if k not in ALLOCATOR_ENV}
    env.update(setting.env)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_child(spec: Mapping[str, Any], setting: Setting, timeout: float = 600.0,
              python: str = sys.executable) -> dict[str, Any]:
    """Run one child; its result dict, or :class:`SweepError` naming the setting and the cause."""
    cmd = [python, "-m", "pytest_perfgate.memory.child", json.dumps(dict(spec))]
    try:
        cp = subprocess.run(cmd, env=child_env(setting), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SweepError(f"setting {setting.name}: the child ran past {timeout:.0f} s") from None
    for line in reversed(cp.stdout.splitlines()):
        if line.startswith(MARK):
            out: dict[str, Any] = json.loads(line[len(MARK):])
            return out
    tail = " | ".join((cp.stderr or cp.stdout).strip().splitlines()[-3:])
    raise SweepError(f"setting {setting.name} ({setting.describe()}): child exited {cp.returncode} "
                     f"without a result: {tail}")


@dataclass(frozen=True)
class Best:
    setting: str
    reference: str
    bound: RatioBound
    candidates: int

    def statement(self) -> str:
        b = self.bound
        pct = f"{b.confidence:.0%}"
        if not b.bounded:
            return (f"best setting {self.setting}: max safe batch x{b.estimate:.2f} vs {self.reference} "
                    f"(Hodges-Lehmann); too few repeats for a {pct} bound ({b.n} and {b.m} runs, "
                    f"{self.candidates} candidate settings)")
        return (f"best setting {self.setting}: max safe batch x{b.estimate:.2f} vs {self.reference} "
                f"(Hodges-Lehmann), {pct} lower bound x{b.lower:.2f} (exact Mann-Whitney, {b.n} vs {b.m} runs, "
                f"Bonferroni over {self.candidates} candidate settings)")


@dataclass(frozen=True)
class SweepResult:
    settings: tuple[Setting, ...]
    runs: tuple[ChildRun, ...]
    definition: str = "inactive_split"

    def of(self, setting: str) -> list[ChildRun]:
        return [r for r in self.runs if r.setting == setting]

    def batches(self, setting: str) -> list[int]:
        return [r.max_safe_batch for r in self.of(setting)]

    def best(self, confidence: float = 0.95, reference: str = "default") -> Best:
        if not self.of(reference):
            raise ValueError(f"sweep: no runs of the reference setting {reference!r}")
        ref = self.batches(reference)
        if min(ref) < 1:
            raise ValueError(f"sweep: setting {reference} fits no batch at all (max safe batch 0)")
        cands = [s.name for s in self.settings if s.name != reference and self.of(s.name)]
        if not cands:
            raise ValueError("sweep: no setting besides the reference was run")
        bounds = {}
        for c in cands:
            xs = [max(b, 0.5) for b in self.batches(c)]  # a 0 batch counts as half of the smallest
            bounds[c] = ratio_bound(xs, ref, confidence, candidates=len(cands))
        name = max(cands, key=lambda c: (bounds[c].estimate, bounds[c].lower))
        return Best(name, reference, bounds[name], len(cands))

    def table(self) -> list[str]:
        """Markdown: per setting, median and range over repeats."""
        d = self.definition
        lines = [
            f"| setting | PYTORCH_CUDA_ALLOC_CONF / env | runs | fragmentation ({d}), max over the churn | "
            "1 - allocated/reserved | peak reserved | max safe batch (each run) | churn OOMs |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s in self.settings:
            rs = self.of(s.name)
            if not rs:
                continue
            lines.append(
                f"| {s.name} | {s.describe()} | {len(rs)} | {_spread([r.fragmentation(d) for r in rs], pct=True)} | "
                f"{_spread([r.fragmentation('reserved') for r in rs], pct=True)} | "
                f"{_spread([r.peak_reserved / 2**30 for r in rs])} GiB | "
                f"{', '.join(str(r.max_safe_batch) for r in rs)} | {sum(int(r.result['churn_ooms']) for r in rs)} |"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"definition": self.definition,
                "settings": [{"name": s.name, "env": dict(s.env)} for s in self.settings],
                "runs": [{"setting": r.setting, "repeat": r.repeat, "seconds": r.seconds, "result": dict(r.result)}
                         for r in self.runs]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepResult:
        return cls(tuple(Setting(s["name"], dict(s["env"])) for s in d["settings"]),
                   tuple(ChildRun(setting=r["setting"], repeat=int(r["repeat"]), result=r["result"],
                                  seconds=float(r["seconds"])) for r in d["runs"]),
                   str(d.get("definition", "inactive_split")))


def _spread(vals: Sequence[float | None], pct: bool = False) -> str:
    xs = sorted(v for v in vals if v is not None and math.isfinite(v))
    if not xs:
        return "n/a"

    def f(v: float) -> str:
        return f"{v * 100:.0f}%" if pct else f"{v:.2f}"

    med = xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
    return f(med) if xs[0] == xs[-1] else f"{f(med)} ({f(xs[0])}-{f(xs[-1])})"


def sweep(spec: Mapping[str, Any], settings: Sequence[Setting], repeats: int = 3, *, timeout: float = 600.0,
          definition: str = "inactive_split", progress: Callable[[str], None] | None = None,
          parallel: int = 1) -> SweepResult:
    """Run ``spec`` (see :mod:`.child`) under every setting, ``repeats`` times, interleaved.

    ``parallel`` > 1 runs that many children at once, one round of settings at a time (each child has
    its own allocator and its own budget: ``cuda_fraction`` of the device, or ``RLIMIT_AS``; run them
    side by side only where the device holds all their budgets)."""
    if repeats < 1 or parallel < 1:
        raise ValueError(f"sweep: repeats = {repeats} and parallel = {parallel} must be >= 1")
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep: setting names repeat: {names}")
    seed0 = int(dict(spec.get("pattern", {})).get("seed", 0))
    jobs = [(r, s) for r in range(repeats) for s in settings]

    def one(job: tuple[int, Setting]) -> ChildRun:
        r, s = job
        child_spec = dict(spec)
        child_spec["pattern"] = {**dict(spec.get("pattern", {})), "seed": seed0 + r}
        t0 = time.perf_counter()
        res = run_child(child_spec, s, timeout=timeout)
        if progress is not None:
            progress(f"sweep {s.name} run {r + 1}/{repeats}: max safe batch {res['max_safe_batch']}")
        return ChildRun(setting=s.name, repeat=r, result=res, seconds=time.perf_counter() - t0)

    if parallel == 1:
        runs = [one(j) for j in jobs]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=parallel) as pool:
            runs = list(pool.map(one, jobs))  # results in job order: interleaved like the serial sweep
    return SweepResult(tuple(settings), tuple(runs), definition)
