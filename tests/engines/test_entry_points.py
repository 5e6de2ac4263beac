"""A user's package adds an engine kind and a report writer through entry points, without editing
perfgate (issue 23): a generated distribution (a ``*.dist-info`` with ``entry_points.txt``) on the
path of a real pytest session. Its engine kind subclasses the generic launched server
(:class:`pytest_perfgate.engines.server.LaunchedServer`) to launch the scripted OpenAI server; its
writer writes ``gates.csv`` beside gates.xml. Also: the ``server`` kind with a ``command`` table
entry, and the errors that name the distribution at fault."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_perfgate import contract
from pytest_perfgate.engines import registry
from pytest_perfgate.engines.check import engine_problems
from pytest_perfgate.engines.server import LaunchedServer
from pytest_perfgate.writers import filenames, names

PACKAGE = '''
"""A user's perfgate extensions (package mykinds)."""
import csv
import sys
from pathlib import Path

from pytest_perfgate.engines.registry import EngineKind
from pytest_perfgate.engines.server import LaunchedServer


class ScriptedServer(LaunchedServer):
    """The scripted OpenAI server of pytest_perfgate.calib, launched and guarded like any server."""

    kind = "scripted"
    label = "scripted server"
    accepted = frozenset({"model", "ttft", "startup_timeout"})

    def __init__(self, name, args):
        super().__init__(name, args)
        self.health_path = "/v1/models"  # the scripted server has no /health

    def check_command(self):
        pass

    def server_command(self, port):
        return [sys.executable, "-m", "pytest_perfgate.calib.scripted_server", "--port", str(port),
                "--model", self.model, "--ttft", str(self.args.get("ttft", 0.002)), "--itl", "0.001"]


KIND = EngineKind("scripted", ScriptedServer, requires=("orjson",), arguments=ScriptedServer.accepted)


class CsvWriter:
    name = "csv"
    filename = "gates.csv"

    def write(self, doc, out_dir, *, phases=None, inconclusive="fail"):
        path = Path(out_dir) / self.filename
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["phase", "gate", "outcome"])
            for phase, entry in doc["phases"].items():
                if phases is None or phase in phases:
                    for v in entry["verdicts"]:
                        w.writerow([phase, v["gate"], v["outcome"]])
        return path
