"""Size and naming rules of the tree (issue 11): small modules, short functions, unique test module names.

- no module of the package over 500 lines;
- no function over 80 lines, except the (module, function) pairs in ``ALLOWED`` with the reason: a table
  or a parser state machine that reads best in one piece;
- no two Python files under tests/ with the same basename (pytest's default "prepend" import mode puts
  each test folder on sys.path and imports a test module by its basename, so tests/memory/test_probe.py
  and tests/floors/test_probe.py collided in CI).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_perfgate"
TESTS = ROOT / "tests"

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

# (module relative to pytest_perfgate/, function qualname or "" for the module's own length): why it may be longer.
# "pending: AREA" entries are modules another area of issue 11 is still splitting; they go when it lands.
ALLOWED: dict[tuple[str, str], str] = {
    ("imports/columnar.py", "keyed_lists"): "a streaming parser's state machine (key search, list element, "
    "block refill share one buffer and position); split, its states would pass through every call",
}


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualname, lines from ``def`` to its last line) of every function, nested ones included."""
    out: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            out.append((name, (node.end_lineno or node.lineno) - node.lineno + 1))
            out.extend(_functions(node, f"{name}.<locals>."))
        elif isinstance(node, ast.ClassDef):
            out.extend(_functions(node, f"{prefix}{node.name}."))
        else:
            out.extend(_functions(node, prefix))
    return out


def _sizes() -> dict[tuple[str, str], int]:
    """Every module's line count (function "") and every function's, keyed like ``ALLOWED``."""
    sizes: dict[tuple[str, str], int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        sizes[(rel, "")] = len(text.splitlines())
        for name, lines in _functions(ast.parse(text, filename=str(path))):
            sizes[(rel, name)] = max(lines, sizes.get((rel, name), 0))
    return sizes


def _limit(key: tuple[str, str]) -> int:
    return MAX_FUNCTION_LINES if key[1] else MAX_MODULE_LINES


def test_modules_and_functions_are_small() -> None:
    too_long = [
        f"{mod}{':' + fn if fn else ''}: {n} lines (limit {_limit((mod, fn))})"
        for (mod, fn), n in _sizes().items()
        if n > _limit((mod, fn)) and (mod, fn) not in ALLOWED
    ]
    assert not too_long, "split by job (or, for a table or parser state machine, add to ALLOWED with why):\n" + "\n".join(
        too_long
    )


def test_allowlist_is_current() -> None:
    """An allowed entry that no longer exists or fits the limit is taken off (pending ones may lag their area)."""
    sizes = _sizes()
    stale = [
        f"{mod}:{fn}" if fn else mod
        for (mod, fn), why in ALLOWED.items()
        if not why.startswith("pending:") and sizes.get((mod, fn), 0) <= _limit((mod, fn))
    ]
    assert not stale, "remove from ALLOWED (within the limit now, or gone): " + ", ".join(stale)
    assert all(why.strip() for why in ALLOWED.values())


def test_test_module_basenames_are_unique() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name != "conftest.py" and "__pycache__" not in path.parts:
            by_name[path.name].append(path.relative_to(ROOT).as_posix())
    clashes = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"same basename in two test folders (prepend import mode imports them as one module): {clashes}"


def test_the_checks_see_long_code() -> None:
    """The walker measures nested functions and methods by their qualname."""
    src = "class A:\n    def f(self):\n        def g():\n            pass\n        return g\n"
    assert dict(_functions(ast.parse(src))) == {"A.f": 4, "A.f.<locals>.g": 2}
