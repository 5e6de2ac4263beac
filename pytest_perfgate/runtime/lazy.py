"""Lazy public faces: a package whose names are imported on first use (PEP 562), from one table.

A face's table reads like the imports it stands for: ``{"phase3": ("Phase3Params", "measure")}`` is
``from .phase3 import Phase3Params, measure``, and ``{"": ("vision",)}`` is ``from . import vision``.
As with ``from X import name``, a name that the submodule does not define is its submodule of that name
(``{"load": ("traces",)}`` gives the module ``load.traces``). Nothing is imported until a name is asked for,
so importing the package stays cheap (no numpy, torch or pytest).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_face(package: str, table: Mapping[str, Sequence[str]]
              ) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` of the package ``package`` (its ``__name__``) whose public
    names are ``table``'s: submodule (relative, "" for the package itself) -> the names imported from it."""
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        base = f"{package}.{where[name]}" if where[name] else package
        if where[name]:
            module = importlib.import_module(base)
            if hasattr(module, name):
                return getattr(module, name)
        return importlib.import_module(f"{base}.{name}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return sorted(where), __getattr__, __dir__
