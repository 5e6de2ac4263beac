"""``perfgate check``'s preflight: after the file is valid (and the floors are said), build every
configured vLLM engine's config and the fallback variants (see the package docstring).

Exit 4 when vLLM refuses a configuration (it cannot start anywhere), or, with
``--strict-feasibility``, when one will not start on the ``[hardware]`` machine either.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

BAD_CONFIG = 4


def extend(sub: Any) -> None:
    """Add ``--no-preflight`` to ``check`` and run the preflight after its current function."""
    p = sub.choices.get("check") if hasattr(sub, "choices") else None
    if p is None:
        return
    inner = p.get_default("func")
    p.add_argument("--no-preflight", action="store_true",
                   help="preflight: do not build the vLLM engine configs (vLLM import, ~10-25 s)")
    p.add_argument("--preflight-json", default=None, metavar="PATH", help="preflight: also write its report as JSON")

    def check_with_preflight(ns: argparse.Namespace) -> int:
        rc = int(inner(ns)) if inner is not None else 0
        if getattr(ns, "no_preflight", False) or rc == BAD_CONFIG:
            return rc
        pre = run(ns)
        return pre if pre else rc

    p.set_defaults(func=check_with_preflight)


def _aliases(ns: argparse.Namespace) -> dict[str, str]:
    return {r.strip(): n.strip() for r, _, n in (v.partition("=") for v in (getattr(ns, "engine", None) or []) if "=" in v)}


def run(ns: argparse.Namespace) -> int:
    """Print the preflight's lines (stderr under ``--json``); 4 on a refusal (see the module doc)."""
    from ..config import ConfigError, load_thresholds
    from ..engines.requirements import installed
    from ..floors.cli import cached_models
    from . import VLLM_KINDS
    from . import run as preflight

    out = sys.stderr if getattr(ns, "json", False) else sys.stdout
    try:
        th = load_thresholds(getattr(ns, "thresholds", None) or "thresholds.toml")
    except ConfigError as e:
        print(f"perfgate check: {e}", file=sys.stderr)
        return BAD_CONFIG
    if not any(s.kind in VLLM_KINDS for s in th.engines.values()):
        return 0
    if not installed("vllm"):
        print("preflight: not run: vLLM is not installed here (the engine configs are built with vLLM's own "
              "classes; install pytest-perfgate[cpu] on a CPU machine, pytest-perfgate[gpu] on a GPU one)", file=out)
        return 0
    report = preflight(th, _aliases(ns), embedded=cached_models(),
                       progress=lambda m: print(m, file=sys.stderr, flush=True))
    for line in report.lines():
        print(line, file=out)
    if ns.preflight_json:
        with open(ns.preflight_json, "w") as f:
            json.dump(report.to_dict(), f, indent=2)
    strict = bool(getattr(ns, "strict_feasibility", False))
    if report.failed(strict):
        print(f"preflight: {len(report.refused)} refused, {len(report.warnings)} will not start"
              + (f", {len(report.crashed)} crashed" if report.crashed else "")
              + (" (--strict-feasibility: failing)" if strict and report.warnings else ""), file=out)
        return BAD_CONFIG
    return 0
