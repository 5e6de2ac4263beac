"""A hostile server (issue 31): the API key echoed back through every error path of the ``openai``
client (stream error event, SSE event without ``data:``, invalid JSON in the stream, HTTP error
body, a framing error, a redirect, the dialect probe's note, the warm-up, the server's version)
reaches no output file, no engine log and no terminal line; the issue's terminal escapes arrive
nowhere raw."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_server import ESCAPES, HostileServer

pytest_plugins = ["pytester"]

KEY = "sk-perfgate-HOSTILE-9d2b7e41c0"
MODES = ("stream_error", "no_data", "bad_json", "http_error", "transport", "redirect")


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    try:
        yield server
    finally:
        server.close()


def _project(pytester: pytest.Pytester, base_url: str) -> None:
    gates = "".join(f'[gates.{m}]\nphase = "p"\nmetric = "ttft"\nstatistic = "mean"\nmax = "10 s"\n' for m in MODES)
    pytester.makefile(".toml", thresholds=f"""
[phases.p]
title = "hostile"
{gates}
[engines.bad]
kind = "openai"
base_url = "{base_url}"
model = "m"
api_key_env = "PERFGATE_HOSTILE_KEY"
timeout = 5
ready_timeout = 5
""")
    pytester.makepyfile(test_hostile="""
        import pytest
        from pytest_perfgate.contract import Request
        from pytest_perfgate.load.schedule import LoadConfig

        @pytest.mark.parametrize("mode", MODES)
        @pytest.mark.engine("bad")
        def test_mode(mode, request, perfgate_engine, perfgate_engines):
            perfgate = request.getfixturevalue("perfgate")
            run = perfgate_engines.run("bad", [Request(mode + " please", 4)],
                                       LoadConfig(num_requests=2, warmup=1 if mode == "stream_error" else 0))
            print("causes:", [r.error for r in run.records])
            perfgate.evaluate(run, gate=mode)
            pytest.fail(run.records[-1].error)
    """.replace("MODES", repr(MODES)))


def test_key_and_escapes_reach_no_output(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                         hostile: HostileServer) -> None:
    monkeypatch.setenv("PERFGATE_HOSTILE_KEY", KEY)
    _project(pytester, hostile.base_url)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-rA", "-s", "--junitxml=junit.xml")
    console = r.stdout.str() + r.stderr.str()
    (pytester.path / "console.txt").write_text(console)
    r.assert_outcomes(failed=len(MODES))
    # every path was taken (the check below is not vacuous): the server saw the key each time
    assert len(hostile.posts) >= 2 * len(MODES) + 3
    out = pytester.path / "perfgate-results"
    written = {p.name for p in out.rglob("*") if p.is_file()}
    assert {"report.html", "gates.xml", "decisions.json", "summary.md", "history.sqlite", "bad.log"} <= written
    assert any(n.endswith(".jsonl.gz") for n in written)
    leaks = {str(p.relative_to(pytester.path)): _hits(p) for p in pytester.path.rglob("*") if p.is_file()}
    assert {k: v for k, v in leaks.items() if v} == {}
    assert KEY not in console
    # the causes, masked and printable, name what happened
    for cause in ("server error in stream: internal error for Bearer ***", "malformed SSE: event without data:",
                  "invalid JSON in SSE event: {not json Bearer ***",
                  f"HTTP 400 from {hostile.base_url}/v1/completions: \\x1b[2J\\x1b[H\\x1b]0;pwned\\x07"
                  "\\x1b[32mPASSED all gates\\x1b[0m\\rX Bearer ***",
                  "connection error: ProtocolError", "HTTP 302 (redirect to http://evil.example/steal?k=Bearer+***"):
        assert cause in console, cause
    log = (out / "engines" / "bad.log").read_text()
    assert "the server rejected ignore_eos (HTTP 400: Unrecognized request argument supplied: ignore_eos (you sent " \
           "Authorization: Bearer ***) \\x1b[2J" in log
    # no raw escape, bell or carriage return from the server anywhere
    for p in [*out.rglob("*.log"), *out.glob("*.md"), *out.glob("*.json"), *out.glob("*.xml"), *out.glob("*.html")]:
        text = p.read_text("utf-8", "replace")
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text.replace("\r\n", ""), p
    assert "\x1b" not in console and "\x07" not in console and "PASSED all gates\x1b" not in console
    assert ESCAPES not in console


def _hits(p: Path) -> int:
    data = p.read_bytes()
    if p.name.endswith(".gz"):
        import gzip

        data = gzip.decompress(data)
    n = data.count(KEY.encode())
    if p.suffix == ".sqlite":
        import sqlite3

        with sqlite3.connect(p) as db:
            rows = [json.dumps(row, default=str) for t, in db.execute("select name from sqlite_master where type='table'")
                    for row in db.execute(f"select * from {t}")]  # noqa: S608 - table names from the file itself
        n += sum(row.count(KEY) for row in rows)
    return n


RAW = ("\x1b", "\x07", "\r", "\x9b")


def _printable(text: str) -> bool:
    return not any(c in text for c in RAW)


def test_the_issues_http_400_body_reaches_no_terminal_raw(capfd: pytest.CaptureFixture[str]) -> None:
    """The issue's exact body, as the dialect probe's answer and as a request's: the note, the cause
    and the gate's reason show ESC, BEL and CR escaped."""
    from pytest_perfgate.contract import Request, RequestRecord, clock, run_sync
    from pytest_perfgate.engines.openai import OpenAIEngine
    from pytest_perfgate.load.result import describe_error

    server = HostileServer(issue_probe=True)
    eng = OpenAIEngine("e", {"base_url": server.base_url, "model": "m", "timeout": 5, "ready_timeout": 5})
    try:
        eng.start()
        rec = RequestRecord(index=0)
        run_sync(eng.generate(Request(prompt="issue x", max_tokens=2), rec, clock))
    finally:
        eng.stop()
        server.close()
    out, err = capfd.readouterr()
    notes = " ".join(eng.info()["notes"])
    assert rec.error is not None and rec.error.startswith("HTTP 400: ")
    reason = describe_error(rec.error, "http://x/v1/completions")
    shown = "\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07\\x1b[32mPASSED all gates\\x1b[0m\\rX"
    assert shown in notes and shown in reason and shown in out
    for text in (out, err, notes, rec.error, reason, str(eng.info())):
        assert _printable(text), text


