"""The ``perfgate`` command line.

``perfgate models make [--out DIR] [--force]``: generate (or reuse from the cache) the tiny test
models and print their paths and the time taken. The results commands (check, gates, show, diff,
history, report, evaluate) live in :mod:`pytest_perfgate.cli.commands`; ``perfgate gate`` (other
tools' benchmark exports decided) in :mod:`pytest_perfgate.cli.gate`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def _models_make(ns: argparse.Namespace) -> int:
    from ..engines.requirements import EMBEDDED_MODULES, engine_fix, installed

    lack = [m for m in EMBEDDED_MODULES if not installed(m)]
    if lack:  # one line with the fix, never a traceback
        verb = "is" if len(lack) == 1 else "are"
        print(f"perfgate models make: {', '.join(lack)} {verb} not installed (fix: {engine_fix()})", file=sys.stderr)
        return 3
    from ..models import make_models

    t0 = time.perf_counter()
    try:
        ms = make_models(Path(ns.out) if ns.out else None, force=ns.force)
    except (OSError, ImportError, ValueError) as e:
        print(f"perfgate models make: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
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
    from .. import __version__
    from .commands import add_commands

    parser = argparse.ArgumentParser(prog="perfgate", description="pytest-perfgate utilities")
    parser.add_argument("--version", action="version", version=f"perfgate {__version__} (pytest-perfgate)")
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub)
    from ..floors.cli import extend as add_floors

    add_floors(sub)  # perfgate check: physical floors of every gate (floors/cli.py)
    from .scaffold import extend as add_init

    add_init(sub)  # perfgate init: a project in your own repository (scaffold.py)
    from .gate import extend as add_gate

    add_gate(sub)  # perfgate gate: thresholds.toml decided on another tool's benchmark results (gate.py)
    from ..preflight.cli import extend as add_preflight

    add_preflight(sub)  # perfgate check: every vLLM engine's config built with vLLM's classes (preflight/)

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
    from ..runtime import noise
    from .commands import run

    noise.install()  # before anything imports torch/torchao (models make, check): their import noise, only it

    ns = build_parser().parse_args(argv)
    return run(ns)

