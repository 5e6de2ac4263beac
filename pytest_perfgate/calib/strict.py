"""The scripted server's strict OpenAI-spec mode (``ScriptedServer(strict=True)``).

It answers as OpenAI's API does to what the spec does not have: an unknown field (vLLM's
``ignore_eos``, ``stream_options.continuous_usage_stats``, even the scripted server's own
``perfgate``) is ``400 Unrecognized request argument supplied: NAME``, a prompt that is not a
string is a 400, and streams end without ``data: [DONE]`` (the last chunk has a
``finish_reason``); there is no ``/metrics``, ``/version`` or ``/health``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

_COMMON = frozenset({"model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop",
                     "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "user", "seed"})
COMPLETIONS = _COMMON | {"prompt", "best_of", "echo", "suffix"}
CHAT = _COMMON | {"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "response_format",
                  "parallel_tool_calls", "service_tier", "store", "metadata"}
STREAM_OPTIONS = frozenset({"include_usage", "include_obfuscation"})
GET_PATHS = frozenset({"/v1/models"})  # the only GET a strict server answers


def strict_error(req: Mapping[str, Any], chat: bool) -> bytes | None:
    """The 400 body for ``req``, or None when the spec allows it."""
    known = CHAT if chat else COMPLETIONS
    unknown = sorted(set(req) - known)
    opts = req.get("stream_options")
    if isinstance(opts, Mapping):
        unknown += [f"stream_options.{k}" for k in sorted(set(opts) - STREAM_OPTIONS)]
    if unknown:
        return _error(f"Unrecognized request argument supplied: {', '.join(unknown)}")
    if not chat and not isinstance(req.get("prompt"), str):
        got = type(req.get("prompt")).__name__
        return _error(f"Invalid type for 'prompt': expected a string, but got {got} instead.", "prompt")
    return None


def _error(message: str, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}})
