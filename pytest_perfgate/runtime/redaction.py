"""Secrets out of results and logs: engine arguments and command lines with secret values masked."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SECRET = re.compile(r"(?:^|[-_])(?:key|token|secret|password|passwd|auth|credentials?)(?:$|[-_])", re.IGNORECASE)


def redact_args(value: Any, secret: bool = False) -> Any:
    """Engine arguments fit for results and logs: the values of secret-looking keys (``api_key``,
    ``HF_TOKEN`` in an ``env`` table, ...) become ``"***"``, at any depth."""
    if isinstance(value, Mapping):
        return {k: redact_args(v, secret or bool(_SECRET.search(str(k)))) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_args(v, secret) for v in value]
    return "***" if secret and value is not None else value


def redact_command(command: list[str]) -> list[str]:
    """A command line with the value after a secret-looking ``--flag`` (``--api-key X``) masked."""
    out: list[str] = []
    for i, a in enumerate(command):
        prev = command[i - 1] if i else ""
        if prev.startswith("--") and "=" not in prev and _SECRET.search(prev):
            out.append("***")
        elif a.startswith("--") and "=" in a and _SECRET.search(a.split("=", 1)[0]):
            out.append(a.split("=", 1)[0] + "=***")
        else:
            out.append(a)
    return out
