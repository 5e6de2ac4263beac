"""``python -m pytest_perfgate.preflight THRESHOLDS [--engine ROLE=NAME ...] [--only NAME ...]
[--skip UNIT ...] [--embedded]``: the preflight's child process (``child.py``): builds the engine
configs with vLLM's classes and writes one event line a result on stdout. ``preflight.run`` starts
it, so vLLM (and torch) are never imported into the user's process."""

from __future__ import annotations

import sys

from .child import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
