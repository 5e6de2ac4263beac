"""Under torchrun every rank measures, rank 0 alone evaluates and writes, the others stay quiet and
exit with rank 0's status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_perfgate.distributed.launch import free_port
from pytest_perfgate.distributed.ranks import RankEnv

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_rank_env_from_torchrun_and_slurm_variables() -> None:
    r = RankEnv.from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (r.distributed, r.writes, r.nodes, r.local_rank) == (True, False, 2, 1)
    s = RankEnv.from_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0"})
    assert (s.rank, s.world_size, s.writes) == (0, 2, True)
    assert not RankEnv.from_env({}).distributed


def test_torchrun_two_ranks_only_rank0_writes(tmp_path: Path) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "--log-dir", str(logs), "--redirects", "3",
           "-m", "pytest", "perf_tests/test_phase3.py", "-k", "test_allreduce_sizes", "-p", "no:cacheprovider",
           "-q", "--perfgate-out", str(out)]
    p = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    stdout = {int(f.parent.name): f.read_text() for f in logs.rglob("stdout.log")}
    assert set(stdout) == {0, 1}
    assert "perfgate" in stdout[0] and "1 passed" in stdout[0] and "wrote" in stdout[0]
    assert stdout[1].strip() == "", stdout[1]  # quiet
    res = json.loads((out / "phase3-allreduce.json").read_text())
    assert res["written_by_rank"] == 0
    sizes = res["sizes"]
    assert sizes["world_size"] == 2 and sizes["backend"] == "gloo" and "torchrun" in sizes["layout"]
    assert sizes["comm_env"]["WORLD_SIZE"] == "2"
    assert all(len(s["times_us"]) == sizes["spec"]["iters"] for s in sizes["sizes"])
    dec = json.loads((out / "decisions.json").read_text())
    gates = {v["gate"] for v in dec["phases"]["phase3"]["verdicts"]}
    assert gates == {"allreduce_p99", "allreduce_busbw"}
    assert len([v for v in dec["phases"]["phase3"]["verdicts"] if v["gate"] == "allreduce_p99"]) == len(sizes["sizes"])


def test_other_ranks_exit_with_rank0_status(tmp_path: Path) -> None:
    """Rank 0's test fails, rank 1's passes: both processes exit 1 (rank 0's status)."""
    (tmp_path / "test_x.py").write_text("import os\n\ndef test_x():\n    assert os.environ['RANK'] != '0'\n")
    port = str(free_port())
    procs = []
    for rank in (0, 1):
        env = {**_env(), "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        procs.append(subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_x.py"],
                                      cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outs
    assert "1 failed" in outs[0] and outs[1].strip() == ""
