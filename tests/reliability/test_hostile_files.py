"""Hostile files: a thresholds.toml or a trace built to break the parser is one line naming the
file (exit 4 / a usage error / a TraceError), never a traceback (issue 31)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.config import ConfigError, load_thresholds
from pytest_perfgate.load import traces

pytest_plugins = ["pytester"]

FIXTURE = Path(__file__).parents[1] / "fixtures" / "thresholds" / "fuzz_valid.toml"


def _nested(depth: int) -> str:
    return FIXTURE.read_text() + "\n[params.deep]\nx = " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize("depth", [40, 600, 5000])
def test_deeply_nested_toml_is_one_line_naming_the_file(tmp_path: Path, depth: int) -> None:
    """40 levels parse but are refused; 600 and 5000 exhaust tomllib's recursion (RecursionError)."""
    p = tmp_path / "thresholds.toml"
    p.write_text(_nested(depth))
    with pytest.raises(ConfigError, match=r"^thresholds\.toml: .*nested too deeply"):
        load_thresholds(p)


def test_deeply_nested_toml_check_exits_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "thresholds.toml").write_text(_nested(600))
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 4
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err and "RecursionError" not in out.out + out.err
    lines = [ln for ln in out.err.splitlines() if "thresholds.toml" in ln]
    assert len(lines) == 1 and "nested too deeply" in lines[0], out.err


def test_deeply_nested_toml_is_a_usage_error_in_pytest(pytester: pytest.Pytester) -> None:
    (pytester.path / "thresholds.toml").write_text(_nested(600))
    pytester.makepyfile("def test_a():\n    pass\n")
    r = pytester.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: perfgate: thresholds.toml: nested too deeply*"])
    assert "INTERNALERROR" not in r.stdout.str() + r.stderr.str()
    assert "Traceback" not in r.stdout.str() + r.stderr.str()


# -- traces ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "raw", "line"), [
    ("junk.json", b"[\n" + bytes(range(256)) * 4, 3),  # binary junk (its byte 10 ends line 2)
    ("junk.jsonl", b'{"prompt": "a"}\n{"prompt": "b\xff\xfe"}\n', 2),
    ("junk.csv", b"Timestamp,Request tokens,Response tokens\n1,2,3\n" + b"4,\xc3(,6\n" * 3, 3),
    ("cut.jsonl", b'{"prompt": "a"}\n{"prompt": "\xe2\x82', 2),  # ends inside a UTF-8 sequence
    ("block.jsonl", b'{"prompt": "a"}\n' * 70_000 + b"\xff", 70_001),  # past the 1 MiB scan block
])
def test_a_trace_that_is_not_utf8_is_a_trace_error_naming_file_and_line(tmp_path: Path, name: str, raw: bytes,
                                                                        line: int) -> None:
    p = tmp_path / name
    p.write_bytes(raw)
    with pytest.raises(traces.TraceError, match=rf"^{re.escape(str(p))}:{line}: not UTF-8 text \(byte [\d,]+\)"):
        traces.load(p, tokenizer=object())


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_a_trace_nested_1000_levels_is_a_trace_error_naming_file_and_line(tmp_path: Path, name: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    row = '{"id": "c", "conversations": ' + deep + "}"
    p = tmp_path / name
    p.write_text(f"[\n{row}\n]\n" if name.endswith(".json") else '{"prompt": "a"}\n{"prompt": ' + deep + "}\n")
    with pytest.raises(traces.TraceError, match=rf"^{re.escape(str(p))}:2: JSON nested too deeply"):
        traces.load(p)


class _CountingText(str):
    """A file's text that adds up how many characters ``count`` scans."""

    scanned = 0

    def count(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        lo, hi, _ = slice(start, end).indices(len(self))
        _CountingText.scanned += max(0, hi - lo)
        return super().count(sub, lo, hi)


def test_sharegpt_line_numbers_are_counted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: each entry's line number was counted from the file's start (quadratic: 20k
    conversations took 26 s, the public release hours). The text is scanned once, whatever the size,
    and the file:line of a bad entry is unchanged."""
    convs = [{"id": f"c{k}", "conversations": [{"from": "human", "value": f"q{k}"}, {"from": "gpt", "value": "a"}]}
             for k in range(2000)]
    convs[1500] = {"id": "bad"}
    text = json.dumps(convs, indent=1)
    p = tmp_path / "chat.json"
    p.write_text(text)
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: _CountingText(real(self, *a, **k)))
    bad_line = text.count("\n", 0, text.index('"id": "bad"'))  # the line of its opening brace
    with pytest.raises(traces.TraceError, match=rf"^{re.escape(str(p))}:{bad_line}: no 'conversations' list"):
        traces.load(p)
    assert _CountingText.scanned <= len(text), f"{_CountingText.scanned:,} characters scanned for {len(text):,}"
