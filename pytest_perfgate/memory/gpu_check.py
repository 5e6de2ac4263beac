"""The memory section of scripts/gpu-check.sh: ``python -m pytest_perfgate.memory.gpu_check [REPEATS]``.

Needs torch with CUDA and numpy only (no pytest, vLLM, scipy, network). Prints Markdown: the probe's
report of the churn in this process, the allocator sweep's table, the best setting's gain with its
exact bound, and the roadmap's 2x claim checked against it.
"""

from __future__ import annotations

import json
import sys
import time

from .compare import ratio_bound
from .probe import MemoryProbe
from .sweep import CUDA_SETTINGS, sweep
from .workload import Pattern, churn, torch_alloc

PATTERN = Pattern()  # thresholds.toml [params.memory] pattern: the defaults
SPEC = {"backend": "cuda", "pattern": PATTERN.to_dict(), "cuda_fraction": 0.115, "snapshot": "peaks"}


def main(argv: list[str]) -> int:
    repeats = int(argv[1]) if len(argv) > 1 else 4
    t0 = time.perf_counter()
    with MemoryProbe(snapshot="peaks") as probe:

        def step(_i: int) -> None:
            probe.sample()

        ch = churn(torch_alloc("cuda"), PATTERN, on_step=step)
        ch.live.clear()
    assert probe.report is not None
    rep = probe.report.to_dict()
    print("### memory probe: serving churn in this process (no budget)")
    print("```\n" + json.dumps({k: v for k, v in rep.items() if k != "formulas"}, indent=1) + "\n```")
    # three children side by side: 3 x 16 GiB budgets fit on one H200 (143 GiB)
    res = sweep(SPEC, CUDA_SETTINGS, repeats=repeats, timeout=100, parallel=3,
                progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"\n### allocator sweep: {repeats} runs per setting, 16 GiB budget (cuda_fraction 0.115)")
    print("\n".join(res.table()))
    best = res.best(0.95)
    print("\n" + best.statement())
    for s in res.settings[1:]:
        b = ratio_bound([max(x, 0.5) for x in res.batches(s.name)], res.batches("default"), 0.95)
        verdict = "pass" if b.lower > 2.0 else "fail" if b.upper < 2.0 else "inconclusive"
        print(f"- {s.name} vs default: x{b.estimate:.2f} (95% bounds x{b.lower:.2f} - x{b.upper:.2f}); "
              f"roadmap's 2x: {verdict}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
