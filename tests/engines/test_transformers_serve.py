"""The openai kind against a real ``transformers serve`` (Hugging Face's OpenAI-compatible server)
on the tiny generated target model, started by the test on a free loopback port and killed at the
end. It rejects ``ignore_eos`` (422) and token-id prompts (400), ignores ``stream_options``, sends
no ``data: [DONE]`` and has no ``/metrics``: with only ``base_url`` and ``model`` configured, the
six SLO gates are decided (pass/fail), never an error."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from slo_session import SLO_TOML, run_slo_session

from pytest_perfgate.engines.vllm_server import free_port
from pytest_perfgate.runtime.timeouts import scaled

CLI = Path(sys.executable).parent / "transformers"
EXACT_PROMPTS = ("reqs = exact_length_prompts(perfgate_engines.get('mystack').tokenizer(), 16, 8, max_tokens=8)"
                 "  # token ids: sent as text")

pytestmark = pytest.mark.skipif(not CLI.exists(), reason=f"no transformers CLI at {CLI}")


@pytest.fixture(scope="module")
def transformers_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    pytest.importorskip("accelerate", reason="transformers serve needs accelerate (the test extra)")
    from pytest_perfgate.models import make_models

    model = str(make_models().target)
    port = free_port()
    log = tmp_path_factory.mktemp("transformers-serve") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(CLI), "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", model],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + scaled(180)
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(urllib.error.URLError, OSError):
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not answer /health at {url}:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url, model
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_six_slo_gates_decided_against_transformers_serve(pytester: pytest.Pytester,
                                                          transformers_serve: tuple[str, str]) -> None:
    url, model = transformers_serve
    toml = SLO_TOML.format(ttft="30 s", itl="10 s", throughput="0.1 tok/s", e2e="120 s", base_url=url, model=model)
    r, outcomes, run = run_slo_session(pytester, toml, EXACT_PROMPTS, 300)
    assert run["ok"] == run["n"] == 300, run["errors"]
    assert set(outcomes.values()) <= {"pass", "fail", "inconclusive"} and len(outcomes) == 6, outcomes
    assert outcomes["error_rate"] == "pass" and outcomes["output_throughput"] == "pass", outcomes
    engine = run["engine"]
    assert isinstance(engine, dict) and engine["dialect"] == "openai" and engine["output_lengths"].startswith("not forced")
    notes = "\n".join(engine["notes"])
    assert "rejected ignore_eos (HTTP 422: Unexpected fields in the request: {'ignore_eos'})" in notes
    assert "rejected token-id prompts (HTTP 400: prompt must be a string.)" in notes
    assert "streams end without data: [DONE]" in notes and "counters: not available from this server" in notes
    r.stdout.fnmatch_lines(["*engine 'mystack': dialect openai (dialect = \"auto\"*"])
