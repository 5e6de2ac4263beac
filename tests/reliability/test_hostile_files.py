"""Hostile files: a thresholds.toml or a trace built to break the parser is one line naming the
file (exit 4 / a usage error / a TraceError), never a traceback (issue 31)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.config import ConfigError, load_thresholds

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
