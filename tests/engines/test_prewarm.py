"""`pytest -m phase1` on the embedded CPU engine starts vLLM's fork server while pytest collects
(issue #16): the first engine start no longer waits for the server's own import of vLLM."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_perfgate.config import EngineSpec, load_thresholds
from pytest_perfgate.engines import manager as manager_mod
from pytest_perfgate.engines.manager import EngineManager
from pytest_perfgate.runtime.device import device_name
from pytest_perfgate.session import startup

ROOT = Path(__file__).resolve().parents[2]


def test_phases_named_by_a_mark_expression() -> None:
    phases = ["phase1", "phase2", "phase3"]
    assert startup.phases_named("phase1", phases) == ["phase1"]
    assert startup.phases_named("phase1 or phase2", phases) == ["phase1", "phase2"]
    assert startup.phases_named("(phase2 and not slow)", phases) == ["phase2"]
    assert startup.phases_named("not phase3", phases) == []
    assert startup.phases_named("", phases) == []
    assert startup.phases_named("phase10", phases) == []  # a word, not a prefix
    assert startup.phases_named("not  phase1 or phase1", phases) == ["phase1"]


class _Warmed:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        import pytest_perfgate.engines.vllm_forkserver as fs

        monkeypatch.setattr(fs, "warm", self)
        monkeypatch.setattr(manager_mod, "cuda_hint", lambda: False)
        monkeypatch.delenv("PERFGATE_PREWARM", raising=False)
        monkeypatch.delenv("PERFGATE_VLLM_FORKSERVER", raising=False)

    def __call__(self) -> None:
        self.calls += 1


def test_prewarm_chooses_only_engines_that_use_the_fork_server(monkeypatch: pytest.MonkeyPatch) -> None:
    warmed = _Warmed(monkeypatch)
    specs = {
        "remote": EngineSpec("remote", "openai", {"base_url": "http://h:1/v1", "model": "m"}),
        "compiled": EngineSpec("compiled", "vllm", {"model": "embedded:target", "enforce_eager": False}),
        "mine": EngineSpec("mine", "vllm", {"model": "/m", "enforce_eager": True, "distributed_executor_backend": "uni"}),
    }
    mgr = EngineManager(specs)
    assert mgr.prewarm(["remote", "compiled", "nope"]) is None and warmed.calls == 0
    assert mgr.prewarm(["remote", "mine"]) == "mine" and warmed.calls == 1
    assert mgr.prewarm(["baseline"]) == "baseline" and warmed.calls == 2  # the embedded default
    monkeypatch.setenv("PERFGATE_PREWARM", "0")
    assert mgr.prewarm(["baseline"]) is None
    monkeypatch.setenv("PERFGATE_PREWARM", "1")
    monkeypatch.setenv("PERFGATE_VLLM_FORKSERVER", "0")  # vLLM's own spawn: nothing to prepare
    assert mgr.prewarm(["baseline"]) is None
    monkeypatch.delenv("PERFGATE_VLLM_FORKSERVER")
    monkeypatch.setattr(manager_mod, "cuda_hint", lambda: True)  # a GPU runner: no fork server there
    assert mgr.prewarm(["baseline"]) is None and warmed.calls == 2


def test_prewarm_follows_the_selected_phases_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    warmed = _Warmed(monkeypatch)
    th = load_thresholds(ROOT / "thresholds.toml")
    assert startup.prewarm(th, None, {}, "phase1") in ("baseline", "speculative") and warmed.calls == 1
    assert startup.prewarm(th, None, {}, "not phase1") is None and warmed.calls == 1
    # the production engines of the README's GPU command are remote / GPU engines: nothing to prepare
    remote = {"baseline": "qwen72b", "speculative": "qwen72b-spec"}
    assert startup.prewarm(th, None, remote, "phase1") is None and warmed.calls == 1


@pytest.mark.skipif(device_name() != "cpu", reason="the fork server serves CPU engines")
@pytest.mark.needs_engine
def test_a_phase_run_has_the_fork_server_up_before_its_first_engine(tmp_path: Path) -> None:
    """A real session, in its own process: at the first test (no engine asked for yet) the fork
    server already runs and has imported vLLM's engine core by the time collection is long over.
    With PERFGATE_PREWARM=0 there is none."""
    (tmp_path / "thresholds.toml").write_text(textwrap.dedent("""
        [phases.phase1]
        [gates.ttft]
        phase = "phase1"
        metric = "ttft"
        statistic = "p50"
        max = "10 s"
    """))
    (tmp_path / "test_probe.py").write_text(textwrap.dedent("""
        import multiprocessing.forkserver as fs, os, time
        import pytest

        @pytest.mark.gate("ttft")
        def test_server_is_up():
            server = getattr(fs, "_forkserver", None)
            pid = getattr(server, "_forkserver_pid", None)
            print("FORKSERVER", pid, flush=True)
            assert pid is not None and os.path.exists(f"/proc/{pid}")
            # its preload reaches vLLM's engine core: the server's open files show vllm modules loaded
            maps = ""
            deadline = time.monotonic() + 600
            while "vllm/_C" not in maps and time.monotonic() < deadline:
                maps = open(f"/proc/{pid}/maps").read()
                time.sleep(0.5)
            assert "vllm/_C" in maps
    """))
    env = {k: v for k, v in os.environ.items() if k != "PERFGATE_PREWARM"}
    cmd = [sys.executable, "-m", "pytest", "-m", "phase1", "-p", "no:cacheprovider", "-s", "-q",
           "--perfgate-thresholds", "thresholds.toml", "test_probe.py"]
    on = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert on.returncode in (0, 1), on.stdout[-3000:] + on.stderr[-3000:]
    assert "1 passed" in on.stdout, on.stdout[-3000:]
    off = subprocess.run(cmd, cwd=tmp_path, env={**env, "PERFGATE_PREWARM": "0"}, capture_output=True,
                         text=True, timeout=900)
    assert "FORKSERVER None" in off.stdout, off.stdout[-3000:]


_FORK_OUTPUT = r"""
import os, sys
from pytest_perfgate.session.enginelog import redirect_output
from pytest_perfgate.engines import vllm_forkserver as fs
from pathlib import Path

