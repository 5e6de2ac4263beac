"""pytest-perfgate: LLM-inference performance targets as statistically sound pytest gates.

The plain-Python API (no pytest needed)::

    from pytest_perfgate import load_thresholds, evaluate, make_samples
    th = load_thresholds("thresholds.toml")
    verdict = evaluate(th.gate("long_context_ttft"), make_samples([120.5, 131.0], "ms"), thresholds=th)

A gate suite imports what it uses from here too (``perf_tests/test_phase1.py`` is the example)::

    from pytest_perfgate import Engines, LoadConfig, Perfgate, prompts

and each feature package has a public face here: ``vision`` (phase 2), ``memory``, ``distributed``
(phase 3), e.g. ``from pytest_perfgate import distributed; distributed.Phase3Params.parse(...)``.

Names are imported lazily so that loading the pytest plugin stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "load_thresholds": ("config", "load_thresholds"),
    "ConfigError": ("config", "ConfigError"),
    "Thresholds": ("config", "Thresholds"),
    "Gate": ("config", "Gate"),
    "evaluate": ("verdicts.verdict", "evaluate"),
    "Verdict": ("verdicts.verdict", "Verdict"),
    "GateFailure": ("verdicts.failures", "GateFailure"),
    "make_samples": ("verdicts.samples", "make_samples"),
    "Samples": ("verdicts.samples", "Samples"),
    "Proportion": ("verdicts.samples", "Proportion"),
    "make_proportion": ("verdicts.samples", "make_proportion"),
    "SampleError": ("verdicts.samples", "SampleError"),
    "sample_until_decided": ("verdicts.sequential", "sample_until_decided"),
    "decision": ("store.decisions", "decision"),
    # writing a gate suite (the pytest fixtures' types, load, prompts, typed workload parameters)
    "Perfgate": ("session.perfgate", "Perfgate"),
    "Engines": ("session.lab", "Engines"),
    "Runs": ("session.runs", "Runs"),
    "RunResult": ("load.result", "RunResult"),
    "LoadConfig": ("load.schedule", "LoadConfig"),
    "Request": ("contract", "Request"),
    "Engine": ("contract", "Engine"),
    "EngineError": ("contract", "EngineError"),
    "pool": ("verdicts.samples", "pool"),
    "workload": ("config.params", "workload"),
    "traces": ("load.traces", ""),  # the module: traces.load(path, tokenizer=None, format=None)
    "prompts": ("load.prompts", ""),  # the module: prompts.exact_length_prompts(...), prompts.math_prompts(...)
    # the feature packages' public faces (modules whose names load lazily)
    "vision": ("vision", ""),  # phase 2: vision.Phase2, vision.setup(...), vision.run_path(...), ...
    "memory": ("memory", ""),  # memory gates: memory.MemoryParams, memory.sweep(...), memory.churn(...), ...
    "distributed": ("distributed", ""),  # phase 3: distributed.Phase3Params, distributed.measure(...), ...
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # "X as X": re-exported for type checkers (mypy strict reads no dynamic __all__)  # pragma: no cover
    from . import distributed as distributed
    from . import memory as memory
    from . import vision as vision
    from .config import ConfigError as ConfigError
    from .config import Gate as Gate
    from .config import Thresholds as Thresholds
    from .config import load_thresholds as load_thresholds
    from .config.params import workload as workload
    from .contract import Engine as Engine
    from .contract import EngineError as EngineError
    from .contract import Request as Request
    from .load import prompts as prompts
    from .load import traces as traces
    from .load.result import RunResult as RunResult
    from .load.schedule import LoadConfig as LoadConfig
    from .session.lab import Engines as Engines
    from .session.perfgate import Perfgate as Perfgate
    from .session.runs import Runs as Runs
    from .store.decisions import decision as decision
    from .verdicts.failures import GateFailure as GateFailure
    from .verdicts.samples import Proportion as Proportion
    from .verdicts.samples import SampleError as SampleError
    from .verdicts.samples import Samples as Samples
    from .verdicts.samples import make_proportion as make_proportion
    from .verdicts.samples import make_samples as make_samples
    from .verdicts.samples import pool as pool
    from .verdicts.sequential import sample_until_decided as sample_until_decided
    from .verdicts.verdict import Verdict as Verdict
    from .verdicts.verdict import evaluate as evaluate


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        module = importlib.import_module(f".{mod}", __name__)
        return getattr(module, attr) if attr else module
    raise AttributeError(f"module 'pytest_perfgate' has no attribute {name!r}")
