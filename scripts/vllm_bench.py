"""Run ``vllm bench serve`` from this venv (vLLM's CPU build cannot run its ``vllm`` console entry
point: it reads the version of the distribution ``vllm``), against a server already up.

``python scripts/vllm_bench.py [vllm bench serve arguments...]`` is ``vllm bench serve ...``: the
same argument parser (``vllm.benchmarks.serve.add_cli_args``) and ``main``.

``python scripts/vllm_bench.py --embedded OUT_DIR [bench arguments...]`` starts the embedded vLLM
server (the tiny generated target model on this machine's CPU, ``perfgate models make``) through
perfgate's ``vllm-server`` engine, runs the bench against it with ``--save-result --save-detailed``
into ``OUT_DIR``, stops the server, and prints the command it ran.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bench(argv: list[str]) -> None:
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(argv))


def embedded_server() -> object:
    from pytest_perfgate.engines.registry import create
    from pytest_perfgate.engines.vllm_inproc import EMBEDDED_CPU_OPTIONS
    from pytest_perfgate.models import make_models

    models = make_models()
    args = {"model": str(models.target), "dtype": "float32", "max_model_len": 2048,
            "enable_prefix_caching": False, **EMBEDDED_CPU_OPTIONS, "startup_timeout": 600,
            "env": {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}}
    engine = create("bench-target", "vllm-server", args)
    engine.start()
    return engine


def embedded(out: Path, extra: list[str]) -> list[str]:
    """Start the embedded server, run the bench with ``extra`` into ``out``; the argument list run."""
    engine = embedded_server()
    try:
        info = engine.info()  # type: ignore[attr-defined]
        argv = ["--backend", "vllm", "--base-url", str(info["base_url"]), "--model", str(info["model"]),
                "--save-result", "--save-detailed", "--result-dir", str(out), *extra]
        bench(argv)
        return argv
    finally:
        engine.stop()  # type: ignore[attr-defined]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--embedded"]:
        ran = embedded(Path(sys.argv[2]), sys.argv[3:])
        print("ran: vllm bench serve " + " ".join(ran))
    else:
        bench(sys.argv[1:])
