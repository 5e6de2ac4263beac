"""``perfgate init``: a perfgate project in your own repository, in one command.

``perfgate init [DIR] --base-url URL --model NAME`` (an OpenAI-compatible server: the ``openai``
kind) or ``perfgate init [DIR]`` (the embedded CPU default) writes three files that run as
written: ``thresholds.toml`` (six serving SLO gates: TTFT P95, ITL P99, TPOT P99, output
throughput, error rate, E2E P90), ``tests/perf/test_slo.py`` (one load run at concurrency 4
through the public API and the ``perfgate``/``perfgate_engines`` fixtures) and
``.github/workflows/perfgate.yml``, then prints the one command that runs them. Existing files are
never overwritten (they are named) unless ``--force``. Exit status: 0 written, 1 a file exists,
2 bad arguments, 4 the written thresholds.toml does not validate (a bug).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

THRESHOLDS = "thresholds.toml"
TEST_FILE = "tests/perf/test_slo.py"
WORKFLOW = ".github/workflows/perfgate.yml"
COMMAND = "pytest tests/perf"

_HEADER = """\
# perfgate thresholds (written by `perfgate init`): the serving SLOs of {what}.
# Edit the targets to yours; `perfgate check` validates this file, `perfgate gates` lists the gates.
# Reference: the README's "thresholds.toml" section (pytest-perfgate), docs/metrics.md for metrics.

[phases.slo]
title = "Serving SLOs at concurrency 4"
"""

_ENGINE = """
# The server under test: any OpenAI-compatible /v1/completions endpoint (vLLM, SGLang, TGI,
# llama.cpp, `transformers serve`). Optional keys: api = "chat", api_key_env = "NAME_OF_ENV_VAR",
# timeout (seconds per request), tokenizer (a tokenizer for exact-length token prompts).
[engines.{name}]
kind = "openai"
base_url = {base_url}
model = {model}
"""

# (gate, metric, statistic, bound for a server, bound for the embedded CPU default): one load run
# at concurrency 4 decides all six (test_slo.py). The embedded default's targets are what a loaded
# 2-core CPU meets with the tiny generated model (measured: ITL P99 1.1 s, E2E P90 11.7 s there).
_GATES = (
    ("ttft_p95", "ttft", "p95", 'max = "1500 ms"', 'max = "5 s"'),
    ("itl_p99", "itl", "p99", 'max = "200 ms"', 'max = "3 s"'),
    ("tpot_p99", "tpot", "p99", 'max = "200 ms"', 'max = "2 s"'),
    ("output_throughput", "output_throughput", "value", 'min = "10 tok/s"\nsingle = true', 'min = "5 tok/s"\nsingle = true'),
    ("error_rate", "error_rate", "rate", 'max = "1%"', 'max = "1%"'),
    ("e2e_p90", "e2e", "p90", 'max = "10 s"', 'max = "60 s"'),
)

# the budget of the scaffold's one run, which stops as soon as every gate is decided
# (load/decided.py): at most MAX_REQUESTS requests or MAX_SECONDS seconds of sending
MAX_REQUESTS, MAX_SECONDS = 10_000, 600

_TEST = '''\
"""Serving SLO gates (written by `perfgate init`): the six gates of thresholds.toml, decided on one
load run at concurrency 4 against {what}.

Run: {command}   (results, report.html and gates.xml in perfgate-results/)
"""

from __future__ import annotations

import pytest

from pytest_perfgate import Engines, LoadConfig, Perfgate, Request

GATES = ("ttft_p95", "itl_p99", "tpot_p99", "output_throughput", "error_rate", "e2e_p90")
# The run stops as soon as every gate is decided, pass or fail: it looks at 100, 200, 400, ...
# requests (the error budget spent across the looks, each look valid under the requests' measured
# dependence), or stops at its budget, where an undecided gate says how many requests would decide it.
# It says its plan before the first request and which gates are decided at each look
# (docs/statistics.md, "Sequential load runs").
MAX_REQUESTS = {max_requests:_}
MAX_SECONDS = {max_seconds}
CONCURRENCY = 4
MAX_TOKENS = {max_tokens}
TEXT = "Explain in a few sentences how a load balancer spreads requests across servers."


def requests(n: int) -> list[Request]:
    # Text prompts work with every server. For prompts of an exact token length use the engine's
    # tokenizer (pip install 'pytest-perfgate[client]'):
    #   prompts.exact_length_prompts(perfgate_engines.tokenizer(perfgate.engine), 512, n, max_tokens=MAX_TOKENS)
    return [Request(prompt=f"Request {{i}}. {{TEXT}}", max_tokens=MAX_TOKENS) for i in range(n)]


@pytest.mark.gate(*GATES)
def test_slo(perfgate: Perfgate, perfgate_engines: Engines) -> None:
    run = perfgate_engines.run_until_decided(
        perfgate.engine, requests(MAX_REQUESTS), LoadConfig(mode="concurrency", concurrency=CONCURRENCY, warmup=4),
        gates=perfgate, max_requests=MAX_REQUESTS, max_seconds=MAX_SECONDS)
    perfgate.check_all(run)  # each gate's verdict at the look that decided it; fails with the failing gates' reasons
'''

_WORKFLOW = """\
# perfgate merge gate (written by `perfgate init`): the SLO gates of thresholds.toml on every pull
# request, and on main, whose runs make the history that pull requests are compared with (run to run
# variation included: docs/statistics.md). {runner_note}
name: perfgate
on:
  pull_request:
  push:
    branches: [main]
  workflow_dispatch:
