"""``perfgate check``: the ``[engines.NAME]`` tables of thresholds.toml, before any engine starts.

A kind that does not exist (``kind = "openia"``) and an argument the kind does not take
(``baseurl``) are problems naming the file, the table and the key, with a "did you mean". The
arguments each kind takes: the ``openai`` kind's own list (:data:`.openai.engine._KNOWN`), the
``transformers-vlm`` kind's, and for the vLLM kinds vLLM's engine arguments (the fields of
``EngineArgs``/``AsyncEngineArgs``) plus, for ``vllm-server``, the server's own flags and perfgate's
keys. vLLM's names are read from its installed source without importing it (an import costs
seconds); without vLLM those arguments are not checked, and a note says so.

Nothing here starts or imports an engine. (The GPU preflight of ``perfgate check`` is elsewhere.)
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from ..config import ConfigError, Thresholds
from ..contract import EngineError
from . import registry

# the frontend's flags and dataclasses of `vllm serve` (vLLM 0.32; older versions: entrypoints/openai)
_SERVER_SOURCES = ("entrypoints/launchers/cli_args.py", "entrypoints/openai/cli_args.py")


def _close(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def _fields(tree: ast.Module, classes: Iterable[str] | None = None) -> set[str]:
    """Annotated class attributes (dataclass fields) of ``classes`` (None: every class) in ``tree``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and (classes is None or node.name in classes):
            names |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return names


def _flags(tree: ast.Module) -> set[str]:
    """Every ``"--flag-name"`` string literal, as ``flag_name``."""
    return {n.value[2:].replace("-", "_") for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("--")
            and n.value[2:].replace("-", "").isalnum()}


def _vllm_root() -> Path | None:
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    locs = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locs[0]) if locs else None


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


@cache
def vllm_argument_names(server: bool) -> frozenset[str] | None:
    """vLLM's engine argument names (``server``: also the ``vllm serve`` flags), from its source;
    None when vLLM is not installed or its source does not have them where expected."""
    root = _vllm_root()
    tree = _parse(root / "engine" / "arg_utils.py") if root is not None else None
    if root is None or tree is None:
        return None
    names = _fields(tree, ("EngineArgs", "AsyncEngineArgs"))
    if "model" not in names:
        return None
    if server:
        for rel in _SERVER_SOURCES:
            t = _parse(root / rel)
            if t is not None:
                names |= _fields(t) | _flags(t)
        names |= _flags(tree)
    return frozenset(names)


def vllm_engine_arguments() -> frozenset[str] | None:
    """The ``vllm`` kind's arguments: vLLM's engine arguments (None without vLLM)."""
    return vllm_argument_names(server=False)


def known_arguments(kind: str) -> frozenset[str] | None:
    """The arguments engine kind ``kind`` takes (:meth:`.registry.EngineKind.known_arguments`);
    None when they cannot be known here or the kind does not exist."""
    found = registry.lookup(kind)
    return None if found is None else found.known_arguments()


def engine_problems(th: Thresholds) -> tuple[list[str], list[str]]:
    """(problems, notes) of ``th``'s ``[engines.*]`` tables: one line each, naming the file, the
    table and the key. A key inherited through ``extends`` is said once, at the table it is in."""
    problems: list[str] = []
    notes: list[str] = []
    kinds = registry.kinds()
    for name, spec in th.engines.items():
        parent = th.engines.get(spec.extends) if spec.extends else None
        table = f"engines.{name}"
        if spec.kind not in kinds:
            if parent is None or parent.kind != spec.kind:
                msg = f"unknown kind {spec.kind!r} ({_close(spec.kind, kinds)}kinds: {', '.join(kinds)})"
                problems.append(str(ConfigError(th.path, table, "kind", msg)))
            continue
        try:
            kind = registry.lookup(spec.kind)
            known = None if kind is None else kind.known_arguments()
        except EngineError as e:  # an entry point that does not load
            problems.append(str(ConfigError(th.path, table, "kind", str(e))))
            continue
        if known is None:
            why = "vLLM is not installed here" if kind is not None and kind.vllm else "the kind does not list its arguments"
            notes.append(f"{th.path.name}: [{table}]: arguments not checked ({spec.kind}: {why})")
            continue
        for key in spec.args:
            inherited = parent is not None and key in parent.args and parent.kind == spec.kind
            if key in known or inherited:
                continue
            hint = _close(key, known)
            listed = f"arguments: {', '.join(sorted(known))}" if len(known) <= 30 else "see the kind's documentation"
            msg = f"unknown argument of a {spec.kind} engine ({hint}{listed})"
            problems.append(str(ConfigError(th.path, table, key, msg)))
    return problems, notes
