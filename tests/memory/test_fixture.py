"""The perfgate_memory fixture through pytest: a probe on a real allocator gated under the gate's
definition, the CPU sweep's batch ratio recorded in decisions.json, the CUDA probe's skip reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# imported at collection, before pytester's snapshot of sys.modules: pytester drops the modules an
# in-process run imports, and torch's C extension can't be imported twice in one process
try:
    import torch
except ImportError:  # pragma: no cover - torch is in the test environment
    torch = None

THRESHOLDS = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "memory.toml").read_text()

TESTS = """
import numpy as np
import pytest
from pytest_perfgate.memory.probe import MallocSource
from pytest_perfgate.memory.sweep import Setting, sweep

@pytest.mark.gate("frag")
def test_frag(perfgate, perfgate_memory):
    with perfgate_memory.probe(MallocSource(), interval_s=None) as p:
        keep = [np.ones(1 << 20, dtype=np.uint8) for _ in range(4)]
        p.sample()
        del keep
    v = perfgate_memory.check(perfgate, p.report)
    assert v.outcome == "pass", v.summary()

@pytest.mark.gate("batch")
def test_batch(perfgate, perfgate_memory):
    spec = {"backend": "cpu", "address_space_bytes": 64 << 20,
            "pattern": dict(layers=2, hidden=128, kv_width=32, intermediate=512, bytes_per_elem=4,
                            min_len=16, max_len=256, steps=10, probe_len=256, max_probe_batch=512)}
    res = sweep(spec, (Setting("default"), Setting("arena1", {"MALLOC_ARENA_MAX": "1"})), repeats=3)
    perfgate_memory.check(perfgate, res)

def test_cuda_probe(perfgate_memory):
    perfgate_memory.probe()
"""


def test_fixture_gates_and_records(pytester: pytest.Pytester) -> None:
    torch_cuda = torch is not None and torch.cuda.is_available()
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_mem=TESTS)
    r = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    if not torch_cuda:
        r.stdout.fnmatch_lines(["*SKIPPED*no CUDA device*torch.cuda.is_available() is False*"])
    # an allocator knob can't double the batch under the same address-space limit: the gate fails
    r.stdout.fnmatch_lines(["FAILED batch: ratio of value p50 * < min 2*"])
    r.assert_outcomes(passed=1, failed=1, skipped=0 if torch_cuda else 1)
    doc = json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())
    verdicts = {v["gate"]: v for v in doc["phases"]["memory"]["verdicts"]}
    assert verdicts["frag"]["outcome"] == "pass" and verdicts["frag"]["unit"] == "%"
    assert verdicts["batch"]["outcome"] == "fail"
    assert verdicts["batch"]["method"] == "hodges-lehmann ratio, exact mann-whitney bound"
    assert "arena1" in verdicts["batch"]["note"] or "default" in verdicts["batch"]["note"]
