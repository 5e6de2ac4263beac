#!/usr/bin/env bash
# Set up (if needed) and run the plugin's own tests (unit, plugin behaviour, real vLLM engines).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh || exit $?
exec .venv/bin/python -m pytest tests -p no:cacheprovider "$@"
