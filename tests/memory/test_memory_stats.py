"""The fragmentation formulas on real torch.cuda.memory_stats() / memory_snapshot() data recorded on
an H200 (tests/fixtures/gpu/, copied from the shared GPU fixtures; see their README there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import spearmanr

from pytest_perfgate.memory.stats import (
    DEFAULT_DEFINITION,
    DEFINITIONS,
    MemoryReport,
    MemorySample,
    MemoryStatsError,
    free_blocks,
)
from pytest_perfgate.verdicts.samples import SampleError

GPU = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"
SETTINGS = ("default", "seed_doc", "expandable")
# measured on the same H200 runs (shared/gpu-fixtures/README.md): max safe batch of 4,096-token
# prefills after the churn, per PYTORCH_CUDA_ALLOC_CONF setting
MAX_SAFE_BATCH = {"default": 27, "seed_doc": 31, "expandable": 32}


def stats(name: str) -> dict[str, Any]:
    d: dict[str, Any] = json.loads((GPU / f"memory_stats_{name}_mid.json").read_text())
    return d


def snapshot() -> dict[str, Any]:
    d: dict[str, Any] = json.loads((GPU / "memory_snapshot_default_churn.json").read_text())
    return d


def test_reserved_definition_is_one_minus_allocated_over_reserved() -> None:
    st = stats("default")
    s = MemorySample.from_stats(st)
    expect = 1 - st["allocated_bytes.all.current"] / st["reserved_bytes.all.current"]
    assert s.fragmentation("reserved") == pytest.approx(expect)
    assert s.fragmentation("reserved") == pytest.approx(0.5294, abs=1e-4)  # 3.98 GB of 8.47 GB in use


def test_inactive_split_definition_on_the_three_settings() -> None:
    got = {n: MemorySample.from_stats(stats(n)).fragmentation("inactive_split") for n in SETTINGS}
    assert got["default"] == pytest.approx(1777985536 / 8468299776)  # 21%
    assert got["seed_doc"] == pytest.approx(1100089344 / 13763608576)  # 8%: smaller splits, more reserve
    assert got["expandable"] == 0.0  # expandable segments never leave split blocks


def test_external_fragmentation_from_the_snapshot() -> None:
    sn = snapshot()
    fb = free_blocks(sn["segments"])
    # README: 2.51 GiB free in 24 blocks, largest free block 0.293 GiB
    assert fb.count == 24
    assert fb.total / 2**30 == pytest.approx(2.51, abs=0.005)
    assert fb.largest / 2**30 == pytest.approx(0.293, abs=0.001)
    s = MemorySample.from_stats(sn["memory_stats"], segments=sn["segments"])
    assert s.fragmentation("external") == pytest.approx(1 - fb.largest / fb.total)
    assert s.fragmentation("external") == pytest.approx(0.883, abs=0.001)


def test_snapshot_segments_add_up_to_the_stats() -> None:
    sn = snapshot()
    st = sn["memory_stats"]
    assert sum(x["total_size"] for x in sn["segments"]) == st["reserved_bytes.all.current"]
    assert sum(x["allocated_size"] for x in sn["segments"]) == st["allocated_bytes.all.current"]
    free = sum(b["size"] for x in sn["segments"] for b in x["blocks"] if b["state"] == "inactive")
    assert free == st["reserved_bytes.all.current"] - st["allocated_bytes.all.current"]


def test_external_is_none_without_a_snapshot_and_zero_when_nothing_is_free() -> None:
    s = MemorySample.from_stats(stats("default"))
    assert s.fragmentation("external") is None
    full = [{"blocks": [{"size": 100, "state": "active_allocated"}]}]
    assert free_blocks(full).external == 0.0


def test_default_definition_orders_the_measured_max_safe_batch() -> None:
    """Which definition predicts OOM best? On the real runs, the max safe batch (the batch that
    OOMs next) falls as inactive-split fragmentation rises, in exact rank order; 1 - allocated /
    reserved ranks the roadmap's setting (71%) as the worst although its batch beat the default's.
    External fragmentation has one snapshot (default setting) and can't be ranked across settings."""
    batch = [MAX_SAFE_BATCH[n] for n in SETTINGS]
    rho = {}
    for d in ("reserved", "inactive_split"):
        vals = [MemorySample.from_stats(stats(n)).fragmentation(d) for n in SETTINGS]
        rho[d] = spearmanr(vals, batch).statistic
    assert rho["inactive_split"] == pytest.approx(-1.0)
    assert rho["reserved"] == pytest.approx(-0.5)
    assert DEFAULT_DEFINITION == "inactive_split"


