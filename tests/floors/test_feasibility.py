"""Feasibility before measuring: `perfgate check`, the pytest header, --perfgate-strict-feasibility;
and floors in verdicts (floor, threshold as a multiple of it, MFU/MBU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_perfgate.config import load_thresholds
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.floors import annotate, check
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.verdicts.verdict import evaluate

ROOT = Path(__file__).parents[2]
ROLES = {"baseline": "qwen72b", "speculative": "qwen72b-spec"}
MS = 1_000_000


def test_phase1_ttft_gate_is_infeasible_for_the_72b_configuration() -> None:
    """The roadmap's engine: Qwen2.5-72B, TP 4, 7B draft (same vocabulary), on the [hardware] node of 8 H200."""
    th = load_thresholds(ROOT / "thresholds.toml")
    results, _notes = check(th, ROLES, probe=False)
    (ttft,) = [r for r in results if r.gate == "long_context_ttft"]
    assert not ttft.feasible and ttft.hardware == "4x H200"
    assert ttft.floor.value == pytest.approx(0.335, abs=0.002)  # 305 ms target + 30 ms 7B draft prefill
    assert ttft.multiple == pytest.approx(0.150 / ttft.floor.value)
    msg = ttft.message()
    assert msg.startswith("gate long_context_ttft: infeasible on 4x H200: needs >= 17 GPUs or >= 78% prefix-cache hits")
    assert "8,000-token prefill" in msg and "989.4 TFLOP/s" in msg


def test_expected_mfu_makes_the_8_gpu_floor_infeasible(tmp_path: Path) -> None:
    """On 8 GPUs the 100%-MFU floor (167 ms with the 7B draft) is near the target; at the 53% MFU
    measured on an H200 it is 316 ms: planning with expected_mfu says so."""
    text = (ROOT / "thresholds.toml").read_text().replace("tensor_parallel_size = 4", "tensor_parallel_size = 8")
    text = text.replace("# expected_mfu = 0.53", "expected_mfu = 0.53")
    p = tmp_path / "thresholds.toml"
    p.write_text(text)
    (ttft,) = [r for r in check(load_thresholds(p), ROLES, probe=False)[0] if r.gate == "long_context_ttft"]
    assert ttft.hardware == "8x H200" and ttft.floor.value == pytest.approx(0.167, abs=0.002)
    assert not ttft.feasible and "at the expected 53% MFU" in ttft.message()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_perfgate_check_warns_and_strict_fails() -> None:
    engines = ["--engine", "baseline=qwen72b", "--engine", "speculative=qwen72b-spec", "--no-preflight"]
    p = _cli("check", *engines)
    assert p.returncode == 0, p.stderr
    assert "gate long_context_ttft: infeasible on 4x H200: needs >= 17 GPUs or >= 78% prefix-cache hits" in p.stdout
    strict = _cli("check", *engines, "--strict-feasibility")
    assert strict.returncode == 1 and "--strict-feasibility: failing" in strict.stdout


def test_pytest_header_warns_and_strict_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", thresholds=(ROOT / "thresholds.toml").read_text())
    pytester.makepyfile(test_g="import pytest\n\n@pytest.mark.gate('long_context_ttft')\ndef test_ttft():\n    pass\n")
    args = ["--collect-only", "-p", "no:cacheprovider", "--perfgate-engine", "speculative=qwen72b-spec"]
    r = pytester.runpytest_inprocess(*args)
    assert r.ret == 0
    out = r.stdout.str()
    assert "perfgate: gate long_context_ttft: infeasible on 4x H200: needs >= 17 GPUs" in out  # header
    assert "PerfgateWarning: gate long_context_ttft: infeasible" in out  # warning summary
    s = pytester.runpytest_inprocess(*args, "--perfgate-strict-feasibility")
    assert s.ret == pytest.ExitCode.USAGE_ERROR
    assert "--perfgate-strict-feasibility: gate long_context_ttft: infeasible" in s.stderr.str()


def _run(model_dir: Path, ttft_ms: list[float], out_tokens: int = 1, gap_ms: float = 0.0) -> RunResult:
    recs = []
    for i, t in enumerate(ttft_ms):
        chunks = [int(t * MS) + int(k * gap_ms * MS) for k in range(out_tokens)]
        recs.append(RequestRecord(index=i, sent_ns=0, chunk_ns=chunks, chunk_tokens=[1] * out_tokens,
                                  end_ns=chunks[-1] + 1, prompt_tokens=8000, output_tokens=out_tokens))
    info = {"name": "h200-8b", "kind": "vllm", "device": "NVIDIA H200",
            "args": {"model": str(model_dir), "dtype": "bfloat16", "tensor_parallel_size": 1}}
    return RunResult(recs, engine_info=info)


def test_verdicts_carry_floor_multiple_and_mfu(tmp_path: Path) -> None:
    """The measured H200 prefill (8.2B Llama shape, 249 ms) evaluated as a gate: floor 130 ms, MFU 52%."""
    fix = json.loads((ROOT / "tests" / "fixtures" / "gpu" / "prefill_h200.json").read_text())
    m = fix["models"]["llama-8B-like"]
    model = tmp_path / "llama8b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "num_hidden_layers": m["num_hidden_layers"], "hidden_size": m["hidden_size"],
        "num_attention_heads": m["num_attention_heads"], "num_key_value_heads": m["num_key_value_heads"],
        "intermediate_size": m["intermediate_size"], "vocab_size": fix["vocab_size"], "torch_dtype": "bfloat16"}))
    th_path = tmp_path / "thresholds.toml"
    th_path.write_text('[phases.p]\n[gates.ttft]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "300 ms"\n'
                       '[gates.tpot]\nphase = "p"\nmetric = "tpot"\nstatistic = "p50"\nrecord_only = true\n'
                       '[hardware]\ngpu = "H200"\ncount = 1\n')
    th = load_thresholds(th_path)
    run = _run(model, [249.0] * 20)
    v = annotate(evaluate(th.gate("ttft"), run, thresholds=th), run, th)
    assert v.floor == pytest.approx(0.1298, abs=0.001) and v.floor_kind == "floor"
    assert v.floor_multiple == pytest.approx(0.300 / v.floor)
    assert v.efficiency_kind == "MFU" and v.efficiency == pytest.approx(0.521, abs=0.005)
    assert "floor 130 ms; threshold 2.31x floor; MFU 52.1%" in v.summary()
    d = v.to_dict()
    assert d["efficiency_kind"] == "MFU" and d["display"]["floor"].startswith("floor 130 ms")
    props = dict(v.user_properties())
    assert props["perfgate.ttft.mfu"] == pytest.approx(0.521, abs=0.005) and props["perfgate.ttft.floor"] == "130 ms"
    dec = _run(model, [249.0] * 20, out_tokens=33, gap_ms=8.0)  # 8 ms per output token at batch 1
    t = annotate(evaluate(th.gate("tpot"), dec, thresholds=th), dec, th)
    assert t.efficiency_kind == "MBU" and t.floor is not None and t.floor < 0.008 and t.floor_multiple is None
    assert t.efficiency == pytest.approx(t.floor / 0.008, rel=0.01)


def test_annotation_never_breaks_a_verdict(tmp_path: Path) -> None:
    th_path = tmp_path / "thresholds.toml"
    th_path.write_text('[phases.p]\n[gates.ttft]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "300 ms"\n')
    th = load_thresholds(th_path)
    run = _run(tmp_path / "missing-model", [100.0] * 5)
    v = evaluate(th.gate("ttft"), run, thresholds=th)
    assert annotate(v, run, th) == v  # no model description: unchanged
