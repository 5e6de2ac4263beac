"""The ``perfgate`` command line.

``perfgate models make [--out DIR] [--force]``: generate (or reuse from the cache) the tiny test
models and print their paths and the time taken.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def _models_make(ns: argparse.Namespace) -> int:
    from .models import make_models

    t0 = time.perf_counter()
    ms = make_models(Path(ns.out) if ns.out else None, force=ns.force)
    took = time.perf_counter() - t0
    if ns.json:
        print(json.dumps({**ms.info(), "seconds": round(took, 3)}, indent=2))
        return 0
    print(f"params hash         {ms.params_hash}")
    print(f"target              {ms.target}")
    print(f"draft (calibrated)  {ms.draft}")
    print(f"draft (independent) {ms.draft_independent}")
    print(f"tokenizer           {ms.tokenizer}")
    print(f"took                {took:.2f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfgate", description="pytest-perfgate utilities")
    sub = parser.add_subparsers(dest="command", required=True)
    from .floors.cli import extend as add_floors

    add_floors(sub)  # perfgate check: physical floors of every gate (floors/cli.py)

    models = sub.add_parser("models", help="tiny generated models for engine tests")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    make = models_sub.add_parser("make", help="generate (or reuse) the tiny target/draft models")
    make.add_argument(
        "--out", metavar="DIR", help="cache root (default: $PERFGATE_CACHE or ~/.cache/pytest-perfgate/models)"
    )
    make.add_argument("--force", action="store_true", help="regenerate even when a complete set is cached")
    make.add_argument("--json", action="store_true", help="print the model set's info as JSON")
    make.set_defaults(func=_models_make)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``perfgate`` console script."""
    ns = build_parser().parse_args(argv)
    return int(ns.func(ns))


if __name__ == "__main__":
    sys.exit(main())
