"""Shared helpers of the reliability tests: a scripted server, tiny-model vLLM server arguments,
process / port / temp-file snapshots."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.engines.vllm_inproc import EMBEDDED_CPU_OPTIONS
from pytest_perfgate.runtime.timeouts import scaled

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

# a real vLLM bench export (tests/imports/data) and one gate on it, for the `perfgate gate` tests
BENCH_EXPORT = Path(__file__).parents[1] / "imports" / "data" / "vllm-bench-serve.json"


def ttft_p50_gates(limit: str = "300 ms") -> str:
    """A thresholds file with one gate, TTFT P50 at most ``limit``."""
    return f'[phases.p]\n[gates.ttft_p50]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "{limit}"\n'


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.002, itl=0.001)) as srv:
        yield srv


def closed_port() -> int:
    """A loopback port nobody listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def one_gate(gate: str = "g", statistic: str = "p50", limit: str = "1 s") -> str:
    """A thresholds document: phase ``p`` with one TTFT gate (append engine tables to it)."""
    return f'[phases.p]\n[gates.{gate}]\nphase = "p"\nmetric = "ttft"\nstatistic = "{statistic}"\nmax = "{limit}"\n'


def tiny_server_args(model: str, **extra: Any) -> dict[str, Any]:
    """A small, fast-starting vLLM server on the tiny target model (no speculation)."""
    return {
        "model": model, "dtype": "float32", "max_model_len": 512, "gpu_memory_utilization": 0.3, **EMBEDDED_CPU_OPTIONS,
        "startup_timeout": scaled(240), "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}, **extra,
    }  # fmt: skip


def tagged_processes(tag: str) -> list[str]:
    """Live processes whose environment carries ``PERFGATE_TEST_TAG=tag`` (children inherit it)."""
    psutil = pytest.importorskip("psutil")
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if p.environ().get("PERFGATE_TEST_TAG") == tag and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid}: {' '.join(p.info['cmdline'] or [])[:200]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def perfgate_temp_files(tmpdir: Path) -> list[str]:
    return sorted(str(p) for p in tmpdir.rglob("*perfgate*"))
