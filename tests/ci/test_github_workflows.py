"""The GitHub Actions examples in ci/github/ (issue #16): valid YAML, a GPU runner, the phase-1 command,
and no CPU-only settings on the GPU job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "ci" / "github").glob("*.yml"))


def _load(path: Path) -> dict[Any, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), path
    return doc


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_runs_on_a_gpu_runner_with_a_timeout(path: Path) -> None:
    doc = _load(path)
    assert doc.get(True) or doc.get("on"), f"{path.name}: no trigger"  # YAML 1.1 reads `on:` as True
    for name, job in doc["jobs"].items():
        assert {"self-hosted", "gpu"} <= set(job["runs-on"]), f"{path.name}: job {name} not on a GPU runner"
        assert job.get("timeout-minutes"), f"{path.name}: job {name} without timeout-minutes"


def test_embedded_gpu_job_runs_phase1_without_cpu_settings() -> None:
    path = ROOT / "ci" / "github" / "perfgate-embedded-gpu.yml"
    doc = _load(path)
    text = path.read_text()
    runs = "\n".join(step.get("run", "") for job in doc["jobs"].values() for step in job["steps"])
    assert "pytest -m phase1 perf_tests" in runs
    assert "torch.cuda.is_available()" in runs  # fails early on a runner without a GPU
    assert "setup.sh" not in runs and "+cpu" not in runs  # the CPU builds of torch/vLLM are for the CPU runner
    assert "VLLM_CPU_KVCACHE_SPACE" not in text
