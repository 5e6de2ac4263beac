#!/usr/bin/env bash
# The main job: set up (if needed) and run the phase-1 gates on the embedded default engine
# (a real vLLM on this machine's CPU with tiny generated models). Extra arguments go to pytest,
# e.g. --perfgate-engine baseline=qwen72b --perfgate-engine speculative=qwen72b-spec on a GPU runner.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh || exit $?
exec .venv/bin/python -m pytest -m phase1 perf_tests -p no:cacheprovider -rs "$@"
