"""The README's examples run: its thresholds.toml and test file, against a real OpenAI-compatible
server (the scripted-timing calibration server, answering in 212 ms), give the failure it shows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_tables import openai_engine

from pytest_perfgate.calib import Script, ScriptedServer

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(lang: str, section: str | None = None) -> list[str]:
    """The README's fenced code blocks of ``lang`` ("" for bare fences), in order; only those of
    the ``## section`` when given."""
    text = README.read_text()
    if section is not None:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    out: list[str] = []
    current: list[str] | None = None
    kind = ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, kind = [], line[3:].strip()
            else:
                if kind == lang:
                    out.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return out


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.212, itl=0.001)) as srv:
        yield srv


def pattern(line: str) -> str:
    """A README output line as an fnmatch pattern: numbers may differ, the words may not."""
    line = re.sub(r"[\[\]]", lambda m: f"[{m.group()}]", line)
    line = re.sub(r"\d+(\.\d+)?", "*", line)
    # measured against a fixed baseline: the direction of the change is the machine's (a busy runner
    # can push a 212-ms server's P99 past 320 ms), not the wording's
    return re.sub(r"\b(lower|higher)\)", "*)", line)


def test_readme_example_runs_and_fails_as_shown(pytester: pytest.Pytester, server: ScriptedServer) -> None:
    from pytest_perfgate.models.make import make_models

    (toml,) = blocks("toml", "Ten lines")
    (py,) = blocks("python", "Ten lines")
    tokenizer = make_models().tokenizer
    pytester.makefile(".toml", thresholds=toml + openai_engine("scripted", server.base_url, "scripted",
                                                               tokenizer=str(tokenizer)))
    pytester.makepyfile(test_readme=py)
    r = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", "--perfgate-engine", "scripted")
    r.assert_outcomes(failed=1)
    shown = blocks("", "Ten lines")[0].splitlines()  # "A failing gate fails its test with ..."
    assert len(shown) == 2 and shown[0].startswith("FAILED long_context_ttft: ")
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
