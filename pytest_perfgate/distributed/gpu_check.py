"""The phase-3 GPU paths on one CUDA machine (scripts/gpu-check.sh): ``python -m
pytest_perfgate.distributed.gpu_check``. NCCL all-reduce on 2 ranks of 2 GPUs, else at world size 1
(two NCCL ranks on one GPU are refused; the settings sweep is then skipped, see :func:`world`), CUDA-event timing of every iteration, the nccl-tests sweep plus the decode-step
message of a Llama-70B-shaped model, the per-token model, and a sweep of real NCCL settings
(``[params.phase3.tuning.nccl]`` style), each config in fresh rank processes. Prints Markdown.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .bench import BenchSpec
from .launch import Rank, launch
from .pertoken import per_token_times, upper_rank
from .sizes import decode_shape, sweep
from .tuning import CommConfig, parse_configs, run_sweep

LLAMA70 = {"num_hidden_layers": 80, "hidden_size": 8192, "dtype": "bfloat16"}
NCCL_CONFIGS = {"ring_ll": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"},
                "ring_simple": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}}


def world(backend: str, gpus: int) -> tuple[int, str]:
    """(ranks, the sentence saying what they can measure). NCCL refuses two ranks on one GPU, and at
    world size 1 its all-reduce is a local copy: busbw is 0 and no algorithm or protocol can matter,
    so the settings sweep needs two GPUs (two ranks, one each)."""
    if backend != "nccl":
        return 2, "gloo, 2 CPU ranks (dry run of the GPU check)"
    if gpus >= 2:
        return 2, f"NCCL, 2 ranks on 2 of {gpus} GPUs: latency, busbw and the settings sweep are measured"
    return 1, ("NCCL, 1 rank on the only GPU: call latency only; busbw is 0 and NCCL_ALGO/NCCL_PROTO cannot "
               "matter at world size 1, so the settings sweep is skipped (needs >= 2 GPUs)")


def _gpus(backend: str) -> int:
    if backend != "nccl":
        return 0
    import torch

    return int(torch.cuda.device_count())


def main(argv: list[str]) -> int:
    """``--cpu``: the same script on gloo (a dry run of the GPU check on a CPU machine)."""
    backend, dtype = ("gloo", "float32") if "--cpu" in argv else ("nccl", "bfloat16")
    t0 = time.monotonic()
    n, said = world(backend, _gpus(backend))
    ranks = [Rank() for _ in range(n)]
    shape = decode_shape(LLAMA70, batch=8)
    top = "256M" if backend == "nccl" else "1M"
    sizes = tuple(sorted({*sweep("8", top, 16), shape.message_bytes}))
    doc = launch(BenchSpec(sizes, iters=300, warmup=20, dtype=dtype), ranks, backend=backend, timeout_s=100)
    print(f"{said}\n\n{backend} all-reduce, world size {doc['world_size']}, {doc['timing']}, torch {doc['torch']}, "
          f"comm env {doc['comm_env']}\n")
    print("| bytes | n | P50 us | P99 us | algbw GB/s (P50) | busbw GB/s (P50) |\n|---|---|---|---|---|---|")
    for s in doc["sizes"]:
        print(f"| {s['bytes']} | {s['n']} | {s['p50_us']:.1f} | {s['p99_us']:.1f} | {s['algbw_GBps_p50']:.3f} "
              f"| {s['busbw_GBps_p50']:.3f} |")
    tokens = 400 if backend == "nccl" else 20  # the CPU dry run: 2 gloo ranks on shared cores
    dec = launch(BenchSpec((shape.message_bytes,), iters=tokens * shape.allreduces_per_token, warmup=20, dtype=dtype),
                 ranks, backend=backend, timeout_s=100)
    tok = np.sort(per_token_times(np.asarray(dec["sizes"][0]["times_us"]) / 1e6, shape.allreduces_per_token))
    k = upper_rank(tok.size, 0.99, 0.05)
    up = f"{tok[k - 1] * 1e3:.3f} ms" if k else "none (too few tokens)"
    print(f"\nper-token model, Llama-70B shape, batch 8, world size {n}: {shape.allreduces_per_token} all-reduces of "
          f"{shape.message_bytes} B per token, {tok.size} measured tokens: P50 {np.median(tok) * 1e3:.3f} ms, "
          f"P99 {np.quantile(tok, 0.99, method='inverted_cdf') * 1e3:.3f} ms (95% upper bound {up})\n")
    if n < 2:
        print(f"NCCL settings sweep: skipped: world size {n} ({said})")
    else:
        _sweep(ranks, backend, BenchSpec((shape.message_bytes,), iters=400 if backend == "nccl" else 100, warmup=20, dtype=dtype))
    print(f"\nphase-3 GPU check: {time.monotonic() - t0:.0f} s")
    return 0


def _sweep(ranks: list[Rank], backend: str, spec: BenchSpec) -> None:
    def measure(c: CommConfig) -> tuple[list[float], dict[str, str]]:
        d = launch(spec, ranks, backend=backend, comm=c.env, timeout_s=60)
        return [t / 1e6 for t in d["sizes"][0]["times_us"]], d["comm_env"]

    configs = NCCL_CONFIGS if backend == "nccl" else {"omp1": {"OMP_NUM_THREADS": "1"}}
    res = run_sweep(parse_configs(configs), measure, 0.95)
    print(f"{backend} settings sweep, world size {len(ranks)}:\n")
    print("| config | env | P50 us | P99 us | gain us (lower bound) |\n|---|---|---|---|---|")
    for r in res.table():
        print(f"| {r['config']} | {r['env']} | {r['p50_us']:.1f} | {r['p99_us']:.1f} | "
              f"{r['gain_us']:.1f} ({r['gain_lower_us']:.1f}) |")
    print(f"\n{res.summary()}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