'''

ENTRY_POINTS = """
[pytest_perfgate.engines]
scripted = mykinds:KIND

[pytest_perfgate.writers]
csv = mykinds:CsvWriter
"""

THRESHOLDS = """
[phases.slo]
[gates.ttft_p50]
phase = "slo"
metric = "ttft"
statistic = "p50"
max = "5 s"
[gates.error_rate]
phase = "slo"
metric = "error_rate"
statistic = "rate"
max = "20%"
[engines.mine]
kind = "scripted"
model = "scripted"
ttft = 0.002
"""

SUITE = """
import pytest
from pytest_perfgate import LoadConfig, Request


@pytest.mark.gate("ttft_p50", "error_rate")
def test_slo(perfgate, perfgate_engines):
    reqs = [Request(f"prompt {i} " + "word " * 8, 4) for i in range(8)]
    run = perfgate_engines.run("mine", reqs, LoadConfig(mode="concurrency", concurrency=2, num_requests=60))
    perfgate.check_all(run)
"""


def make_distribution(root: Path, entry_points: str = ENTRY_POINTS, package: str = PACKAGE) -> Path:
    """``root/mykinds`` and ``root/mykinds-0.1.dist-info`` (METADATA, entry_points.txt): what
    ``pip install`` of a package declaring the entry points leaves in site-packages."""
    (root / "mykinds").mkdir(parents=True)
    (root / "mykinds" / "__init__.py").write_text(textwrap.dedent(package))
    info = root / "mykinds-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mykinds\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return root


def test_an_installed_package_adds_an_engine_kind_and_a_writer(pytester: pytest.Pytester, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_distribution(tmp_path / "site")
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_slo=SUITE)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{Path(__file__).parents[2]}")
    monkeypatch.setenv("PERFGATE_SERVER_DIR", str(tmp_path / "servers"))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    r.assert_outcomes(passed=1)
    out = pytester.path / "perfgate-results"
    assert (out / "gates.csv").read_text().splitlines() == ["phase,gate,outcome", "slo,ttft_p50,pass",
                                                          "slo,error_rate,pass"]
    assert (out / "gates.xml").is_file() and (out / "report.html").is_file()
    r.stdout.fnmatch_lines([f"perfgate: wrote {out / 'gates.csv'}"])
    [engine] = json.loads((out / "decisions.json").read_text())["phases"]["slo"]["engines"]
    assert (engine["name"], engine["kind"]) == ("mine", "scripted")
    assert "pytest_perfgate.calib.scripted_server" in engine["command"]
    assert "scripted server" in (out / "engines" / "mine.log").read_text()  # the server's output: the engine log


def test_entry_points_are_listed_checked_and_loaded_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(make_distribution(tmp_path)))
    monkeypatch.delitem(sys.modules, "mykinds", raising=False)
    assert "scripted" in registry.kinds() and "csv" in names() and "gates.csv" in filenames()
    kind = registry.lookup("scripted")
    assert kind is not None and kind.requires == ("orjson",) and "mykinds-0.1" not in kind.origin
    assert "distribution mykinds 0.1" in kind.origin
    assert kind.known_arguments() == frozenset({"model", "ttft", "startup_timeout"})
    eng = registry.create("mine", "scripted", {"model": "m"})
    assert isinstance(eng, LaunchedServer) and eng.kind == "scripted"
    from pytest_perfgate.config import load_thresholds

    th_file = tmp_path / "thresholds.toml"
    th_file.write_text(THRESHOLDS.replace("ttft = 0.002", "tfft = 0.002"))
    problems, _ = engine_problems(load_thresholds(th_file))
    assert problems == ["thresholds.toml: [engines.mine] tfft: unknown argument of a scripted engine (did you mean 'ttft'? "
                        "arguments: model, startup_timeout, ttft)"]


def test_a_broken_or_shadowing_entry_point_is_an_error_naming_its_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eps = "[pytest_perfgate.engines]\nvllm = mykinds:KIND\nbroken = mykinds:missing\n"
    monkeypatch.syspath_prepend(str(make_distribution(tmp_path, eps, "KIND = None\n")))
    monkeypatch.delitem(sys.modules, "mykinds", raising=False)
    assert registry.lookup("vllm") is registry.BUILTIN[0]  # the built-in kind is kept
    with pytest.raises(contract.EngineError, match=r"entry point broken = 'mykinds:missing' of distribution mykinds 0.1 "
                       r"\(group pytest_perfgate.engines\): cannot load it: AttributeError"):
        registry.create("e", "broken", {})


def test_the_server_kind_runs_the_command_of_its_table(tmp_path: Path) -> None:
    """``kind = "server"``: perfgate launches ``command``, waits for ``health_path``, sends the load
    through its openai client and stops the process group."""
    from pytest_perfgate.contract import Request, RequestRecord, run_sync
    from pytest_perfgate.runtime.timeouts import scaled

    args = {"command": ["{python}", "-m", "pytest_perfgate.calib.scripted_server", "--port", "{port}", "--model", "s"],
            "model": "s", "health_path": "/v1/models", "dialect": "vllm", "startup_timeout": scaled(60)}
    eng = registry.create("gen", "server", args)
    eng.start()
    try:
        assert isinstance(eng, LaunchedServer) and eng.command[0] == sys.executable
        rec = RequestRecord(0)
        run_sync(eng.generate(Request("hello there", 3), rec, time.perf_counter_ns), timeout=scaled(60))
        assert rec.error is None and rec.output_tokens == 3, rec
        assert eng.info()["kind"] == "server"
        assert eng._proc is not None
        leader = eng._proc.pid  # the watchdog, which leads the server's process group
    finally:
        eng.stop()
    assert eng._proc is None and gone(leader)


def gone(pid: int) -> bool:
    """The process has ended (no such process, or a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize(("args", "message"), [
    ({"model": "m"}, r"\[engines.gen\] command: must be a non-empty list of strings"),
    ({"model": "m", "command": ["serve"]}, r"\[engines.gen\] command: put \{port\} where the server takes its port"),
    ({"model": "m", "command": ["serve", "{port}"], "comand": 1}, r"\[engines.gen\] comand: unknown argument"),
])
def test_a_server_table_that_cannot_run_names_the_key(args: dict[str, object], message: str) -> None:
    with pytest.raises(contract.EngineError, match=message):
        registry.create("gen", "server", args)
