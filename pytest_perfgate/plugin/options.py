"""The command-line options and ini keys of perfgate (``pytest --help``, group "perfgate")."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfgate", "performance gates from thresholds.toml (pytest-perfgate)")
    group.addoption("--perfgate-thresholds", metavar="PATH", default=None,
                    help="thresholds file (default: ini perfgate_thresholds, else thresholds.toml in rootdir)")
    group.addoption("--perfgate-out", metavar="DIR", default=None,
                    help="results directory for gates.xml, decisions.json, summary.md, report.html "
                    "(default: ini perfgate_out, else perfgate-results/)")
    group.addoption("--perfgate-confidence", type=float, default=None, metavar="C",
                    help="confidence of every verdict, overrides [perfgate] confidence (e.g. 0.99)")
    group.addoption("--perfgate-inconclusive", choices=("fail", "warn"), default=None,
                    help="what an inconclusive verdict does to its test (default: fail)")
    group.addoption("--perfgate-no-validity", action="store_true", default=False,
                    help="keep the raw verdict of a timing gate whose run's client did not keep up (default: "
                    "invalid, naming the figure; [perfgate] validity = false)")
    group.addoption("--perfgate-workers", metavar="N|auto|ray://HOST:PORT", default=None,
                    help="client worker processes of every load run (default: [perfgate] workers, else 1; "
                    "auto: usable cores - 1; ray://HOST:PORT or ray://auto: workers on the nodes of a Ray "
                    "cluster, ?per_node=N each)")
    group.addoption("--perfgate-engine", metavar="NAME|ROLE=NAME", action="append", default=None,
                    help="engine from [engines.NAME] that gate tests measure (default: the embedded CPU engine); "
                    "ROLE=NAME maps an engine the suite names (e.g. speculative=qwen72b-spec); repeatable")
    group.addoption("--perfgate-baseline", metavar="REF", default=None,
                    help="compare every gate with a baseline: a results directory or history.sqlite, 'latest', "
                    "a run id, or a git ref; gates with a `regression` tolerance fail when they regressed beyond it")
    group.addoption("--perfgate-history", metavar="URL|PATH", default=None,
                    help="the run history: a postgresql://USER@HOST/DB URL (runs, verdicts and their data files; "
                    "outlives the CI runner) or a SQLite file (default: $PERFGATE_HISTORY, else [perfgate] history, "
                    "else history.sqlite in the results directory)")
    group.addoption("--perfgate-strict-feasibility", action="store_true", default=False,
                    help="a gate whose threshold is below its physical floor on the engine's hardware is a usage "
                    "error before anything is measured (default: a warning; see `perfgate check`)")
    parser.addini("perfgate_thresholds", "path of thresholds.toml", default="")
    parser.addini("perfgate_out", "results directory", default="")
