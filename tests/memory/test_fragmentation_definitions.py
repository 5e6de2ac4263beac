"""Both fragmentation definitions side by side on the H200 fixtures (issue 26 item 11): the gate's
(inactive split share) and 1 - allocated/reserved, with which one is gated and why, and what
expandable_segments does to the gated one."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_perfgate.memory.stats import MemoryReport, MemorySample, definitions_note

FIX = Path(__file__).parents[1] / "fixtures" / "gpu"


def _report(name: str) -> MemoryReport:
    stats = json.loads((FIX / name).read_text())
    return MemoryReport((MemorySample.from_stats(stats, source=name),))


def test_the_note_shows_both_definitions_and_why_one_is_gated() -> None:
    r = _report("memory_stats_default_mid.json")
    frag = r.to_dict()["fragmentation"]
    split, reserved = frag["inactive_split"]["max"], frag["reserved"]["max"]
    assert split is not None and reserved is not None and reserved > split  # the default reads lower
    line = definitions_note(frag, "inactive_split")
    assert f"inactive_split (inactive_split_bytes / reserved_bytes) {100 * split:.1f}% [gated]" in line
    assert f"reserved (1 - allocated_bytes / reserved_bytes) {100 * reserved:.1f}%" in line
    assert "external (" in line and "not measured" in line  # no snapshot in a memory_stats fixture
    assert "The gate reads inactive_split: it orders the measured max safe batch" in line


def test_expandable_segments_is_said_to_read_zero_split_share() -> None:
    r = _report("memory_stats_expandable_mid.json")
    frag = r.to_dict()["fragmentation"]
    line = definitions_note(frag, "inactive_split", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    assert "Under expandable_segments inactive_split reads 0% whatever the workload" in line
    print(line)