def test_clean_masks_secrets_and_credential_headers_and_bounds() -> None:
    from pytest_perfgate.runtime.redaction import add_secret, add_secrets_of, clean

    add_secret("s3cret-unit-A1")
    add_secrets_of({"model": "m", "api_key": "s3cret-unit-B2", "hf_token": "s3cret-unit-C3",
                    "env": {"HF_TOKEN": "s3cret-unit-D4", "OTHER": "visible-value"}, "api_key_env": "MY_VAR_NAME"})
    text = clean("a s3cret-unit-A1 b s3cret-unit-B2 c s3cret-unit-C3 d s3cret-unit-D4 e visible-value MY_VAR_NAME")
    assert "s3cret" not in text and text.count("***") == 4 and "visible-value MY_VAR_NAME" in text
    for raw, want in [
        ('{"authorization": "Bearer abc.def-123"}', '{"authorization": "Bearer ***"}'),
        ("X-Api-Key: zzz999 rest", "X-Api-Key: *** rest"), ("api-key=zzz999&x=1", "api-key=***&x=1"),
        ("GET /?api_key=zzz999", "GET /?api_key=***"), ("OPENAI_API_KEY=zzz999", "OPENAI_API_KEY=***"),
        ("token was Bearer abcdefgh)", "token was Bearer ***)"), ("Proxy-Authorization: Basic dXNlcjpw", "Proxy-Authorization: Basic ***"),
        ("a\x1b[2J\x07b\rc\r\nd\n\t e\x9b\u202e", "a\\x1b[2J\\x07b\\rc d e\\x9b\\u202e"),
        ("api_key_env = 'X'", "api_key_env = 'X'"),
    ]:
        assert clean(raw) == want, raw
        assert clean(clean(raw)) == clean(raw)  # idempotent: a cause cleaned twice reads the same
    long = clean("x" * 1000 + " Bearer abcdefghijk")
    assert len(long) == 500 and long.endswith("...") and clean(long) == long
    # cut after masking: a key at the limit never shows half of itself
    assert "s3cret" not in clean("y" * 70 + "s3cret-unit-A1", 80)
    assert clean("line1\x1b\r\nline2", None, lines=True) == "line1\\x1b\nline2"


