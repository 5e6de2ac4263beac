"""``perfgate init`` (issue 21, item 8): in an empty directory, against a running server on
loopback (the scripted server, a real process), then the command it printed: it passes. Existing
files are named and kept unless --force."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.cli.scaffold import TEST_FILE, THRESHOLDS, WORKFLOW, render

BIN = str(Path(sys.executable).parent)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The scripted OpenAI-compatible server as its own process on a free loopback port."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pytest_perfgate.calib.scripted_server", "--port", str(port),
                             "--ttft", "0.005", "--itl", "0.002"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:  # wait for the port by design (the server's accept), not by a sleep
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "scripted server did not listen"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def test_init_then_its_command_passes(tmp_path: Path, server: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", "init", "--base-url", server, "--model", "scripted"],
                       cwd=repo, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "run: pytest tests/perf", r.stdout
    for rel in (THRESHOLDS, TEST_FILE, WORKFLOW):
        assert (repo / rel).is_file(), rel
    test_text = (repo / TEST_FILE).read_text()
    assert "from pytest_perfgate import " in test_text and "pytest_perfgate." not in test_text.replace(
        "pytest_perfgate import", "")  # the public API only
    check = subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", "check", THRESHOLDS], cwd=repo,
                           capture_output=True, text=True, timeout=300, env=env)
    assert check.returncode == 0, check.stderr
    command = lines[-1].removeprefix("run: ")
    run = subprocess.run(shlex.split(command) + ["-p", "no:cacheprovider"], cwd=repo, capture_output=True, text=True,
                         timeout=600, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "1 passed" in out
    assert "sequential load run: looks at 100, 200, 400" in out and "look 1 of" in out  # its plan, its looks
    for gate in ("ttft_p95", "itl_p99", "tpot_p99", "output_throughput", "error_rate", "e2e_p90"):
        assert any(ln.startswith(gate) and ln.rstrip().endswith("PASS") for ln in out.splitlines()), (gate, out)
    assert (repo / "perfgate-results" / "gates.xml").is_file()


def test_existing_files_are_named_and_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / THRESHOLDS).write_text("# mine\n")
    rc = main(["init", str(tmp_path), "--base-url", "http://127.0.0.1:9", "--model", "m"])
    err = capsys.readouterr().err
    assert rc == 1
    assert str(tmp_path / THRESHOLDS) in err and "--force" in err
    assert (tmp_path / THRESHOLDS).read_text() == "# mine\n"
    assert not (tmp_path / TEST_FILE).exists()
    assert main(["init", str(tmp_path), "--base-url", "http://127.0.0.1:9", "--model", "m", "--force"]) == 0
    assert 'model = "m"' in (tmp_path / THRESHOLDS).read_text()


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path), "--base-url", "http://127.0.0.1:9"]) == 2
    assert main(["init", str(tmp_path), "--base-url", "localhost:8000", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert "--base-url and --model go together" in err and "not an http(s) URL" in err
    assert not any(tmp_path.iterdir())


def test_embedded_default_and_workflow_are_valid(tmp_path: Path) -> None:
    """Without --base-url: no [engines] table (the embedded default); the workflow is valid YAML
    that installs the matching extra and runs the printed command."""
    from pytest_perfgate.config import load_thresholds

    for args, extra in (((None, None), "[cpu]"), (("http://h:1", "m"), "[client]")):
        files = render(*args, name="server")
        p = tmp_path / THRESHOLDS
        p.write_text(files[THRESHOLDS])
        th = load_thresholds(p)
        assert len(th.gates) == 6 and (not th.engines) == (args[0] is None)
        yaml = pytest.importorskip("yaml")
        doc = yaml.safe_load(files[WORKFLOW])
        runs = [s.get("run", "") for s in doc["jobs"]["perfgate"]["steps"]]
        assert f"pip install 'pytest-perfgate{extra}'" in runs
        assert any(r.startswith("pytest tests/perf") for r in runs)


def test_workflow_restores_and_publishes_history() -> None:
    """main's runs are the history a pull request is compared with: restored before the gates, saved
    on main only, a pull request gated against origin/main, the trend site uploaded."""
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(render(None, None, name="server")[WORKFLOW])
    assert doc[True]["push"] == {"branches": ["main"]}  # YAML reads `on:` as True
    steps = doc["jobs"]["perfgate"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert uses.index("actions/cache/restore@v4") < next(i for i, s in enumerate(steps) if "--perfgate-out" in s.get("run", ""))
    save = steps[uses.index("actions/cache/save@v4")]
    assert "refs/heads/main" in save["if"] and save["with"]["path"] == "perfgate-results/history.sqlite"
    gates = next(s["run"] for s in steps if "--perfgate-out" in s.get("run", ""))
    assert "--perfgate-baseline origin/main" in gates and "pull_request" in gates
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "perfgate report perfgate-results --history perfgate-site" in runs and "history --changes" in runs
    assert "perfgate-site/" in steps[-1]["with"]["path"] and steps[0]["with"]["fetch-depth"] == 0
