"""Secrets and hostile data: an API key planted in the environment appears in no output file of a
real run; hostile server answers and config strings are escaped in gates.xml / report.html / JUnit;
subprocesses never go through a shell."""

from __future__ import annotations

import json
import re
import socket
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_perfgate
from pytest_perfgate.calib import ScriptedServer

pytest_plugins = ["pytester"]

KEY = "sk-perfgate-PLANTED-7f3a9c1e5b"
HOSTILE = "</script><script>alert(1)</script> ]]> <![CDATA[ x ]]> \x01\x1b[31m & \"' <b>"
HOSTILE_BYTES = HOSTILE.encode() + b" \xff\xfe\xc3( invalid utf-8 " + f"Bearer {KEY}".encode()


class HostileServer:
    """Answers GET /version with a hostile version string and every POST with HTTP 500 and a
    hostile body (raw control characters, invalid UTF-8, markup, and the client's own key)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                got = conn.recv(65536)
                if not got:
                    return
                buf += got
            head, _, body = buf.partition(b"\r\n\r\n")
            m = re.search(rb"content-length:\s*(\d+)", head, re.I)
            need = int(m.group(1)) if m else 0
            while len(body) < need:
                body += conn.recv(65536)
            if head.startswith(b"GET /version"):
                status, payload = b"200 OK", json.dumps({"version": HOSTILE}).encode()
            else:
                status, payload = b"500 Internal Server Error", HOSTILE_BYTES
            conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(payload) + payload)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedServer, HostileServer]]:
    good = ScriptedServer(api_key=KEY)
    good.start()
    bad = HostileServer()
    try:
        yield good, bad
    finally:
        good.stop()
        bad.close()


def test_planted_key_never_written_and_hostile_data_escaped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, servers: tuple[ScriptedServer, HostileServer]
) -> None:
    good, bad = servers
    monkeypatch.setenv("PERFGATE_PLANTED_KEY", KEY)
    toml_hostile = HOSTILE.replace("\\", "\\\\").replace('"', '\\"').replace("\x01", "\\u0001").replace("\x1b", "\\u001b")
    pytester.makefile(".toml", thresholds=f"""
[phases.p]
title = "{toml_hostile}"
[fallbacks.plan]
title = "{toml_hostile}"
cost = "{toml_hostile}"
doc = "{toml_hostile}"
[gates.ttft]
phase = "p"
metric = "ttft"
statistic = "mean"
max = "1 ms"
fallback = ["plan"]
description = "{toml_hostile}"
[gates.hostile_errors]
phase = "p"
metric = "ttft"
statistic = "mean"
max = "10 s"

