"""Phase 3: all-reduce benchmarks on ``torch.distributed`` and the cross-node gate (docs/distributed.md).

Modules (none imports torch or pytest at import time):
``sizes`` message sizes (decode step from a model config; nccl-tests sweep) · ``bench`` the timed
all-reduce loop (NCCL / gloo) · ``worker`` one rank as a process · ``launch`` N local ranks ·
``netns`` two hosts from network namespaces + veth (+ tc shaping) · ``ranks`` torchrun / srun
environment · ``pertoken`` per-token model (its P99 difference is the quantile Method's difference
comparison, evaluated by ``Perfgate.check``) · ``tuning`` the communication-settings sweep ·
``phase3`` what perf_tests/test_phase3.py runs.

The public face (``from pytest_perfgate import distributed``; names load lazily):
:class:`Phase3Params`, :class:`Results`, :func:`measure`, :func:`measure_netns`,
:func:`local_backend`, :func:`phase2_line`, :func:`size_label`, :func:`size_note`,
:class:`BenchSpec`, :class:`SizeResult`, :class:`RankEnv`, :func:`unavailable_reason`,
:func:`per_token_times`, :class:`PerToken`, :func:`run_sweep`, :class:`CommConfig`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_LAZY = {
    "Phase3Params": ("phase3", "Phase3Params"),
    "Results": ("phase3", "Results"),
    "measure": ("phase3", "measure"),
    "measure_netns": ("phase3", "measure_netns"),
    "local_backend": ("phase3", "local_backend"),
    "phase2_line": ("phase3", "phase2_line"),
    "size_label": ("phase3", "size_label"),
    "size_note": ("phase3", "size_note"),
    "BenchSpec": ("bench", "BenchSpec"),
    "SizeResult": ("bench", "SizeResult"),
    "RankEnv": ("ranks", "RankEnv"),
    "unavailable_reason": ("netns", "unavailable_reason"),
    "per_token_times": ("pertoken", "per_token_times"),
    "PerToken": ("pertoken", "PerToken"),
    "run_sweep": ("tuning", "run_sweep"),
    "CommConfig": ("tuning", "CommConfig"),
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover
    from .bench import BenchSpec as BenchSpec
    from .bench import SizeResult as SizeResult
    from .netns import unavailable_reason as unavailable_reason
    from .pertoken import PerToken as PerToken
    from .pertoken import per_token_times as per_token_times
    from .phase3 import Phase3Params as Phase3Params
    from .phase3 import Results as Results
    from .phase3 import local_backend as local_backend
    from .phase3 import measure as measure
    from .phase3 import measure_netns as measure_netns
    from .phase3 import phase2_line as phase2_line
    from .phase3 import size_label as size_label
    from .phase3 import size_note as size_note
    from .ranks import RankEnv as RankEnv
    from .tuning import CommConfig as CommConfig
    from .tuning import run_sweep as run_sweep


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{mod}", __name__), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
