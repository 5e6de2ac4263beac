"""Calibration helpers: servers with scripted, known timing to check the measuring path against."""

from __future__ import annotations

from typing import Any

__all__ = ["Script", "ScriptedServer"]


def __getattr__(name: str) -> Any:  # lazy, so ``python -m ...scripted_server`` imports it once
    if name in __all__:
        from . import scripted_server

        return getattr(scripted_server, name)
    raise AttributeError(name)
