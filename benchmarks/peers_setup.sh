#!/usr/bin/env bash
# Install the peer load generators benchmarks/bench_scale.py drives side by side, each in a venv of its
# own under build/peers/ (git-ignored; never committed): build/peers/guidellm, build/peers/aiperf.
#
#   bash benchmarks/peers_setup.sh            # both
#   bash benchmarks/peers_setup.sh aiperf     # one
#
# guidellm depends on torch: a CPU wheel found in $PEERS_WHEELS (default /opt/wheels) is used when
# there is one (PyPI's default torch wheel pulls CUDA libraries: gigabytes), else PyPI's.
# Re-running it keeps what is installed (uv installs only what is missing).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${PEERS_DIR:-$ROOT/build/peers}"
PY="${PEERS_PYTHON:-python3.11}"
UV="${UV:-$(command -v uv || echo "$ROOT/.venv/bin/uv")}"
WHEELS="${PEERS_WHEELS:-/opt/wheels}"
[ -x "$UV" ] || { echo "peers_setup: uv not found (set UV=/path/to/uv)" >&2; exit 1; }
tools=("$@"); [ ${#tools[@]} -gt 0 ] || tools=(guidellm aiperf)

for tool in "${tools[@]}"; do
  venv="$DEST/$tool"
  [ -x "$venv/bin/python" ] || "$UV" venv -q --python "$PY" "$venv"
  extra=()
  if [ "$tool" = guidellm ] && ls "$WHEELS"/torch-*cpu*.whl >/dev/null 2>&1; then
    extra=(--find-links "$WHEELS" "$(ls "$WHEELS"/torch-*cpu*.whl | head -1)")
  fi
  case "$tool" in
    guidellm|aiperf) "$UV" pip install -q --python "$venv/bin/python" "${extra[@]}" "$tool" ;;
    *) echo "peers_setup: unknown tool $tool (guidellm, aiperf)" >&2; exit 2 ;;
  esac
  echo "$tool: $("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$tool'))") in $venv"
done
