"""Engine start-up of the embedded default, per vLLM start option, and the main job's phases (issue #16).

    .venv/bin/python benchmarks/bench_startup.py                      # every variant, baseline engine
    .venv/bin/python benchmarks/bench_startup.py --variants default,eager --engine speculative
    .venv/bin/python benchmarks/bench_startup.py --main-job           # also time `pytest -m phase1 perf_tests`

The embedded engine's own start options (``vllm_inproc.embedded_start``) apply underneath; a
variant's keys override them. Each variant starts in a fresh process (so nothing is shared in memory; on-disk caches are, as in
CI): the script prints the seconds to start the engine, the first request (8,000-token prompt, 8
output tokens: any lazy compilation lands here) and a second one (steady state), and stops it.
With ``--main-job`` it also runs the phase-1 suite and prints its phases from the engine manager's
own lines ("engine 'x' ready in N s", "embedded models ready in N s") and the total wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VARIANTS: dict[str, dict[str, object]] = {
    "compiled": {"enforce_eager": False},  # vLLM's CPU default: dynamo trace once + inductor
    "eager": {"enforce_eager": True},  # no torch.compile at all (perfgate's embedded default since #16)
    # dynamo trace, no inductor codegen
    "dynamo-eager": {"enforce_eager": False, "compilation_config": {"backend": "eager"}},
}

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from pytest_perfgate.engines.manager import EngineManager
from pytest_perfgate.load.prompts import exact_length_prompts
from pytest_perfgate.load.schedule import LoadConfig
extra = json.loads(sys.argv[2])
mgr = EngineManager({}, say=lambda m: None)
spec = mgr.spec(sys.argv[1])
from pytest_perfgate.config import EngineSpec
import pytest_perfgate.engines.manager as m
m.EMBEDDED[sys.argv[1]] = EngineSpec(spec.name, spec.kind, {**spec.args, **extra})
t_import = time.perf_counter() - t0
mgr.models()
t1 = time.perf_counter(); eng = mgr.get(sys.argv[1]); t_start = time.perf_counter() - t1
tok = eng.tokenizer()
reqs = exact_length_prompts(tok, 8000, 2, seed=5, max_tokens=8)
out = {"import_s": t_import, "start_s": t_start}
for i, r in enumerate(reqs):
    t = time.perf_counter()
    res = mgr.run(sys.argv[1], [r], LoadConfig(mode="sequential", num_requests=1))
    rec = res.records[0]
    out[f"request{i + 1}_s"] = time.perf_counter() - t
    out[f"ttft{i + 1}_ms"] = (rec.chunk_ns[0] - rec.sent_ns) / 1e6 if rec.chunk_ns else None
t = time.perf_counter(); mgr.close(); out["stop_s"] = time.perf_counter() - t
print("RESULT " + json.dumps(out))
"""


def run_variant(name: str, engine: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, engine, json.dumps(VARIANTS[name])], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"variant": name, "error": (p.stderr or p.stdout)[-800:], "wall_s": wall}
    return {"variant": name, **json.loads(line[7:]), "wall_s": wall}


def main_job(extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "pytest", "-m", "phase1", "perf_tests", "-p", "no:cacheprovider", "-rs", *extra]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    text = p.stdout + p.stderr
    print(f"main job: pytest -m phase1 perf_tests: {wall:.1f} s (exit {p.returncode})")
    for m in re.finditer(r"perfgate: (engine '[^']+' ready in [\d.]+ s|embedded models ready in [\d.]+ s)", text):
        print("  " + m.group(1))
    for m in re.finditer(r"^(PASSED|FAILED|SKIPPED|ERROR).*$|^\s*\S+\s+(pass|fail|inconclusive|recorded|error)\s.*$",
                         text, re.M):
        print("  " + m.group(0).strip()[:160])
    tail = re.search(r"=+ .*(passed|failed).* in [\d.]+s.*=+", text)
    if tail:
        print("  " + tail.group(0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated: {', '.join(VARIANTS)}")
    ap.add_argument("--engine", default="baseline", choices=("baseline", "speculative"))
    ap.add_argument("--main-job", action="store_true", help="also run the phase-1 suite and print its phases")
    ap.add_argument("--no-variants", action="store_true", help="only the main job")
    ns, rest = ap.parse_known_args()
    if not ns.no_variants:
        print(f"{'variant':14} {'start s':>8} {'1st req s':>9} {'TTFT1 ms':>9} {'TTFT2 ms':>9} {'stop s':>7} {'process s':>9}")
        for name in ns.variants.split(","):
            r = run_variant(name.strip(), ns.engine)
            if "error" in r:
                print(f"{name:14} ERROR: {r['error']}")
                continue
            print(f"{name:14} {r['start_s']:8.1f} {r['request1_s']:9.2f} {r['ttft1_ms']:9.0f} {r['ttft2_ms']:9.0f} "
                  f"{r['stop_s']:7.1f} {r['wall_s']:9.1f}", flush=True)
    if ns.main_job or ns.no_variants:
        main_job(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
