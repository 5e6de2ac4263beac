"""Phase 3: all-reduce benchmarks on ``torch.distributed`` and the cross-node gate (docs/distributed.md).

Modules (none imports torch or pytest at import time):
``sizes`` message sizes (decode step from a model config; nccl-tests sweep) · ``bench`` the timed
all-reduce loop (NCCL / gloo) · ``worker`` one rank as a process · ``launch`` N local ranks ·
``netns`` two hosts from network namespaces + veth (+ tc shaping) · ``ranks`` torchrun / srun
environment · ``pertoken`` per-token model and the exact P99-difference bound · ``tuning`` the
communication-settings sweep · ``phase3`` what perf_tests/test_phase3.py runs.
"""
