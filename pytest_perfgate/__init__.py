"""pytest-perfgate: LLM-inference performance targets as statistically sound pytest gates.

The plain-Python API (no pytest needed)::

    from pytest_perfgate import load_thresholds, evaluate, make_samples
    th = load_thresholds("thresholds.toml")
    verdict = evaluate(th.gate("long_context_ttft"), make_samples([120.5, 131.0], "ms"), thresholds=th)

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
    "evaluate": ("verdict", "evaluate"),
    "Verdict": ("verdict", "Verdict"),
    "GateFailure": ("failures", "GateFailure"),
    "make_samples": ("samples", "make_samples"),
    "Samples": ("samples", "Samples"),
    "Proportion": ("samples", "Proportion"),
    "make_proportion": ("samples", "make_proportion"),
    "SampleError": ("samples", "SampleError"),
    "sample_until_decided": ("sequential", "sample_until_decided"),
    "decision": ("decisions", "decision"),
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover
    from .config import ConfigError, Gate, Thresholds, load_thresholds
    from .decisions import decision
    from .failures import GateFailure
    from .samples import Proportion, SampleError, Samples, make_proportion, make_samples
    from .sequential import sample_until_decided
    from .verdict import Verdict, evaluate


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{mod}", __name__), attr)
    raise AttributeError(f"module 'pytest_perfgate' has no attribute {name!r}")
