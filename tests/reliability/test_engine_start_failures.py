"""Engines that fail to start fail the tests that need them with the engine's own message (log
tail), once per engine -- not a restart and a long traceback per test -- and leave nothing behind."""

from __future__ import annotations

import re
import shutil
import socket
import tempfile
import uuid
from pathlib import Path

import pytest
from reliability_helpers import one_gate, perfgate_temp_files, tagged_processes

from pytest_perfgate.runtime.timeouts import scaled

pytest_plugins = ["pytester"]


@pytest.mark.needs_engine
def test_failed_engine_starts_through_the_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    empty_model = pytester.mkdir("not-a-model")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    busy_port = busy.getsockname()[1]
    tag = uuid.uuid4().hex
    tmp = Path(tempfile.mkdtemp(prefix="reliability-tmp-"))
    monkeypatch.setenv("PERFGATE_TEST_TAG", tag)
    monkeypatch.setenv("TMPDIR", str(tmp))
    env = '{ VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1" }'
    startup = f"{scaled(200):.0f}"
    pytester.makefile(".toml", thresholds=one_gate() + f"""
[engines]
nomodel = {{ kind = "vllm-server", model = "{empty_model}", startup_timeout = {startup}, env = {env} }}
busy = {{ kind = "vllm-server", model = "embedded:target", port = {busy_port}, max_model_len = 512, startup_timeout = {startup}, env = {env} }}
badarg = {{ kind = "vllm", model = "embedded:target", no_such_arg = 1 }}
""")
    uses = {"a": "nomodel", "b": "nomodel", "c": "busy", "d": "badarg"}  # test_X starts engine uses[X]
    pytester.makepyfile(test_engines="import pytest\n" + "".join(
        f'\n@pytest.mark.engine("{e}")\ndef test_{t}(perfgate_engine):\n    pass\n' for t, e in uses.items()))
    try:
        r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rfE", timeout=scaled(600))
    finally:
        busy.close()
    out = r.stdout.str()
    r.assert_outcomes(errors=4) if "errors" in r.parseoutcomes() else r.assert_outcomes(failed=4)
    # each engine is tried once; the second test of 'nomodel' gets the cached failure
    assert out.count("starting engine 'nomodel'") == 1, out
    assert out.count("starting engine 'busy'") == 1
    # the engine's own words (vLLM's log tail), not a pytest traceback through the plugin
    assert "Invalid repository ID or local directory" in out  # vLLM's words for 'nomodel'
    assert re.search(r"last \d+ lines of \S*busy\.log:", out), out
    assert "Address already in use" in out or "address already in use" in out.lower()
    r.stdout.fnmatch_lines(["*[[]engines.badarg[]] no_such_arg: vLLM rejected the engine argument*"])
    section = out.split("ERROR at setup of test_d")[1].split("short test summary info")[0]
    assert section.count("[engines.badarg] no_such_arg") == 1, section  # the key, once
    assert "During handling of the above exception" not in out
    assert "pytest_perfgate/plugin.py" not in out and "pytest_perfgate/engines/manager.py" not in out
    # nothing left running, no log file left
    assert tagged_processes(tag) == []
    assert perfgate_temp_files(tmp) == []  # (torch may leave an empty torchinductor_<user> cache dir)
    shutil.rmtree(tmp, ignore_errors=True)
