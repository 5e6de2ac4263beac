"""Engine start-up of the embedded default, per vLLM start option, and the main job's phases (issue #16).

    .venv/bin/python benchmarks/bench_startup.py                          # eager, eager-spawn, eager-mp
    .venv/bin/python benchmarks/bench_startup.py --variants compiled --engines baseline
    .venv/bin/python benchmarks/bench_startup.py --no-variants --main-job  # time `pytest -m phase1 perf_tests`
    .venv/bin/python benchmarks/bench_startup.py --exit 5                  # Python's shutdown with vLLM loaded

The embedded engine's own start options (``vllm_inproc.embedded_start``) apply underneath; a
variant's keys and environment override them. Each variant runs in a fresh process (nothing shared
in memory; on-disk caches are, as in CI) that starts the engines one after the other, as the suite
does (baseline, then speculative): per engine it prints the seconds to start it, the first request
(8,000-token prompt, 8 output tokens: any lazy compilation lands here) and a second one (steady
state), and the stop; per process the import of the plugin, the embedded models, the total and the
load average. With ``--main-job`` it also runs the phase-1 suite and prints its phases from the
engine manager's own lines ("engine 'x' ready in N s", "embedded models ready in N s") and the
total wall time.
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

# name: (engine arguments over the embedded defaults, environment)
VARIANTS: dict[str, tuple[dict[str, object], dict[str, str]]] = {
    # perfgate's embedded default since #16: eager, model in the engine-core process ("uni"),
    # engine core forked from a warm fork server (pytest_perfgate.engines.vllm_forkserver)
    "eager": ({}, {}),
    "eager-spawn": ({}, {"PERFGATE_VLLM_FORKSERVER": "0"}),  # the same, engine core spawned by vLLM
    "eager-mp": ({"distributed_executor_backend": "mp"}, {}),  # vLLM's CPU default executor (worker process)
    "compiled": ({"enforce_eager": False, "distributed_executor_backend": "mp"}, {}),  # vLLM's CPU default
    # dynamo trace, no inductor codegen
    "dynamo-eager": ({"enforce_eager": False, "compilation_config": {"backend": "eager"}}, {}),
}

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from pytest_perfgate.config import EngineSpec
from pytest_perfgate.engines.manager import EMBEDDED, EngineManager
from pytest_perfgate.load.prompts import exact_length_prompts
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
extra = json.loads(sys.argv[2])
specs = {n: EngineSpec(n, EMBEDDED[n].kind, {**EMBEDDED[n].args, **extra}) for n in sys.argv[1].split(",")}
mgr = EngineManager(specs, say=lambda m: None)
out = {"import_s": time.perf_counter() - t0}
t = time.perf_counter(); mgr.models(); out["models_s"] = time.perf_counter() - t
for name in specs:
    t1 = time.perf_counter(); eng = mgr.get(name); out[f"{name}.start_s"] = time.perf_counter() - t1
    reqs = exact_length_prompts(eng.tokenizer(), 8000, 2, seed=5, max_tokens=8)
    for i, r in enumerate(reqs):
        t = time.perf_counter()
        rec = run_load(eng, [r], LoadConfig(mode="sequential", num_requests=1)).records[0]
        out[f"{name}.request{i + 1}_s"] = time.perf_counter() - t
        out[f"{name}.ttft{i + 1}_ms"] = (rec.chunk_ns[0] - rec.sent_ns) / 1e6 if rec.chunk_ns else None
    t = time.perf_counter(); mgr.stop(); out[f"{name}.stop_s"] = time.perf_counter() - t
print("RESULT " + json.dumps(out))
"""


