"""Tiny generated models (tokenizer, target, drafts) for engine tests; see :mod:`.make`."""

from __future__ import annotations

from .make import ModelSet, default_cache_dir, make_models, params_hash

__all__ = ["ModelSet", "default_cache_dir", "make_models", "params_hash"]