def test_every_cause_is_cleaned_where_it_is_set() -> None:
    """``RequestRecord.error`` is the one choke point: any path that sets a cause (here an engine
    that raises with the key and escapes in its message) leaves it masked and printable."""
    from pytest_perfgate.contract import Request, RequestRecord
    from pytest_perfgate.load.runner import run_load
    from pytest_perfgate.load.schedule import LoadConfig
    from pytest_perfgate.runtime.redaction import add_secret

    add_secret("s3cret-choke-E5")
    rec = RequestRecord(index=0, error="HTTP 500: s3cret-choke-E5 \x1b]0;t\x07")
    assert rec.error == "HTTP 500: *** \\x1b]0;t\\x07"
    rec.error = None
    assert rec.ok

    class Raising:
        name, kind = "r", "raising"

        def start(self) -> None: ...
        def stop(self) -> None: ...
        def info(self) -> dict[str, str]:
            return {}

        async def counters(self) -> dict[str, float]:
            return {}

        async def generate(self, request: Request, record: RequestRecord, clock: object) -> None:
            raise RuntimeError("server said s3cret-choke-E5\x1b[2J")

    run = run_load(Raising(), [Request("p", 1)], LoadConfig(num_requests=1))  # type: ignore[arg-type]
    assert run.records[0].error == "engine raised: RuntimeError: server said ***\\x1b[2J"


def test_a_failed_starts_log_tail_is_shown_printable(tmp_path: Path) -> None:
    import contextlib

    from pytest_perfgate.session.enginelog import LoggedEngines

    log = tmp_path / "e.log"
    log.write_text("  indented line\n\x1b[31mred\x1b[0m\rX\n")
    logged = LoggedEngines(object(), tmp_path, contextlib.nullcontext, RuntimeError)
    text = logged.failure_text("engine 'e' failed to start: boom", log, True)
    assert "\n    indented line\n  \\x1b[31mred\\x1b[0m" in text and _printable(text)


@pytest.mark.parametrize("mode", ["usage=1e12", "usage+1e12", "usage=1e30", "usage=1e308", "usage+1e308",
                                  "usage=100000000000000000000000000000000000000000", "usage=NaN", "usage=-5"])
def test_absurd_usage_is_each_requests_named_error_never_a_pass(mode: str) -> None:
    """Issue 38 item 6: a server whose usage says 1e12 tokens (once, or +1e12 a chunk) for a request
    that asked 16 PASSed output_throughput at ~1e15 tok/s; 1e30 stored no samples; 1e308 was an
    OverflowError in load/metrics.py. Each request is failed naming the count; the numbers kept are
    finite int64s the store can write."""
    from pytest_perfgate.contract import Request
    from pytest_perfgate.engines.openai import OpenAIEngine
    from pytest_perfgate.load.runner import run_load
    from pytest_perfgate.load.schedule import LoadConfig
    from pytest_perfgate.verdicts.samples import SampleError

    server = HostileServer()
    eng = OpenAIEngine("e", {"base_url": server.base_url, "model": "m", "timeout": 5, "ready_timeout": 5})
    try:
        eng.start()
        run = run_load(eng, [Request(prompt=f"{mode} x", max_tokens=16)],
                       LoadConfig(mode="concurrency", concurrency=1, num_requests=3))
    finally:
        eng.stop()
        server.close()
    assert len(run.records) == 3
    for r in run.records:
        assert r.error is not None and r.error.startswith(("implausible:", "usage is not a token count", "usage disagrees",
                                                          "invalid JSON")), r.error  # 2e308: orjson's refusal
        for v in (r.output_tokens, r.prompt_tokens, *r.chunk_tokens, *r.chunk_ns):
            assert v is None or -(1 << 63) <= v < (1 << 63)
    with pytest.raises(SampleError):
        run.perfgate_data("output_throughput")
    json.dumps(run.to_dict(), allow_nan=False)  # what the store writes: finite


def test_usage_within_what_was_asked_is_kept() -> None:
    """The bound is what was asked (+ slack): a plain stream of 4 chunks, usage 4 of max_tokens 16, passes."""
    from pytest_perfgate.contract import Request
    from pytest_perfgate.engines.openai import OpenAIEngine
    from pytest_perfgate.load.runner import run_load
    from pytest_perfgate.load.schedule import LoadConfig

    server = HostileServer()
    eng = OpenAIEngine("e", {"base_url": server.base_url, "model": "m", "timeout": 5, "ready_timeout": 5})
    try:
        eng.start()
        run = run_load(eng, [Request(prompt="usage+1e0 x", max_tokens=16)],
                       LoadConfig(mode="concurrency", concurrency=1, num_requests=2))
    finally:
        eng.stop()
        server.close()
    assert [r.error for r in run.records] == [None, None]
    assert [r.output_tokens for r in run.records] == [4, 4]
