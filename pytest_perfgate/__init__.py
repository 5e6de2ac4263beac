"""pytest-perfgate: LLM-inference performance targets as statistically sound pytest gates.

The plain-Python API (no pytest needed)::

    from pytest_perfgate import load_thresholds, evaluate, make_samples
    th = load_thresholds("thresholds.toml")
    verdict = evaluate(th.gate("long_context_ttft"), make_samples([120.5, 131.0], "ms"), thresholds=th)

A gate suite imports what it uses from here too (``perf_tests/test_phase1.py`` is the example)::

    from pytest_perfgate import Engines, LoadConfig, Perfgate, prompts

and each feature package has a public face here: ``vision`` (phase 2), ``memory``, ``distributed``
(phase 3), e.g. ``from pytest_perfgate import distributed; distributed.Phase3Params.parse(...)``, as do
the phase-1 batch re-tune (``retune``) and the fallback plans' variant engines (``plans``).

Names are imported lazily so that loading the pytest plugin stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .runtime.lazy import lazy_face

__version__ = "0.1.0"

__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "config": ("load_thresholds", "ConfigError", "Thresholds", "Gate"),
    "config.units": ("parse_quantity",),
    "verdicts.verdict": ("evaluate", "Verdict"),
    "verdicts.failures": ("GateFailure",),
    "verdicts.samples": ("make_samples", "Samples", "Proportion", "make_proportion", "SampleError", "pool"),
    "verdicts.sequential": ("sample_until_decided",),
    "store.decisions": ("decision",),
    # writing a gate suite (the pytest fixtures' types, load, prompts, typed workload parameters)
    "session.perfgate": ("Perfgate",),
    "session.lab": ("Engines",),
    "session.runs": ("Runs",),
    "load.result": ("RunResult",),
    "load.schedule": ("LoadConfig",),
    # another tool's benchmark results as runs: load_results(path, format=None) (vllm bench, AIPerf, guidellm, ...)
    "imports": ("load_results", "load_runs"),
    "contract": ("Request", "Engine", "EngineError"),
    "config.params": ("workload",),
    # modules: traces.load(path, tokenizer=None, format=None); prompts.exact_length_prompts(...), prompts.math_prompts(...)
    "load": ("traces", "prompts", "retune"),
    # the phase-1 re-tune (retune.choose, retune.engine_sweep, ...) and the fallback plans' variant
    # engines (plans.tiered_kv, plans.context_parallel, plans.model_shape, ...)
    "preflight": ("plans",),
    # the feature packages' public faces (modules whose names load lazily): phase 2 vision.Phase2,
    # vision.setup(...), vision.run_path(...); memory.MemoryParams, memory.sweep(...), memory.churn(...);
    # phase 3 distributed.Phase3Params, distributed.measure(...)
    "": ("vision", "memory", "distributed"),
})

if TYPE_CHECKING:  # "X as X": re-exported for type checkers (mypy strict reads no dynamic __all__)  # pragma: no cover
    from . import distributed as distributed
    from . import memory as memory
    from . import vision as vision
    from .config import ConfigError as ConfigError
    from .config import Gate as Gate
    from .config import Thresholds as Thresholds
    from .config import load_thresholds as load_thresholds
    from .config.params import workload as workload
    from .config.units import parse_quantity as parse_quantity
    from .contract import Engine as Engine
    from .contract import EngineError as EngineError
    from .contract import Request as Request
    from .imports import load_results as load_results
    from .imports import load_runs as load_runs
    from .load import prompts as prompts
    from .load import retune as retune
    from .load import traces as traces
    from .load.result import RunResult as RunResult
    from .load.schedule import LoadConfig as LoadConfig
    from .preflight import plans as plans
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
