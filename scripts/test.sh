#!/usr/bin/env bash
# Set up (if needed) and run the plugin's own tests: lint, types (mypy strict), import layering (import-linter),
# then pytest (unit, plugin behaviour, real vLLM engines and servers on the CPU, fault injection, the phase-1 suite).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh || exit $?
.venv/bin/ruff check . || exit $?
.venv/bin/mypy pytest_perfgate || exit $?
.venv/bin/mypy tests perf_tests conftest.py || exit $?  # the tests too (pyproject.toml: a relaxed override for tests.*)
.venv/bin/lint-imports --no-cache || exit $?  # the layering contracts in pyproject.toml [tool.importlinter]
# two pytest-xdist workers: the seeded simulations on either, everything holding a machine-wide resource
# (vLLM, PostgreSQL, Ray, namespaces...) one at a time on one (tests/conftest.py: its scheduler);
# PERFGATE_TEST_WORKERS=0 runs them in this process, one after another
workers=${PERFGATE_TEST_WORKERS:-2}
xdist=(); [[ "$workers" == 0 ]] || xdist=(-n "$workers")
exec .venv/bin/python -m pytest tests -p no:cacheprovider "${xdist[@]}" "$@"
