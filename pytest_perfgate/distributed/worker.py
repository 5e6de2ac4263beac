"""One rank of an all-reduce benchmark: ``python -m pytest_perfgate.distributed.worker JOB.json``.

Reads RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT from the environment (``env://``: what
torchrun, srun wrappers and :mod:`.launch` set), runs :func:`.bench.run_allreduce`, and rank 0
alone writes the results document to the job's ``out`` path (atomically). Other ranks print nothing.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path

from ..runtime.atomic import atomic_write_text
from .bench import BenchSpec, comm_env, results_doc, run_allreduce


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pytest_perfgate.distributed.worker JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    import torch.distributed as dist

    spec = BenchSpec.from_dict(job["spec"])
    dist.init_process_group(job.get("backend", "gloo"), init_method="env://",
                            timeout=timedelta(seconds=float(job.get("timeout_s", 300))))
    try:
        priority = _raise_priority() if job.get("realtime") else "normal"
        try:
            results = run_allreduce(spec)
        finally:
            if priority != "normal":
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        if results is not None:
            doc = results_doc(results, backend=str(dist.get_backend()), layout=job.get("layout", "local"),
                              env=comm_env(), spec=spec, extra={"hosts": job.get("hosts", []), "priority": priority})
            atomic_write_text(Path(job["out"]), json.dumps(doc))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


def _raise_priority() -> str:
    """SCHED_FIFO for the timed loop only (root): the ranks then wait for the link, not for a CPU
    behind other jobs of a shared machine. The loop blocks in I/O, and the kernel's real-time
    throttling keeps 5% of each CPU for everything else."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (PermissionError, OSError, AttributeError) as e:
        return f"normal (SCHED_FIFO refused: {e})"
    return "SCHED_FIFO 10 (timed loop only)"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
