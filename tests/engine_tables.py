"""thresholds.toml's engine table of an OpenAI-compatible server, as the plugin's tests write it after
their gates (tests/reliability/test_errored_gates.py, tests/plugin/test_readme.py)."""

from __future__ import annotations

import json


def openai_engine(name: str, base_url: str, model: str, **keys: str | int | float) -> str:
    """``[engines.NAME]`` of kind "openai" at ``base_url`` serving ``model``; ``keys`` are more of its
    keys (``timeout=5``, ``tokenizer="/path"``), strings quoted as TOML basic strings."""
    lines = [f"[engines.{name}]", 'kind = "openai"', f"base_url = {json.dumps(base_url)}", f"model = {json.dumps(model)}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    return "\n" + "\n".join(lines) + "\n"