def run_variant(name: str, engines: str) -> dict[str, object]:
    extra, env_extra = VARIANTS[name]
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, engines, json.dumps(extra)], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"variant": name, "error": (p.stderr or p.stdout)[-800:], "wall_s": wall}
    return {"variant": name, **json.loads(line[7:]), "wall_s": wall}


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main_job(extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "pytest", "-m", "phase1", "perf_tests", "-p", "no:cacheprovider", "-rs", *extra]
    t = time.perf_counter()
    before = load()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    text = p.stdout + p.stderr
    print(f"main job: pytest -m phase1 perf_tests: {wall:.1f} s (exit {p.returncode}; {before} -> {load()})")
    for m in re.finditer(r"perfgate: (engine '[^']+' ready in [\d.]+ s|embedded models ready in [\d.]+ s)", text):
        print("  " + m.group(1))
    for m in re.finditer(r"^(PASSED|FAILED|SKIPPED|ERROR).*$|^\s*\S+\s+(pass|fail|inconclusive|recorded|error)\s.*$",
                         text, re.M):
        print("  " + m.group(0).strip()[:160])
    tail = re.search(r"=+ .*(passed|failed).* in [\d.]+s.*=+", text)
    if tail:
        print("  " + tail.group(0))


EXIT_CHILD = r"""
import atexit, gc, sys, time
if sys.argv[1] == "frozen":
    atexit.register(gc.freeze)  # what the plugin registers (startup.freeze_heap_at_exit)
from vllm.v1.engine.async_llm import AsyncLLM
import vllm.v1.engine.core, vllm.v1.worker.cpu_model_runner
print(time.time(), flush=True)
"""


def exit_times(rounds: int) -> None:
    """Seconds from a process's last statement to its exit, with torch + vLLM imported: Python's
    own shutdown, as it is and with the heap frozen first (the plugin's exit handler)."""
    got: dict[str, list[float]] = {"plain": [], "frozen": []}
    for _ in range(rounds):
        for mode in got:  # interleaved
            p = subprocess.run([sys.executable, "-c", EXIT_CHILD, mode], capture_output=True, text=True, check=True)
            got[mode].append(time.time() - float(p.stdout.split()[-1]))
    for mode, xs in got.items():
        print(f"interpreter exit, {mode:6}: " + ", ".join(f"{x:.2f}" for x in xs) + " s")
    ratio = sorted(got["plain"])[rounds // 2] / sorted(got["frozen"])[rounds // 2]
    print(f"median ratio plain / frozen: {ratio:.1f}x; {load()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="eager,eager-spawn,eager-mp", help=f"comma-separated: {', '.join(VARIANTS)}")
    ap.add_argument("--engines", default="baseline,speculative",
                    help="engines started one after the other in one process, as in the suite")
    ap.add_argument("--main-job", action="store_true", help="also run the phase-1 suite and print its phases")
    ap.add_argument("--no-variants", action="store_true", help="only the main job")
    ap.add_argument("--exit", type=int, default=0, metavar="N",
                    help="only the interpreter's exit with vLLM imported, N rounds, plain vs frozen heap")
    ns, rest = ap.parse_known_args()
    if ns.exit:
        exit_times(ns.exit)
        return 0
    if not ns.no_variants:
        print(f"{'variant':13} {'engine':12} {'start s':>8} {'1st req s':>9} {'TTFT1 ms':>9} {'TTFT2 ms':>9} "
              f"{'stop s':>7}   (process: import, models, total)")
        for name in ns.variants.split(","):
            before = load()
            r = run_variant(name.strip(), ns.engines)
            if "error" in r:
                print(f"{name:13} ERROR: {r['error']}")
                continue
            for e in ns.engines.split(","):
                print(f"{name:13} {e:12} {r[e + '.start_s']:8.1f} {r[e + '.request1_s']:9.2f} "
                      f"{r[e + '.ttft1_ms']:9.0f} {r[e + '.ttft2_ms']:9.0f} {r[e + '.stop_s']:7.1f}")
            print(f"{'':13} {'process':12} import {r['import_s']:.1f} s, models {r['models_s']:.1f} s, "
                  f"total {r['wall_s']:.1f} s; {before} -> {load()}", flush=True)
    if ns.main_job or ns.no_variants:
        main_job(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
