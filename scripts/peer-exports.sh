#!/usr/bin/env bash
# Real per-request exports of the peer benchmark tools against the embedded vLLM server (issue 33):
# installs each tool in its own venv under $PEER_VENVS (default /work/peer-venvs), then runs
# scripts/peer_exports.py OUT, which starts the server and runs each tool with one workload
# (N requests of 64-token random prompts, 16 forced output tokens, 4 in flight, streaming).
#   bash scripts/peer-exports.sh OUT [N] [TOOLS]     TOOLS default: vllm,aiperf,inference-perf,guidellm
# vLLM's bench is this repository's venv (the [cpu] extra). guidellm pulls torch: the CPU wheel
# index is used (PyPI's is the CUDA build, 6 GB); a tool that does not install is left out.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:?usage: peer-exports.sh OUT [N] [TOOLS]}
N=${2:-20}
TOOLS=${3:-vllm,aiperf,inference-perf,guidellm}
VENVS=${PEER_VENVS:-/work/peer-venvs}
UV=(.venv/bin/python -m uv)
mkdir -p "$VENVS"
install() {  # tool python-version packages... (extra uv pip arguments after --)
  local tool=$1 py=$2; shift 2
  [ -x "$VENVS/$tool/bin/python" ] && return 0
  "${UV[@]}" venv -q --python "$py" "$VENVS/$tool" && "${UV[@]}" pip install -q --python "$VENVS/$tool/bin/python" "$@"
}
ran=vllm
for tool in ${TOOLS//,/ }; do
  case $tool in
    aiperf) install aiperf 3.11 aiperf==0.13.0 && ran+=,aiperf ;;
    inference-perf) install inference-perf 3.12 inference-perf==0.7.0 && ran+=,inference-perf ;;  # needs Python >= 3.12
    guidellm) install guidellm 3.11 guidellm==0.8.1 torch --extra-index-url https://download.pytorch.org/whl/cpu \
                --index-strategy unsafe-best-match && ran+=,guidellm ;;
  esac || echo "peer-exports: $tool did not install; left out"
done
exec .venv/bin/python scripts/peer_exports.py "$OUT" --requests "$N" --tools "$ran"