def test_trace_peak_reserved_fragmentation_matches_the_table() -> None:
    """frag_trace_*.json: the peak of 1 - allocated/reserved over the churn (issue table 58/71/51%)."""
    for name, want in (("default", 0.58), ("seed_doc", 0.71), ("expandable", 0.51)):
        trace = json.loads((GPU / f"frag_trace_{name}.json").read_text())
        samples = tuple(
            MemorySample.from_stats({"allocated_bytes.all.current": int(t["alloc_gib"] * 2**30),
                                     "reserved_bytes.all.current": int(t["reserved_gib"] * 2**30),
                                     "inactive_split_bytes.all.current": 0}, t=float(t["step"]))
            for t in trace
        )
        r = MemoryReport(samples, "reserved")
        assert r.fragmentation() == pytest.approx(want, abs=0.01)
        assert r.fragmentation() == pytest.approx(max(t["frag"] for t in trace), abs=1e-3)


def test_report_peaks_counters_and_perfgate_data() -> None:
    a, b = stats("default"), dict(stats("default"))
    b["num_alloc_retries"] = a["num_alloc_retries"] + 3
    b["num_ooms"] = a["num_ooms"] + 1
    r = MemoryReport((MemorySample.from_stats(a, 0.0), MemorySample.from_stats(b, 1.0)))
    assert r.alloc_retries == 3 and r.ooms == 1
    assert r.peak_reserved == a["reserved_bytes.all.peak"]
    assert r.peak_allocated == a["allocated_bytes.all.peak"]
    d = r.perfgate_data("fragmentation")
    assert d.unit.name == "%" and float(d.values[0]) == pytest.approx(0.21, abs=0.001)
    assert float(r.perfgate_data("memory").values[0]) == a["reserved_bytes.all.peak"]
    with pytest.raises(SampleError, match="no memory_snapshot"):
        MemoryReport(r.samples, "external").perfgate_data("fragmentation")
    out = r.to_dict()
    assert set(out["fragmentation"]) == set(DEFINITIONS) and out["formulas"] == DEFINITIONS


def test_at_peak_takes_the_sample_at_peak_reserved() -> None:
    lo = {"allocated_bytes.all.current": 10, "reserved_bytes.all.current": 100, "inactive_split_bytes.all.current": 50}
    hi = {"allocated_bytes.all.current": 180, "reserved_bytes.all.current": 200, "inactive_split_bytes.all.current": 10}
    r = MemoryReport((MemorySample.from_stats(lo), MemorySample.from_stats(hi, 1.0)))
    assert r.fragmentation(at="max") == pytest.approx(0.5)
    assert r.fragmentation(at="peak") == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"reserved_bytes.all.current": 1, "inactive_split_bytes.all.current": 0}, "no 'allocated_bytes.all.current'"),
        ({"allocated_bytes.all.current": -1, "reserved_bytes.all.current": 1, "inactive_split_bytes.all.current": 0},
         "not a non-negative"),
        ({"allocated_bytes.all.current": 5, "reserved_bytes.all.current": 1, "inactive_split_bytes.all.current": 0},
         "exceeds"),
        ({"allocated_bytes.all.current": float("nan"), "reserved_bytes.all.current": 1,
          "inactive_split_bytes.all.current": 0}, "not a non-negative"),
    ],
)
def test_bad_stats_name_the_key(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(MemoryStatsError, match=match):
        MemorySample.from_stats(bad, source="run.json")


def test_bad_definition_and_empty_report() -> None:
    with pytest.raises(MemoryStatsError, match="unknown fragmentation definition 'rss'"):
        MemorySample.from_stats(stats("default")).fragmentation("rss")
    with pytest.raises(MemoryStatsError, match="no samples"):
        MemoryReport(())
    with pytest.raises(MemoryStatsError, match="segment 0 has no 'blocks'"):
        free_blocks([{"total_size": 1}])
