"""Start options of in-process vLLM engines on the CPU (issue #16): the single-process executor, the
environment it needs while the config is built, and the fork server's environment hand-over."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_perfgate.engines.vllm_inproc import _launcher, _uniproc_env, _use_forkserver, embedded_start
from pytest_perfgate.runtime.device import device_name

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(device_name() != "cpu", reason="CPU start options")


def test_embedded_cpu_engine_runs_eagerly_in_one_process() -> None:
    args, env = embedded_start({"model": "/m/target"}, cuda=False)
    assert args["enforce_eager"] is True and args["distributed_executor_backend"] == "uni"
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    gpu_args, gpu_env = embedded_start({"model": "/m/target"}, cuda=True)
    assert "distributed_executor_backend" not in gpu_args and gpu_env == {}
    explicit = embedded_start({"model": "m", "distributed_executor_backend": "mp"}, cuda=False)[0]
    assert explicit["distributed_executor_backend"] == "mp"  # thresholds.toml wins


def test_multiprocessing_variable_set_only_while_the_config_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    with _uniproc_env({"distributed_executor_backend": "uni"}):
        assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    with _uniproc_env({"distributed_executor_backend": "uni"}):
        assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    with _uniproc_env({"distributed_executor_backend": "mp"}):
        assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


def test_fork_server_only_for_eager_single_process_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFGATE_VLLM_FORKSERVER", raising=False)
    eager_uni = {"enforce_eager": True, "distributed_executor_backend": "uni"}
    assert _use_forkserver(eager_uni)
    assert not _use_forkserver({**eager_uni, "enforce_eager": False})  # inductor reads its settings at import
    assert not _use_forkserver({"enforce_eager": True, "distributed_executor_backend": "mp"})
    assert not _use_forkserver({"enforce_eager": True})
    monkeypatch.setenv("PERFGATE_VLLM_FORKSERVER", "0")
    assert not _use_forkserver(eager_uni)
    with _launcher(eager_uni):  # off: vLLM's own start method, nothing patched
        pass


def test_fork_server_child_gets_the_callers_environment_at_start(tmp_path: Path) -> None:
    """A plain fork-server child sees the server's environment; ours sees the caller's, as spawn would."""
    # the probe target must be importable by the child: write it as a module
    (tmp_path / "probe_target.py").write_text(
        "import os\n\ndef write(path):\n"
        "    open(path, 'w').write(os.environ.get('PERFGATE_PROBE', 'missing') + ' ' +"
        " os.environ.get('GONE_AFTER_SERVER', 'absent'))\n"
    )
    script = textwrap.dedent(
        """
        import os, sys
        from multiprocessing import forkserver
        from pytest_perfgate.engines.vllm_forkserver import CONTEXT
        import probe_target
        os.environ["GONE_AFTER_SERVER"] = "server-only"
        forkserver.ensure_running()  # the server's environment has GONE_AFTER_SERVER, not PERFGATE_PROBE
        os.environ["PERFGATE_PROBE"] = "callers-value"
        del os.environ["GONE_AFTER_SERVER"]
        p = CONTEXT.Process(target=probe_target.write, args=(sys.argv[1],))
        p.start(); p.join(120)
        sys.exit(p.exitcode)
        """
    )
    out = tmp_path / "env.txt"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    proc = subprocess.run([sys.executable, "-c", script, str(out)], env=env, cwd=tmp_path, timeout=300,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_text() == "callers-value absent"


def test_fork_server_does_not_outlive_its_session() -> None:
    """A session that ends while the server still imports vLLM leaves no orphan importing on
    (the fork server only reads its "alive" pipe after the preload)."""
    script = textwrap.dedent("""
        import multiprocessing.forkserver, sys
        from pytest_perfgate.engines import vllm_forkserver
        vllm_forkserver.warm()
        print(multiprocessing.forkserver._forkserver._forkserver_pid, flush=True)
        sys.exit(0)  # at once: the server is still importing
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    pid = int(out.split()[-1])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    stat = Path(f"/proc/{pid}/stat").read_text().split()
    assert stat[2] == "Z", f"fork server {pid} still running after its session ended"


def test_embedded_server_keeps_the_single_process_executor() -> None:
    """vLLM's CPU platform turns "uni" back into its worker-process executor unless the server's
    environment says VLLM_ENABLE_V1_MULTIPROCESSING=0; the server gets it only with "uni"."""
    from pytest_perfgate.engines.vllm_server import VLLMServerEngine, cli_args

    args, _ = embedded_start({"model": "/m/target"}, cuda=False)
    uni = VLLMServerEngine("s", args)
    assert uni.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "--enforce-eager" in cli_args(args) and "uni" in cli_args(args)
    mp = VLLMServerEngine("s", {"model": "/m/target", "distributed_executor_backend": "mp"})
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in mp.env
    given = VLLMServerEngine("s", {**args, "env": {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}})
    assert given.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"  # an explicit setting wins
