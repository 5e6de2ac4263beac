"""Engine kind ``server``: any OpenAI-compatible server that perfgate launches, guards and stops,
talked to through the ``openai`` engine. :class:`LaunchedServer` is the lifecycle every launched
server shares (the ``vllm-server`` kind subclasses it, :mod:`.vllm_server`); the ``server`` kind
runs the command given in its table::

    [engines.sglang]
    kind = "server"
    command = ["{python}", "-m", "sglang.launch_server", "--model-path", "/m/llama", "--port", "{port}"]
    model = "/m/llama"             # the model name requests carry
    health_path = "/health"        # polled until it answers 200 (default /health)

Arguments: ``command`` (a list of strings; ``{port}``, ``{host}`` (127.0.0.1) and ``{python}`` (this
interpreter) are replaced), ``model``, ``port`` (default a free one; without ``port`` the command
must contain ``{port}``), ``health_path``, ``startup_timeout`` (seconds until ``health_path``
answers 200, default 300), ``env`` (extra environment variables for the server), and the client's
``api`` (``"completions"`` | ``"chat"``), ``tokenizer``, ``request_timeout`` (seconds per request),
``continuous_usage_stats``, ``dialect`` (default ``"auto"``: probed at start), ``metrics_path`` and
``api_key_env`` (the ``openai`` kind's, :mod:`.openai.engine`).

The lifecycle: the server runs in its own process group on a loopback port under a watchdog
(:mod:`.procguard`): the server and everything it spawns die with the session even when pytest is
SIGKILLed, and a start first stops the servers that sessions killed earlier left behind. Its
output goes to the session's engine log (``engines/<name>.log``) while the engine starts, else to a
temporary file deleted at stop; a failed start raises :class:`EngineError` with the command and the
last lines of that log. Another launched server subclasses :class:`LaunchedServer` and overrides
:meth:`~LaunchedServer.server_command` (and, if it must, :meth:`~LaunchedServer.client_args` and
:meth:`~LaunchedServer.info`), then registers its kind (:mod:`.registry`).
"""

from __future__ import annotations

import atexit
import contextlib
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
from ..runtime.redaction import redact_args, redact_command
from . import procguard
from .registry import model_args

KIND = "server"
HOST = "127.0.0.1"
SERVER_KEYS = frozenset({"command", "model", "port", "health_path", "startup_timeout", "env"})
CLIENT_KEYS = frozenset({"api", "tokenizer", "request_timeout", "continuous_usage_stats", "dialect", "metrics_path",
                         "api_key_env"})
KNOWN_KEYS = SERVER_KEYS | CLIENT_KEYS
LOG_TAIL_LINES = 40


