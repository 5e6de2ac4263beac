"""In-process pytester runs keep the libraries they import (tests/conftest.py, issue 31): dropping a
C extension from sys.modules after a run crashed the test process (torch: SIGSEGV in the next
garbage collection or the next import)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def test_a_library_imported_inside_a_run_stays_and_the_runs_own_modules_go(pytester: pytest.Pytester) -> None:
    lib = next(m for m in ("tabnanny", "pickletools", "mailbox") if m not in sys.modules)  # stdlib, unused here
    pytester.makepyfile(helper_mod="X = 1", test_a=f"import {lib}\nimport helper_mod\n\ndef test_a():\n    pass\n")
    pytester.runpytest("-p", "no:perfgate").assert_outcomes(passed=1)
    assert lib in sys.modules
    assert "helper_mod" not in sys.modules and "test_a" not in sys.modules


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the crash needs torch's C extension")
def test_torch_imported_inside_a_run_does_not_crash_the_process(tmp_path: Path) -> None:
    """The crash itself, in a child pytest process with this conftest: torch imported inside an
    in-process run, then a garbage collection and torch imported again outside it (SIGSEGV before)."""
    conftest = Path(__file__).parents[1] / "conftest.py"
    (tmp_path / "conftest.py").write_text(conftest.read_text())
    (tmp_path / "test_x.py").write_text(
        "import gc\npytest_plugins = ['pytester']\n\n"
        "def test_inner(pytester):\n"
        "    pytester.makepyfile('def test_a():\\n    import torch\\n')\n"
        "    pytester.runpytest('-p', 'no:perfgate').assert_outcomes(passed=1)\n"
        "    gc.collect()\n\n"
        "def test_outer():\n"
        "    import torch\n"
        "    assert torch.ones(2).sum().item() == 2\n")
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:perfgate", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
