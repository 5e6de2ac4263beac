"""A rate sweep and the capacity gate on the embedded vLLM (CPU, the tiny generated target, no
speculation): 128-token prompts, 16 output tokens, Poisson arrivals, rates doubling until the server
saturates. P50 terms (TTFT <= 2 s, TPOT <= 0.5 s) so that a few dozen requests a level decide; the
point is the curve, the saturation check and the knee.  ``python benchmarks/bench_sweep.py [N]``
(N requests a level, default 40); figures in docs/workloads.md.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from pathlib import Path  # noqa: E402

from pytest_perfgate.config import parse_thresholds  # noqa: E402
from pytest_perfgate.engines.registry import create  # noqa: E402
from pytest_perfgate.engines.vllm_inproc import EMBEDDED_CPU_OPTIONS  # noqa: E402
from pytest_perfgate.load.capacity import Term  # noqa: E402
from pytest_perfgate.load.prompts import exact_length_prompts  # noqa: E402
from pytest_perfgate.load.schedule import LoadConfig  # noqa: E402
from pytest_perfgate.load.sweep import sweep  # noqa: E402
from pytest_perfgate.models import make_models  # noqa: E402
from pytest_perfgate.verdicts.verdict import evaluate  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    models = make_models()
    eng = create("tiny", "vllm", {"model": str(models.target), "dtype": "float32", "max_model_len": 2048,
                                  "gpu_memory_utilization": 0.3, "enable_prefix_caching": False,
                                  **EMBEDDED_CPU_OPTIONS})
    t0 = time.monotonic()
    eng.start()
    print(f"engine started in {time.monotonic() - t0:.1f} s")
    try:
        reqs = exact_length_prompts(eng.tokenizer(), 128, n, seed=3, max_tokens=16)
        terms = [Term("ttft", 2.0, 0.5), Term("tpot", 0.5, 0.5)]
        t0 = time.monotonic()
        sw = sweep(eng, reqs, [1, 2, 4, 8, 16, 32, 64], terms=terms, full_curve=True,
                   base=LoadConfig(mode="poisson", rate=1, num_requests=n, warmup=2, seed=1))
        print(f"sweep took {time.monotonic() - t0:.1f} s")
        assert sw.verdict is not None
        print(sw.verdict.text())
        for p in sw.curve():
            print("  " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in p.items()))
        # the same sweep through a thresholds.toml capacity gate (the normal evaluation path)
        th = parse_thresholds({"phases": {"bench": {}}, "gates": {"capacity": {
            "phase": "bench", "metric": "request_throughput", "statistic": "sustained", "min": "2 req/s",
            "slo": {"ttft_p50": "2 s", "tpot_p50": "500 ms"}}}}, Path("bench_sweep.toml"))
        print(evaluate(th.gate("capacity"), sw, thresholds=th).summary())
    finally:
        eng.stop()


if __name__ == "__main__":
    main()
