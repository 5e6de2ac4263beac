"""The lazy public faces (``pytest_perfgate``, ``vision``, ``memory``, ``distributed``; runtime/lazy.py):
every name of a face's table resolves to what its ``if TYPE_CHECKING:`` re-export names, the two lists
agree, and importing the package imports nothing heavy."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

FACES = ["pytest_perfgate", "pytest_perfgate.vision", "pytest_perfgate.memory", "pytest_perfgate.distributed"]


def _reexports(package: str) -> dict[str, str]:
    """name -> the absolute module its ``from .X import name as name`` line (under TYPE_CHECKING) names."""
    path = Path(importlib.import_module(package).__file__ or "")
    guard = next(n for n in ast.parse(path.read_text()).body
                 if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING")
    out = {}
    for node in guard.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        base = f"{package}.{node.module}" if node.module else package
        for alias in node.names:
            assert alias.asname == alias.name, ast.unparse(node)
            out[alias.name] = base
    return out


@pytest.mark.parametrize("package", FACES)
def test_each_name_is_its_type_checking_reexport(package: str) -> None:
    face = importlib.import_module(package)
    want = _reexports(package)
    assert face.__all__ == sorted(want)
    for name, module in want.items():
        got = getattr(face, name)
        source = importlib.import_module(module)
        assert got is (getattr(source, name) if hasattr(source, name) else importlib.import_module(f"{module}.{name}"))
    assert set(want) <= set(dir(face))
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        face.nope  # noqa: B018


def test_importing_the_faces_imports_nothing_heavy() -> None:
    code = ("import sys\n" + "".join(f"import {p}\n" for p in FACES)
            + "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'torch', 'pytest', 'scipy'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip() == "[]"


def test_the_suites_import_only_the_public_package() -> None:
    """A suite a user copies needs no internal module (a deep import shows a missing public face)."""
    root = Path(__file__).resolve().parents[2]
    for path in [*sorted((root / "perf_tests").glob("*.py")), root / "conftest.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [n for n in names if n.startswith("pytest_perfgate.")], f"{path.name}:{getattr(node, 'lineno', 0)}"