[engines.good]
kind = "openai"
base_url = "{good.base_url}"
model = "scripted"
api_key_env = "PERFGATE_PLANTED_KEY"
timeout = 5
[engines.bad]
kind = "openai"
base_url = "http://127.0.0.1:{bad.port}"
model = "scripted"
api_key_env = "PERFGATE_PLANTED_KEY"
timeout = 5
""")
    pytester.makepyfile(test_sec="""
        import json
        from pathlib import Path
        import pytest
        from pytest_perfgate.contract import Request
        from pytest_perfgate.load.schedule import LoadConfig

        @pytest.mark.gate("ttft")
        @pytest.mark.engine("good")
        def test_good(perfgate, perfgate_engine, perfgate_engines):
            run = perfgate_engines.run("good", [Request("a b c", 4)], LoadConfig(num_requests=10))
            assert len(run.successful) == 10, run.errors()
            Path("good-run.json").write_text(json.dumps(run.to_dict()))
            perfgate.check(run)  # fails: mean TTFT > 1 ms -> the hostile fallback title is shown

        @pytest.mark.gate("hostile_errors")
        @pytest.mark.engine("bad")
        def test_bad(perfgate, perfgate_engine, perfgate_engines):
            run = perfgate_engines.run("bad", [Request("</script> ]]> \\x01", 4)], LoadConfig(num_requests=3))
            Path("bad-run.json").write_text(json.dumps(run.to_dict()))
            print("record error:", run.records[0].error)
            perfgate.evaluate(run)
            pytest.fail(run.records[0].error)
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-rA", "-s", "--junitxml=junit.xml",
                                      "-o", "junit_family=xunit1", "--log-file=run.log", "--log-level=DEBUG")
    r.assert_outcomes(failed=2)
    console = r.stdout.str() + r.stderr.str()
    (pytester.path / "console.txt").write_text(console)
    # the hostile body reached the record (so the check below is not vacuous), redacted
    bad_run = json.loads((pytester.path / "bad-run.json").read_text())
    err = bad_run["records"][0]["error"]
    assert err.startswith("HTTP 500: </script>") and "Bearer ***" in err
    assert json.loads((pytester.path / "good-run.json").read_text())["engine"]["api_key_env"] == "PERFGATE_PLANTED_KEY"

    # 1. the key is nowhere: every file the run wrote, and the console
    files = [p for p in pytester.path.rglob("*") if p.is_file()]
    assert len(files) >= 8
    leaks = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaks == []
    assert KEY not in console

    # 2. XML parses (no raw control characters, ]]> handled), the hostile text survives as text
    out = pytester.path / "perfgate-results"
    for xml_file in (out / "gates.xml", pytester.path / "junit.xml"):
        root = ET.parse(xml_file).getroot()
        assert root is not None
    gates_text = "".join(ET.parse(out / "gates.xml").getroot().itertext())
    assert "<script>alert(1)</script>" in gates_text  # as text content, escaped in the file
    junit_text = "".join(ET.parse(pytester.path / "junit.xml").getroot().itertext())
    assert "</script>" in junit_text

    # 3. report.html: no script element at all (the page has none of its own), no raw markup from data
    html = (out / "report.html").read_bytes().decode("utf-8")  # strictly valid UTF-8
    assert "<script" not in html.lower() and "</script>" not in html.lower()
    assert "&lt;/script&gt;" in html
    assert "\x01" not in html and "\x1b" not in html
    for f in ("summary.md", "decisions.json"):
        (out / f).read_bytes().decode("utf-8")
    assert "<script>alert(1)</script>" not in (out / "summary.md").read_text()


def test_no_shell_in_the_package() -> None:
    """Subprocesses get argument lists: no shell=True, os.system, os.popen or shell-string APIs."""
    pkg = Path(pytest_perfgate.__file__).parent
    bad = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|subprocess\.getoutput|subprocess\.getstatusoutput"
                     r"|create_subprocess_shell|commands\.getoutput")
    hits = [f"{p.relative_to(pkg)}:{i}: {ln.strip()}" for p in sorted(pkg.rglob("*.py"))
            for i, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if bad.search(ln)]
    assert hits == []
    # and the calls that do exist pass lists
    calls = [ln.strip() for p in sorted(pkg.rglob("*.py")) for ln in p.read_text(encoding="utf-8").splitlines()
             if re.search(r"subprocess\.(run|Popen|call|check_call|check_output)\(", ln)]
    assert calls and all(re.search(r"\(\s*(\[|self\.command|cmd\b|command\b)", c) or c.endswith("(") for c in calls), calls


def test_engine_info_and_start_errors_mask_secret_arguments() -> None:
    """Secrets put in an engine table (an ``env`` token, ``api_key``) are masked wherever the engine
    describes itself: info() (decision record, JUnit properties) and the failed-start message."""
    from pytest_perfgate.engines.vllm_server import VLLMServerEngine, cli_args
    from pytest_perfgate.runtime.redaction import redact_args, redact_command

    args = {"model": "m", "api_key": "s3cret-A", "max_num_batched_tokens": 64, "tokenizer": "tok",
            "env": {"HF_TOKEN": "s3cret-B", "VLLM_CPU_KVCACHE_SPACE": "1"}}
    eng = VLLMServerEngine("x", args)
    eng.command = ["python", "-m", "vllm.entrypoints.openai.api_server", *cli_args(args)]
    text = json.dumps(eng.info(), default=str) + eng._failure("exited")
    assert "s3cret" not in text
    assert '"max_num_batched_tokens": 64' in text and "--max-num-batched-tokens 64" in text
    assert redact_args(args)["env"] == {"HF_TOKEN": "***", "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert redact_command(["--api-key", "k", "--hf-token=t", "--tokenizer", "tok"]) == [
        "--api-key", "***", "--hf-token=***", "--tokenizer", "tok"]
