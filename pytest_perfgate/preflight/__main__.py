"""``python -m pytest_perfgate.preflight THRESHOLDS [--engine ROLE=NAME ...] [--only NAME ...]``: the
preflight's report as JSON on stdout (``Report.to_dict()`` plus its ``lines``). The pytest header
runs it in this child process, so vLLM (and torch) are never imported into the test session."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str]) -> int:
    from ..config import load_thresholds
    from . import run

    p = argparse.ArgumentParser(prog="python -m pytest_perfgate.preflight")
    p.add_argument("thresholds")
    p.add_argument("--engine", action="append", default=[])
    p.add_argument("--only", action="append", default=None)
    ns = p.parse_args(argv)
    aliases = {r: n for r, _, n in (e.partition("=") for e in ns.engine) if n}
    report = run(load_thresholds(ns.thresholds), aliases, only=set(ns.only) if ns.only is not None else None)
    print(json.dumps({**report.to_dict(), "lines": report.lines()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
