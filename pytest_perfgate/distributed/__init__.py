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

from typing import TYPE_CHECKING

from ..runtime.lazy import lazy_face

__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "phase3": ("Phase3Params", "Results", "measure", "measure_netns", "local_backend", "phase2_line", "size_label",
               "size_note"),
    "bench": ("BenchSpec", "SizeResult"),
    "ranks": ("RankEnv",),
    "netns": ("unavailable_reason",),
    "pertoken": ("per_token_times", "PerToken"),
    "tuning": ("run_sweep", "CommConfig"),
})

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
