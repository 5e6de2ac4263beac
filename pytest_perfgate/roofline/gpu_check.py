"""``python -m pytest_perfgate.roofline.gpu_check``: this CUDA machine's measured GEMM peaks and copy
bandwidth beside the known-accelerator table (a Markdown table; for scripts/gpu-check.sh, < 1 min).
Needs torch with CUDA only (no vLLM, no network)."""

from __future__ import annotations

import json
import sys

from .hardware import TERA, lookup
from .probe import gpu_peaks


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    res = gpu_peaks()
    acc = lookup(res["gpu"])
    print(f"floors: {res['gpu']} x{res['count']} (torch {res['torch']}); table entry: "
          f"{acc.name + ' (' + acc.source + ')' if acc else 'none: add [hardware] peak_tflops / memory_tb_s'}")
    print("| quantity | measured | table (dense peak) | measured / table |")
    print("|---|---|---|---|")
    for d in ("bf16", "fp16", "tf32"):
        got = res[f"gemm_{d}_tflops"]
        ref = acc.peak_flops.get(d, 0.0) / TERA if acc else 0.0
        print(f"| GEMM {d} 8192^3 | {got:,.1f} TFLOP/s | {ref:,.1f} TFLOP/s | {got / ref:.0%} |" if ref
              else f"| GEMM {d} 8192^3 | {got:,.1f} TFLOP/s | - | - |")
    bw = res["copy_tb_per_s_read_plus_write"]
    ref_bw = acc.mem_bandwidth / TERA if acc else 0.0
    print(f"| device copy (read + write) | {bw:.2f} TB/s | {ref_bw:.2f} TB/s | {bw / ref_bw:.0%} |" if ref_bw
          else f"| device copy (read + write) | {bw:.2f} TB/s | - | - |")
    print("floors-json " + json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
