"""This process's place in a ``torchrun`` (or ``srun``) job, from RANK / WORLD_SIZE / LOCAL_RANK /
LOCAL_WORLD_SIZE / MASTER_ADDR (torchrun sets them; under Slurm, SLURM_PROCID / SLURM_NTASKS /
SLURM_LOCALID are read when RANK is absent).

Every rank measures; rank 0 alone evaluates gates and writes results; the others stay quiet and
exit with rank 0's status (:func:`exchange_status`, called by the plugin at session end).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class RankEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    master_addr: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RankEnv:
        env = os.environ if env is None else env

        def get(*names: str, default: int) -> int:
            for n in names:
                if env.get(n, "").strip():
                    try:
                        return int(env[n])
                    except ValueError:
                        raise ValueError(f"environment variable {n}={env[n]!r} is not an integer") from None
            return default

        world = get("WORLD_SIZE", "SLURM_NTASKS", default=1)
        rank = get("RANK", "SLURM_PROCID", default=0)
        if not 0 <= rank < max(world, 1):
            raise ValueError(f"RANK={rank} is outside WORLD_SIZE={world}")
        return cls(rank, world, get("LOCAL_RANK", "SLURM_LOCALID", default=0),
                   get("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", default=world), env.get("MASTER_ADDR"))

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def writes(self) -> bool:
        """Only rank 0 evaluates gates and writes results."""
        return self.rank == 0

    @property
    def nodes(self) -> int:
        return max(1, self.world_size // max(1, self.local_world_size))


def ensure_group(backend: str | None = None, timeout_s: float = 600.0) -> str:
    """Initialise the default process group from ``env://`` once (nccl with CUDA, else gloo)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if backend is None:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(RankEnv.from_env().local_rank)
        dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=timeout_s))
    return str(dist.get_backend())


def exchange_status(status: int) -> int:
    """Collective: every rank returns rank 0's ``status``; the process group is then destroyed."""
    import torch.distributed as dist

    ensure_group()
    group = dist.new_group(backend="gloo")
    obj: list[Any] = [int(status)]
    dist.broadcast_object_list(obj, src=0, group=group)
    dist.destroy_process_group()
    return int(obj[0])
