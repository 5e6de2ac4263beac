"""``perfgate check``: every gate's physical floor on its engine's hardware, before measuring.

Exit status: 0 when every gate with a floor is within reach, 1 when one is infeasible and
``--strict`` is given (CI can choose), 2 on a bad thresholds file.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def cached_models() -> Callable[[], Any]:
    """A ``models()`` callable for the embedded engine that never generates: the cached model set,
    else LookupError (checks stay cheap; the engine generates them at start)."""

    def models() -> Any:
        from ..models.make import PARAMS, _complete, default_cache_dir, make_models, params_hash

        if not _complete(default_cache_dir() / params_hash(dict(PARAMS))):
            raise LookupError("embedded models not generated yet (`perfgate models make`)")
        return make_models()

    return models


def extend(sub: Any) -> None:
    """Give ``perfgate check`` the floors: add ``--engine``, ``--strict-feasibility`` and ``--probe``
    to the existing ``check`` subcommand (commands.py validates the file) and run the feasibility
    check after it; register a ``check`` of its own when there is none."""
    p = sub.choices.get("check") if hasattr(sub, "choices") else None
    if p is None:
        p = sub.add_parser("check", help="validate thresholds.toml and check every gate against its physical floor")
        p.add_argument("thresholds", nargs="?", default=None, help="the thresholds file (default: ./thresholds.toml)")
        p.add_argument("--json", action="store_true", help="print JSON on stdout")
        inner = None
    else:
        inner = p.get_default("func")
    p.add_argument("--engine", action="append", default=None, metavar="NAME|ROLE=NAME",
                   help="floors: as pytest's --perfgate-engine (e.g. speculative=qwen72b-spec); repeatable")
    p.add_argument("--strict-feasibility", action="store_true",
                   help="floors: exit 1 when a gate's threshold is below its physical floor")
    p.add_argument("--probe", action="store_true",
                   help="floors: measure this machine's peak now if not cached (embedded engines; ~2 s)")

    def check_with_floors(ns: argparse.Namespace) -> int:
        rc = int(inner(ns)) if inner is not None else 0
        if rc != 0:
            return rc
        return run(ns)

    p.set_defaults(func=check_with_floors)


def run(ns: argparse.Namespace) -> int:
    """Print every gate's feasibility (to stderr under ``--json``: stdout holds the JSON document of
    ``check``); 1 when one is infeasible and ``--strict-feasibility`` is given, 4 on a bad file."""
    import sys

    from ..config import ConfigError, load_thresholds
    from . import check

    path = getattr(ns, "thresholds", None) or "thresholds.toml"
    try:
        th = load_thresholds(path)
    except ConfigError as e:
        print(f"perfgate check: {e}", file=sys.stderr)
        return 4
    default: str | None = None
    aliases: dict[str, str] = {}
    for v in ns.engine or []:
        if "=" in v:
            role, _, name = v.partition("=")
            aliases[role.strip()] = name.strip()
        else:
            default = v.strip()
    results, notes = check(th, aliases, default=default, models=cached_models(), probe=ns.probe)
    bad = [r for r in results if not r.feasible]
    out = sys.stderr if getattr(ns, "json", False) else sys.stdout
    for r in results:
        print(r.message(), file=out)
    for n in notes:
        print(n, file=out)
    strict = bool(getattr(ns, "strict_feasibility", False))
    print(f"floors: {len(results)} gate(s) checked, {len(bad)} infeasible"
          + (" (--strict-feasibility: failing)" if bad and strict else ""), file=out)
    return 1 if bad and strict else 0