fs.CONTEXT.set_forkserver_preload([])  # no vLLM: the routing of output is what is tested

out = Path(sys.argv[1])
with redirect_output(out / "first.log"):  # what startup.prewarm does around warm()
    import multiprocessing.forkserver
    multiprocessing.forkserver.ensure_running()
    os.write(1, b"server started\n")
for name in ("baseline", "speculative"):  # each engine start redirects to its own log
    with redirect_output(out / f"{name}.log"):
        for target, args, kw in ((print, (f"engine core of {name}",), {"flush": True}),
                                 (os.write, (2, f"engine core of {name} on stderr\n".encode()), {})):
            p = fs.CONTEXT.Process(target=target, args=args, kwargs=kw)  # importable targets
            p.start()
            p.join()
print("terminal line", flush=True)
fs.stop()
"""


def test_fork_server_children_write_where_the_caller_writes_and_the_server_to_its_log(tmp_path: Path) -> None:
    """Issue 25: engine cores forked from the prewarmed server wrote to the terminal (the server's
    own stdout, fixed when pytest configured). Each child now writes where its caller's fds 1 and 2
    point when it starts (the engine's log), as ``spawn`` would, and nothing reaches the terminal."""
    proc = subprocess.run([sys.executable, "-c", _FORK_OUTPUT, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "terminal line\n" and proc.stderr == "", (proc.stdout, proc.stderr)
    for name in ("baseline", "speculative"):
        text = (tmp_path / f"{name}.log").read_text()
        assert text == f"engine core of {name}\nengine core of {name} on stderr\n", text
    assert "server started" in (tmp_path / "first.log").read_text()


def test_prewarm_starts_the_server_inside_the_engine_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[str] = []
    _Warmed(monkeypatch)
    import pytest_perfgate.engines.vllm_forkserver as fs

    monkeypatch.setattr(fs, "warm", lambda: seen.append(os.readlink("/proc/self/fd/1")))
    th = load_thresholds(ROOT / "thresholds.toml")
    name = startup.prewarm(th, None, {}, "phase1", tmp_path)
    assert name is not None and seen == [str(tmp_path / "engines" / f"{name}.log")]
    assert os.readlink("/proc/self/fd/1") != seen[0]  # restored after the start


_TRACKER = r"""
import subprocess, sys
from multiprocessing import resource_tracker
from pytest_perfgate.engines import vllm_forkserver as fs

fs.CONTEXT.set_forkserver_preload([])  # no vLLM: the processes around the server are what is tested
fs.TRACKER_GRACE_S = 0.5
fs.warm()  # starts multiprocessing's resource tracker, then the fork server
tracker = resource_tracker._resource_tracker
# a process that outlives this one holding the tracker's pipe, as an engine core forked from the
# server does: the tracker reads no EOF while it lives
holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(tracker._fd,),
                          start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(tracker._pid, holder.pid, flush=True)
"""


def test_the_resource_tracker_of_the_fork_server_ends_with_the_session(tmp_path: Path) -> None:
    """Issue 31: after a failed engine start, `python -B -c from multiprocessing.resource_tracker
    import main;main(14)` was alive after the session: the tracker ``forkserver.ensure_running``
    starts outlived its session (1.5 s here, by its own cleanup; for as long as anything held its
    pipe). The session now reaps it at exit, SIGKILLing it after a grace period."""
    out, err = tmp_path / "out", tmp_path / "err"  # files: the tracker inherits the child's stdout/stderr
    with out.open("w") as o, err.open("w") as e:
        p = subprocess.run([sys.executable, "-c", _TRACKER], stdout=o, stderr=e, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, err.read_text()[-3000:]
    tracker, holder = (int(x) for x in out.read_text().split())
    try:
        state = Path(f"/proc/{tracker}/stat").read_text().rsplit(")", 1)[1].split()[0] \
            if Path(f"/proc/{tracker}").exists() else "gone"
        assert state == "gone", f"the resource tracker {tracker} outlived its session (state {state})"
    finally:
        os.kill(holder, 9)
