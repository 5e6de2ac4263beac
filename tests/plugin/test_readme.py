"""The README's examples run: its thresholds.toml and test file, against a real OpenAI-compatible
server (the scripted-timing calibration server, answering in 212 ms), give the failure it shows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_perfgate.calib import Script, ScriptedServer

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(lang: str) -> list[str]:
    """The README's fenced code blocks of ``lang`` ("" for bare fences), in order."""
    return re.findall(rf"(?ms)^```{lang}\n(.*?)^```$", README.read_text())


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.212, itl=0.001)) as srv:
        yield srv


def pattern(line: str) -> str:
    """A README output line as an fnmatch pattern: numbers may differ, the words may not."""
    line = re.sub(r"[\[\]]", lambda m: f"[{m.group()}]", line)
    return re.sub(r"\d+(\.\d+)?", "*", line)


def test_readme_example_runs_and_fails_as_shown(pytester: pytest.Pytester, server: ScriptedServer) -> None:
    from pytest_perfgate.models.make import make_models

    (toml,) = blocks("toml")
    py = blocks("python")[0]  # the "Ten lines" example
    tokenizer = make_models().tokenizer
    pytester.makefile(".toml", thresholds=toml + f"""
[engines.scripted]
kind = "openai"
base_url = "{server.base_url}"
model = "scripted"
tokenizer = "{tokenizer}"
""")
    pytester.makepyfile(test_readme=py)
    r = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", "--perfgate-engine", "scripted")
    r.assert_outcomes(failed=1)
    shown = [ln for b in blocks("") for ln in b.splitlines() if ln.startswith(("gate ", "-> fallback"))]
    assert len(shown) == 2
    r.stdout.fnmatch_lines([pattern(ln) for ln in shown])


def test_readme_commands_exist() -> None:
    root = README.parent
    for block in blocks("bash"):
        for line in block.splitlines():
            script = line.split("#")[0].split()[1] if line.startswith("bash ") else None
            if script:
                assert (root / script).is_file(), script


def test_every_readme_python_block_compiles() -> None:
    """The other Python blocks are excerpts (they call the reader's own workload): they must parse."""
    for i, block in enumerate(blocks("python")):
        compile(block, f"README.md python block {i + 1}", "exec")