def create(name: str, args: Mapping[str, Any]) -> LaunchedServer:
    """Build (not start) a launched server engine of the ``server`` kind."""
    return LaunchedServer(name, args)


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LaunchedServer:
    """A server subprocess plus an ``openai`` client engine; see the module docstring."""

    kind = KIND
    label = "server"  # what messages call it ("the vLLM server exited ...")
    accepted: frozenset[str] | None = KNOWN_KEYS  # the table's keys (None: any, e.g. a server's own flags)

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self.name = name
        self.args: dict[str, Any] = model_args(name, args)
        if self.accepted is not None and set(self.args) - self.accepted:
            unknown = ", ".join(sorted(set(self.args) - self.accepted))
            raise EngineError(f"[engines.{name}] {unknown}: unknown argument(s) of a {self.kind} engine "
                              f"(arguments: {', '.join(sorted(self.accepted))})")
        self.model = str(self.args["model"])
        self.api = str(self.args.get("api", "completions"))
        if self.api not in ("completions", "chat"):
            raise EngineError(f"[engines.{name}] api: must be 'completions' or 'chat', got {self.api!r}")
        env = self.args.get("env") or {}
        if not isinstance(env, Mapping):
            raise EngineError(f"[engines.{name}] env: must be a table of environment variables")
        self.env = {str(k): str(v) for k, v in env.items()}
        try:
            self.startup_timeout = float(self.args.get("startup_timeout", 300))
        except (TypeError, ValueError):
            raise EngineError(f"[engines.{name}] startup_timeout: must be a number of seconds, "
                              f"got {self.args.get('startup_timeout')!r}") from None
        self.health_path = "/" + str(self.args.get("health_path", "/health")).lstrip("/")
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
        self.check_command()

    # -- what a subclass overrides ----------------------------------------------------------------
    def check_command(self) -> None:
        """Refuse a table whose command cannot run (called by ``__init__``)."""
        cmd = self.args.get("command")
        if not isinstance(cmd, list | tuple) or not cmd or not all(isinstance(c, str) for c in cmd):
            raise EngineError(f"[engines.{self.name}] command: must be a non-empty list of strings "
                              f"(the server's command line, e.g. [\"{{python}}\", \"-m\", \"mypkg.serve\", \"--port\", \"{{port}}\"])")
        if "port" not in self.args and not any("{port}" in c for c in cmd):
            raise EngineError(f"[engines.{self.name}] command: put {{port}} where the server takes its port, "
                              "or set port (the port it listens on)")

    def server_command(self, port: int) -> list[str]:
        """The command line that starts the server on ``port`` (127.0.0.1)."""
        subs = {"{port}": str(port), "{host}": HOST, "{python}": sys.executable}
        out = []
        for part in self.args["command"]:
            for key, value in subs.items():
                part = part.replace(key, value)
            out.append(part)
        return out

    def client_args(self) -> dict[str, Any]:
        """The ``openai`` client's arguments for the started server."""
        out: dict[str, Any] = {"base_url": self.base_url, "model": self.served_model_name(), "api": self.api,
                               "tokenizer": str(self.args.get("tokenizer") or self.model)}
        for key in ("dialect", "metrics_path", "api_key_env"):
            if key in self.args:
                out[key] = self.args[key]
        if "request_timeout" in self.args:
            out["timeout"] = float(self.args["request_timeout"])
        if "continuous_usage_stats" in self.args:
            out["continuous_usage_stats"] = bool(self.args["continuous_usage_stats"])
        return out

    def served_model_name(self) -> str:
        """The model name requests carry."""
        return self.model

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def base_url(self) -> str | None:
        return f"http://{HOST}:{self.port}" if self.port else None

    def start(self) -> None:
        """Launch the server under its watchdog, wait until it is healthy, start the client."""
        if self._proc is not None:
            return
        # ``port`` from the config is used as given (a port in use then fails the start with the
        # server's own message)
        port = self.args.get("port")
        self.port = int(port) if port is not None else free_port()
        self.command = self.server_command(self.port)
        fd, log, self._own_log = server_log(self.name, self.kind)
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
            from .openai import OpenAIEngine

            self._client = OpenAIEngine(self.name, self.client_args())
            self._client.start()
        except BaseException:
            self.stop(keep_log=False)
            raise
        self.start_seconds = time.monotonic() - t0

    def _wait_healthy(self, t0: float) -> None:
        assert self._proc is not None
        url = f"{self.base_url}{self.health_path}"
        while True:
            code = self._proc.poll()
            if code is not None:
                raise EngineError(self._failure(f"the {self.label} exited with status {code} during startup"))
            if time.monotonic() - t0 > self.startup_timeout:
                raise EngineError(self._failure(
                    f"the {self.label} did not answer 200 at {url} within {self.startup_timeout:g} s"))
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)

    def _failure(self, what: str) -> str:
        return (f"[engines.{self.name}] {what}; command: {' '.join(redact_command(self.command))}\n"
                f"--- last lines of the server log ---\n{self.log_tail()}")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server's log (empty when there is none)."""
        if self._log is None or not self._log.exists():
            return ""
        text = self._log.read_bytes()[-200_000:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, keep_log: bool = False) -> None:
        """Close the client, SIGTERM the server's process group (SIGKILL after 15 s); idempotent."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.stop()
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate_group(proc)
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
            kind=self.kind,
            model=self.model,
            args=redact_args(dict(self.args)),
            command=redact_command(list(self.command)),
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


def server_log(name: str, kind: str = KIND) -> tuple[int, str, bool]:
    """Where the server writes: the file this process's standard output is pointed at while the
    engine starts (``engines/<engine>.log`` of the session, ``enginelog.redirect_output``), appended
    to and kept; else a temporary file, deleted at stop. (fd, path, whether it is our temporary)."""
    try:
        target = os.readlink("/proc/self/fd/1")
        if target.startswith("/") and os.path.isfile(target):
            return os.open(target, os.O_WRONLY | os.O_APPEND), target, False
    except OSError:
        pass
    fd, log = tempfile.mkstemp(prefix=f"perfgate-{kind}-{name}-", suffix=".log")
    return fd, log, True


def terminate_group(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
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