jobs:
  perfgate:
    runs-on: {runs_on}
    timeout-minutes: 30
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0  # main's commits order the history (change points, the merge gate)
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install
        run: pip install '{package}'
      - name: Validate thresholds.toml
        run: perfgate check thresholds.toml
      - name: Restore history
        uses: actions/cache/restore@v4
        with:
          path: perfgate-results/history.sqlite
          key: perfgate-history-${{{{ github.run_id }}}}
          restore-keys: perfgate-history-
      - name: SLO gates (a pull request also against main's recent runs)
        run: >-
          {command} --perfgate-out perfgate-results
          ${{{{ github.event_name == 'pull_request' && '--perfgate-baseline origin/main' || '' }}}}
      - name: Summary
        if: always()
        run: cat perfgate-results/summary.md >> "$GITHUB_STEP_SUMMARY" || true
      - name: Save history (main only)
        if: always() && github.ref == 'refs/heads/main'
        uses: actions/cache/save@v4
        with:
          path: perfgate-results/history.sqlite
          key: perfgate-history-${{{{ github.run_id }}}}
      - name: Trend site and change points
        if: always()
        run: |
          perfgate report perfgate-results --history perfgate-site --branch origin/main --branch HEAD || true
          perfgate history --changes --results perfgate-results --branch origin/main >> "$GITHUB_STEP_SUMMARY" || true
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: perfgate-results
          path: |
            perfgate-results/
            perfgate-site/
"""


def render(base_url: str | None, model: str | None, name: str) -> dict[str, str]:
    """The three files (relative path -> text) for an openai server, or the embedded default."""
    if base_url is not None:
        what = f"the {model!r} model at {base_url}"
        th = _HEADER.format(what=what) + _ENGINE.format(name=name, base_url=json.dumps(base_url), model=json.dumps(model))
        engine_line = f'engine = "{name}"\n'
        package = "pytest-perfgate[client]"
        runs_on, note = "ubuntu-latest", (f"The runner must reach {base_url}: start the server in an earlier step, "
                                          "or run on a self-hosted runner beside it.")
    else:
        what = "the embedded default engine (vLLM on this machine's CPU, tiny generated models)"
        th, engine_line = _HEADER.format(what=what), ""
        package = "pytest-perfgate[cpu]"
        runs_on, note = "ubuntu-latest", "The embedded default runs vLLM on the runner's CPU (4 GB of packages)."
    for gate, metric, stat, served, embedded in _GATES:
        bound = served if base_url is not None else embedded
        th += f'\n[gates.{gate}]\nphase = "slo"\nmetric = "{metric}"\nstatistic = "{stat}"\n{bound}\n{engine_line}'
    return {
        THRESHOLDS: th,
        TEST_FILE: _TEST.format(what=what, command=COMMAND, max_tokens=32 if base_url is not None else 16,
                                 max_requests=MAX_REQUESTS, max_seconds=MAX_SECONDS),
        WORKFLOW: _WORKFLOW.format(runner_note=note, runs_on=runs_on, package=package, command=COMMAND),
    }


def render_results(path: str, per_chunk: bool, tool: str) -> dict[str, str]:
    """``perfgate init --results FILE``: thresholds.toml for ``perfgate gate FILE`` (the served
    targets; no ITL gate for a format without per-chunk times)."""
    th = _HEADER.format(what=f"the benchmark results in {path} ({tool}); decide them with `perfgate gate {path}`")
    for gate, metric, stat, served, _ in _GATES:
        if metric == "itl" and not per_chunk:
            th += f"\n# no {gate}: {tool} keeps no per-chunk times (ITL cannot be gated on its export)\n"
            continue
        if metric == "output_throughput":  # a tool's run is one measurement: its rate as a single value
            served = 'min = "10 tok/s"\nsingle = true'
        th += f'\n[gates.{gate}]\nphase = "slo"\nmetric = "{metric}"\nstatistic = "{stat}"\n{served}\n'
    return {THRESHOLDS: th}


def _init_results(ns: argparse.Namespace) -> int:
    from ..imports import ResultsError, load_runs

    try:
        runs = load_runs(ns.results)
    except ResultsError as e:
        print(f"perfgate init: {e}", file=sys.stderr)
        return 4
    src = next(iter(runs.values())).source
    root = Path(ns.dir)
    files = render_results(ns.results, src.per_chunk, f"{src.tool}, {src.format}")
    if (root / THRESHOLDS).exists() and not ns.force:
        print(f"perfgate init: {root / THRESHOLDS} already exists; nothing written (--force overwrites)", file=sys.stderr)
        return 1
    (root / THRESHOLDS).write_text(files[THRESHOLDS], encoding="utf-8")
    problem = _validate(root / THRESHOLDS)
    if problem:
        print(f"perfgate init: the written {THRESHOLDS} does not validate: {problem}", file=sys.stderr)
        return 4
    print(f"perfgate init: wrote {root / THRESHOLDS} ({src.format}: {len(runs)} run(s))")
    print(f"run: perfgate gate {shlex.quote(ns.results)}" + ("" if root.resolve() == Path.cwd().resolve()
                                                           else f" --thresholds {shlex.quote(str(root / THRESHOLDS))}"))
    return 0


def _init(ns: argparse.Namespace) -> int:
    if ns.results is not None:
        return _init_results(ns)
    if (ns.base_url is None) != (ns.model is None):
        print("perfgate init: --base-url and --model go together (an OpenAI-compatible server); "
              "give neither for the embedded default", file=sys.stderr)
        return 2
    if ns.base_url is not None:
        u = urlsplit(ns.base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            print(f"perfgate init: --base-url {ns.base_url}: not an http(s) URL (e.g. http://127.0.0.1:8000)",
                  file=sys.stderr)
            return 2
    if not ns.name.replace("-", "").replace("_", "").isalnum():
        print(f"perfgate init: --name {ns.name}: letters, digits, '-' and '_' only", file=sys.stderr)
        return 2
    root = Path(ns.dir)
    files = render(ns.base_url, ns.model, ns.name)
    there = [rel for rel in files if (root / rel).exists()]
    if there and not ns.force:
        print(f"perfgate init: {', '.join(str(root / r) for r in there)} already exist(s); nothing written "
              "(--force overwrites)", file=sys.stderr)
        return 1
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    problem = _validate(root / THRESHOLDS)
    if problem:
        print(f"perfgate init: the written {THRESHOLDS} does not validate: {problem}", file=sys.stderr)
        return 4
    engine = f"engine {ns.name!r}: openai at {ns.base_url}, model {ns.model}" if ns.base_url else "the embedded default"
    print(f"perfgate init: wrote {', '.join(str(root / r) for r in files)} ({engine})")
    cd = "" if root.resolve() == Path.cwd().resolve() else f"cd {shlex.quote(str(root))} && "
    print(f"run: {cd}{COMMAND}")
    return 0


def _validate(path: Path) -> str | None:
    from ..config import ConfigError, load_thresholds
    from ..engines.check import engine_problems

    try:
        problems, _ = engine_problems(load_thresholds(path))
    except ConfigError as e:
        return str(e)
    return problems[0] if problems else None


def extend(sub: Any) -> None:
    """Register ``perfgate init`` on the ``perfgate`` subparsers."""
    p = sub.add_parser("init", help="scaffold thresholds.toml, a test file and a CI workflow in your repository",
                       description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("dir", nargs="?", default=".", help="the repository to write into (default: the current directory)")
    p.add_argument("--base-url", default=None, metavar="URL",
                   help="an OpenAI-compatible server, e.g. http://127.0.0.1:8000 (with --model); "
                   "default: the embedded CPU engine")
    p.add_argument("--model", default=None, metavar="NAME", help="the model name the server serves")
    p.add_argument("--name", default="server", help="the engine's name in thresholds.toml (default: server)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--results", default=None, metavar="FILE",
                   help="scaffold for `perfgate gate FILE` instead: gates decided on another tool's benchmark results")
    p.set_defaults(func=_init)
