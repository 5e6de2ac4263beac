"""The GPU preflight on this CPU: every [engines.*] of the project's thresholds.toml and every
fallback variant built with vLLM's own config classes (EngineArgs -> create_engine_config) from the
[models.*] shapes; what vLLM refuses is one line naming the engine and the key (issue 26)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_perfgate import preflight
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.config.params import workload

pytest.importorskip("vllm")

ROOT = Path(__file__).parents[2]
SPEC = '{ method = "draft_model", model = "Qwen/Qwen2.5-7B-Instruct", num_speculative_tokens = 5 }'


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "thresholds.toml").read_text()
    assert old in text, old
    p = tmp_path / "thresholds.toml"
    p.write_text(text.replace(old, new))
    return p


@pytest.fixture(scope="module")
def project() -> preflight.Report:
    return preflight.run(load_thresholds(ROOT / "thresholds.toml"))


def test_every_configured_engine_and_fallback_variant_builds(project: preflight.Report) -> None:
    built = [b.split(":")[0] for b in project.built]
    assert built == ["qwen72b", "qwen72b-spec", "qwen72b-spec+tiered_kv (plan tiered_kv_cache)",
                     "qwen72b-spec+context_parallel (plan sequence_parallel)",
                     "qwen72b-spec[draft 1] (plan switch_draft_model)"], project.lines()
    assert not project.refused and not project.skipped, project.lines()
    assert all("shapes of [models." in b for b in project.built)
    (warn,) = project.warnings  # plan B: decode context parallelism needs TP 16 > 8 KV heads
    assert warn.engine.startswith("qwen72b-spec+context_parallel") and warn.key == "tensor_parallel_size"
    assert warn.line().endswith("will not start: needs 16 GPUs; [hardware] count = 8")


def test_the_72b_with_the_1_5b_draft_is_refused_with_vllms_vocabulary_message(tmp_path: Path) -> None:
    p = _variant(tmp_path, "Qwen/Qwen2.5-7B-Instruct\", num_speculative_tokens",
                 "Qwen/Qwen2.5-1.5B-Instruct\", num_speculative_tokens")
    r = preflight.run(load_thresholds(p))
    lines = [f.line() for f in r.refused if f.engine == "qwen72b-spec"]
    assert lines == ["[engines.qwen72b-spec] speculative_config.model: vLLM refuses: ValidationError: Target and "
                     "draft model should have the same vocabulary size. Target model vocab_size=152064. Draft model "
                     "vocab_size=151936. Using models with different tokenizers can cause out-of-bounds errors "
                     "during speculative decoding."], r.lines()
    assert r.failed(strict=False)


def test_candidate_drafts_of_the_gpu_engine_are_not_the_embedded_ones() -> None:
    """Defect 2: the tiny drafts sat in [params.phase1], so the switch-draft plan put them on the 72B."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class P:
        candidate_drafts: tuple[str, ...] = ()

    th = load_thresholds(ROOT / "thresholds.toml")
    gpu, cpu = workload(P, th, "phase1"), workload(P, th, "phase1", embedded=True)
    assert gpu.candidate_drafts and not any(d.startswith("embedded:") for d in gpu.candidate_drafts)
    assert cpu.candidate_drafts == ("embedded:draft", "embedded:draft_independent")


@pytest.mark.parametrize(("old", "new", "key", "text"), [
    ("tensor_parallel_size = 4", "tensor_paralel_size = 4", "tensor_paralel_size",
     "no such vLLM engine argument (did you mean tensor_parallel_size"),
    ("tensor_parallel_size = 4", "tensor_parallel_size = 3", "tensor_parallel_size",
     "Total number of attention heads (64) must be divisible by tensor parallel size (3)"),
    ("enable_prefix_caching = true", "enable_prefix_caching = true\ndecode_context_parallel_size = 2",
     "decode_context_parallel_size", "requires `--tensor-parallel-size` (4) to be greater than the model's total "
     "number of KV heads (8)"),
])
def test_vllm_refusals_name_the_engine_and_key(tmp_path: Path, old: str, new: str, key: str, text: str) -> None:
    r = preflight.run(load_thresholds(_variant(tmp_path, old, new)))
    f = next(f for f in r.refused if f.engine == "qwen72b")
    assert f.key == key and text in f.message, r.lines()


def test_prefill_context_parallelism_on_a_non_mla_model_will_not_start(tmp_path: Path) -> None:
    p = _variant(tmp_path, "enable_prefix_caching = true", "enable_prefix_caching = true\n"
                 "prefill_context_parallel_size = 2")
    r = preflight.run(load_thresholds(p))
    f = next(f for f in r.warnings if f.engine == "qwen72b" and f.key == "prefill_context_parallel_size")
    assert "no non-MLA attention backend of vLLM supports prefill context parallelism (supports_pcp)" in f.message


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_perfgate_check_exits_4_for_a_config_vllm_cannot_build(tmp_path: Path) -> None:
    p = _variant(tmp_path, SPEC, SPEC.replace("7B", "1.5B"))
    bad = _cli(str(p))
    assert bad.returncode == 4, bad.stdout + bad.stderr
    assert "preflight: [engines.qwen72b-spec] speculative_config.model: vLLM refuses" in bad.stdout
    ok = _cli("--strict-feasibility", "--preflight-json", str(tmp_path / "pre.json"))
    assert ok.returncode == 4 and "(--strict-feasibility: failing)" in ok.stdout  # plan B needs 16 GPUs
    assert '"level": "warn"' in (tmp_path / "pre.json").read_text()
