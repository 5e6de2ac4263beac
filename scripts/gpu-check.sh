#!/usr/bin/env bash
# Runs every GPU-capable part of phases 2 and 3, the memory gates and the physical floors on one CUDA
# machine (torch + transformers + timm; no vLLM, no network needed) and writes all tables to one file.
# Usage: bash scripts/gpu-check.sh [OUT_DIR]   (default: gpu-check-results/). Budget: < 8 minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-gpu-check-results}
mkdir -p "$OUT"
REPORT="$OUT/gpu-check.md"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
: > "$REPORT"
status=0
section() {  # section TITLE TIMEOUT_S COMMAND...
  local title=$1 limit=$2; shift 2
  echo "== $title" | tee -a "$REPORT"
  local t0=$(date +%s)
  timeout "$limit" "$@" >>"$REPORT" 2>"$OUT/$(echo "$title" | tr ' /' '__').err" || { echo "   FAILED (rc=$?, see $OUT)" | tee -a "$REPORT"; status=1; }
  echo "   ($(( $(date +%s) - t0 )) s)" | tee -a "$REPORT"
}
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name(0))" | tee -a "$REPORT" || exit 2

# --- sections (each engineer adds one line; keep the total under 8 minutes) ---
section "memory: probe, allocator sweep, max safe batch" 120 "$PY" -m pytest_perfgate.memory.gpucheck 4
section "phase3: NCCL all-reduce sizes, per-token model, NCCL settings sweep" 120 "$PY" -m pytest_perfgate.distributed.gpucheck
section "phase2: CLIP ViT-L/14-336 bf16 vs INT8 vs FP8 throughput, agreement, memory" 180 "$PY" -m pytest_perfgate.vision.gpu_check
section "floors: measured GEMM peaks and copy bandwidth vs the known-accelerator table" 60 "$PY" -m pytest_perfgate.roofline.gpu_check

echo "tables written to $REPORT"
exit $status
