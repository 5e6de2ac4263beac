"""Secrets out of results and logs, and server text made safe to show.

* :func:`clean`: the one function every string a server under test supplied goes through before any
  output (a request's cause, ``RequestRecord.error``, which :mod:`pytest_perfgate.contract` cleans as
  it is set; the dialect probe's notes; the server's version; an engine's start failure): the
  session's secrets and any ``Authorization`` / ``api-key`` / ``x-api-key`` / ``Bearer`` value
  become ``***``, control characters are shown escaped (``\\x1b``, ``\\r``, ``\\x07``; runs of
  spaces, tabs and newlines fold into one space), and the text is bounded. Idempotent.
* :func:`add_secret`, :func:`add_secrets_of`: the session's secrets (the ``openai`` kind's API key,
  the values of secret-looking engine arguments), masked wherever they appear.
* :func:`redact_args`, :func:`redact_command`: engine arguments and command lines with secret values
  masked (``info()``, failed-start messages).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

_SECRET = re.compile(r"(?:^|[-_])(?:key|token|secret|password|passwd|auth|credentials?)(?:$|[-_])", re.IGNORECASE)
MASK = "***"
MIN_SECRET = 4  # shorter values are not masked (they would mask every such substring of every message)
CAUSE_LIMIT = 500  # characters of a cleaned string, "..." included
_SECRETS: set[str] = set()
_SECRET_RE: re.Pattern[str] | None = None
# a header (or JSON key, or query parameter) that carries a credential, and its value
_HEADER = re.compile(r"(?<![A-Za-z0-9])((?:proxy-)?authorization|x-api-key|api[-_]key|access[-_]token)([\"'\s]{0,3}[:=]\s*[\"']?)"
                     r"(?:(bearer|basic|token)\s+)?([^\s\"',;&(){}<>\[\]\\]+)", re.IGNORECASE)
_SCHEME = re.compile(r"\b(bearer)\s+(?!\*\*\*)[^\s\"',;&(){}<>\[\]\\]{4,}", re.IGNORECASE)
_FOLD = re.compile(r"(?:\r\n|[ \t\n])+")
_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def add_secret(value: object) -> None:
    """Mask ``value`` (its text) in everything :func:`clean` sees from now on (this process)."""
    global _SECRET_RE
    text = str(value) if value is not None else ""
    if len(text) < MIN_SECRET or text in _SECRETS:
        return
    _SECRETS.add(text)
    _SECRET_RE = re.compile("|".join(map(re.escape, sorted(_SECRETS, key=len, reverse=True))))


def add_secrets_of(args: Mapping[str, Any]) -> None:
    """The values of an engine table's secret-looking keys (``api_key``, ``hf_token``, ``env.HF_TOKEN``,
    at any depth; not ``*_env``, which name a variable) become secrets."""
    for value in _secret_values(args, False):
        add_secret(value)


def _secret_values(value: Any, secret: bool) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            name = str(k)
            yield from _secret_values(v, secret or (bool(_SECRET.search(name)) and not name.lower().endswith("_env")))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _secret_values(v, secret)
    elif secret and value is not None and not isinstance(value, bool):
        yield value


def clean(text: str, limit: int | None = CAUSE_LIMIT, lines: bool = False) -> str:
    """``text`` fit for any output (see the module docstring); ``lines``: keep line breaks (a log
    tail) and fold nothing, each line made printable."""
    if _SECRET_RE is not None:
        text = _SECRET_RE.sub(MASK, text)
    if lines:
        text = "\n".join(printable(ln, fold=False) for ln in text.replace("\r\n", "\n").split("\n"))
    else:
        text = printable(text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)} {MASK}", _HEADER.sub(_mask_header, text))
    if limit is not None and len(text) > limit:
        text = text[:max(0, limit - 3)] + "..."
    return text


def _mask_header(m: re.Match[str]) -> str:
    scheme = f"{m.group(3)} " if m.group(3) else ""
    return f"{m.group(1)}{m.group(2)}{scheme}{MASK}"


def printable(text: str, fold: bool = True) -> str:
    """Control and other non-printable characters shown escaped (``\\x1b``, ``\\r``, ``\\u202e``);
    ``fold``: runs of spaces, tabs and newlines (``\\r\\n`` too, a lone ``\\r`` not) become one space."""
    if fold:
        text = _FOLD.sub(" ", text).strip(" ")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    o = ord(c)
    return _NAMED.get(c) or (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")


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
