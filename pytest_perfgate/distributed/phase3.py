"""The phase-3 measurements, pytest-free: what perf_tests/test_phase3.py runs.

- :class:`Phase3Params` — ``[params.phase3]`` of thresholds.toml, validated (errors name the key);
- :func:`measure` — one all-reduce benchmark in the layout this process is in: under torchrun/srun
  the job's own ranks (in-process, NCCL on GPUs), else N local ranks spawned as child processes;
- :func:`measure_netns` — "single node" (both ranks in one namespace, loopback) and "cross node"
  (one rank per namespace, TCP across the veth link), both real, in one run;
- :func:`write_results` / :class:`Results` — rank 0's results document (``phase3-allreduce.json``),
  atomically; :func:`size_label` / :func:`size_note` — what each message size's verdict says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime.atomic import atomic_write_text
from .bench import BenchSpec, SizeResult, comm_env, results_doc
from .launch import Rank, launch
from .netns import NetnsHosts, Shaping
from .ranks import RankEnv, ensure_group
from .sizes import DecodeShape, SizeError, decode_shape, sweep
from .tuning import CommConfig, parse_configs

RESULTS_FILE = "phase3-allreduce.json"


@dataclass(frozen=True)
class Phase3Params:
    shape: DecodeShape
    model: str
    world_size: int = 2
    tokens: int = 500
    warmup: int = 10
    sweep_sizes: tuple[int, ...] = ()
    sweep_iters: int = 100
    link: Shaping | None = None
    shaped_link: Shaping = field(default_factory=lambda: Shaping(rate="256kbit"))
    shaped_tokens: int = 40
    tuning: Mapping[str, list[CommConfig]] = field(default_factory=dict)  # backend -> configs
    tuning_iters: int = 400

    @property
    def decode_iters(self) -> int:
        return self.tokens * self.shape.allreduces_per_token

    def decode_spec(self, tokens: int | None = None) -> BenchSpec:
        n = (tokens or self.tokens) * self.shape.allreduces_per_token
        return BenchSpec((self.shape.message_bytes,), n, self.warmup, self.shape.dtype)

    def sweep_spec(self) -> BenchSpec:
        return BenchSpec(self.sweep_sizes, self.sweep_iters, self.warmup, self.shape.dtype)

    @classmethod
    def parse(cls, raw: Mapping[str, Any], embedded: bool = True) -> Phase3Params:
        where = "thresholds.toml [params.phase3]"
        t = {k: v for k, v in raw.items() if k != "embedded"}
        if embedded:
            t.update(raw.get("embedded", {}))
        model = t.get("model", "embedded:target")
        if not isinstance(model, str):
            raise ValueError(f"{where} model: a config.json path or 'embedded:target', got {model!r}")

        def pos(key: str, default: int) -> int:
            v = t.get(key, default)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{where} {key}: must be a positive integer, got {v!r}")
            return v

        try:
            path: str | Path = model
            if model.startswith("embedded:"):
                from ..models import make_models

                path = getattr(make_models(), model.partition(":")[2] or "target")
            shape = decode_shape(path, batch=pos("batch", 1), dtype=t.get("dtype"))
            sw = t.get("sweep", {"min": "8", "max": "1M", "factor": 8})
            if not isinstance(sw, Mapping) or set(sw) - {"min", "max", "factor"}:
                raise ValueError(f"{where} sweep: a table with min, max, factor, got {sw!r}")
            sizes = tuple(sweep(sw.get("min", "8"), sw.get("max", "1M"), sw.get("factor", 2)))
            link = _shaping(t.get("link"), f"{where} link") if t.get("link") else None
            shaped = _shaping(t.get("shaped_link", {"rate": "256kbit"}), f"{where} shaped_link")
        except (SizeError, AttributeError) as e:
            raise ValueError(f"{where}: {e}") from None
        tuning_raw = t.get("tuning", {})
        if not isinstance(tuning_raw, Mapping):
            raise ValueError(f"{where} tuning: a table per backend (gloo, nccl)")
        tuning = {str(b): parse_configs(cfgs, f"{where.removesuffix(']')}.tuning.{b}]")
                  for b, cfgs in tuning_raw.items()}
        return cls(shape, model, pos("world_size", 2), pos("tokens", 500), pos("warmup", 10), sizes,
                   pos("sweep_iters", 100), link, shaped, pos("shaped_tokens", 30), tuning, pos("tuning_iters", 400))


def _shaping(v: Any, where: str) -> Shaping:
    if not isinstance(v, Mapping) or set(v) - {"qdisc", "rate", "burst", "latency"}:
        raise ValueError(f"{where}: a table with qdisc (tbf/htb), rate, burst, latency, got {v!r}")
    s = Shaping(**{k: str(x) for k, x in v.items()})
    if s.qdisc not in ("tbf", "htb"):
        raise ValueError(f"{where} qdisc: 'tbf' or 'htb' (netem is not used), got {s.qdisc!r}")
    return s


def local_backend(world_size: int) -> str:
    """NCCL when this machine has a GPU per rank, else gloo (two NCCL ranks on one GPU are refused)."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return "gloo"
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world_size else "gloo"


def measure(spec: BenchSpec, p: Phase3Params, *, layout: str, comm: Mapping[str, str] | None = None,
            node_local: bool = False) -> dict[str, Any] | None:
    """One benchmark in this process's layout. Under torchrun/srun every rank calls it (collective)
    and rank 0 gets the document, others None (``node_local``: only the ranks of node 0 take part,
    the single-node layout of a multi-node job); else ``p.world_size`` local ranks are spawned."""
    rank = RankEnv.from_env()
    if rank.distributed:
        from .bench import run_allreduce

        backend = ensure_group()
        members = list(range(rank.local_world_size)) if node_local else None
        res = run_allreduce(spec, members)
        if res is None:
            return None
        where = f"{rank.nodes} node(s) x {rank.local_world_size} rank(s)" if not node_local else \
            f"node 0 only, {rank.local_world_size} rank(s)"
        return results_doc(res, backend=backend, layout=f"{layout} (torchrun: {where})", env=comm_env(), spec=spec)
    backend = local_backend(p.world_size)
    return launch(spec, [Rank() for _ in range(p.world_size)], backend=backend, layout=layout, comm=comm)


def measure_netns(spec: BenchSpec, shaping: Shaping | None) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(single-node doc, cross-node doc, hosts description), two gloo ranks each, one run."""
    with NetnsHosts(shaping) as h:
        return single_node(h, spec), cross_node(h, spec), h.describe()


def single_node(h: NetnsHosts, spec: BenchSpec, comm: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Both ranks on host a, over its loopback."""
    return launch(spec, [Rank(h.ns_a, {"GLOO_SOCKET_IFNAME": "lo"}, h.ns_a)] * 2, layout="single_node",
                  master_addr="127.0.0.1", comm=comm, realtime=True)


def cross_node(h: NetnsHosts, spec: BenchSpec, comm: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One rank per host, TCP across the veth link."""
    return launch(spec, [Rank(h.ns_a, {"GLOO_SOCKET_IFNAME": h.dev_a}, h.ns_a),
                         Rank(h.ns_b, {"GLOO_SOCKET_IFNAME": h.dev_b}, h.ns_b)],
                  layout=f"cross_node ({h.shaping.describe() if h.shaping else 'unshaped'})",
                  master_addr=h.addr_a, comm=comm, realtime=True)


def write_results(out_dir: Path, section: str, doc: Any) -> Path:
    """Merge ``{section: doc}`` into ``out_dir/phase3-allreduce.json`` (rank 0 only calls this)."""
    path = Path(out_dir) / RESULTS_FILE
    try:
        cur = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(cur, dict):
            cur = {}
    except (OSError, ValueError):
        cur = {}
    cur[section] = doc
    cur["written_by_rank"] = RankEnv.from_env().rank
    return atomic_write_text(path, json.dumps(cur, default=str))


@dataclass(frozen=True)
class Results:
    """Rank 0's ``phase3-allreduce.json`` in ``out_dir``: each test merges its section, and every
    section says which phase-2 outcome (``ran_under``, :func:`phase2_line`) it ran under. On the
    other ranks of a torchrun job :meth:`write` writes nothing."""

    out_dir: Path
    ran_under: str

    def write(self, section: str, doc: Mapping[str, Any]) -> None:
        if RankEnv.from_env().writes:
            write_results(self.out_dir, section, {**doc, "ran_under": self.ran_under})


def size_label(nbytes: int) -> str:
    """``8 B``, ``4 KiB``, ``1 MiB``: a message size as its row in the gate table names it."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def size_note(res: SizeResult, doc: Mapping[str, Any], extra: str = "") -> str:
    """The conditions of one message size's verdict: bytes, backend, layout, world size, comm env."""
    env = ", ".join(f"{k}={v}" for k, v in doc["comm_env"].items() if not k.startswith(("MASTER_", "WORLD_")))
    return (f"{res.nbytes} B, {doc['backend']} {doc['layout']}, world {res.world_size}, comm env: {env or 'defaults'}"
            + (f"; {extra}" if extra else ""))


def phase2_line(decision: Mapping[str, Any] | None) -> str:
    """Which phase-2 outcome phase 3 runs under (from decisions.json)."""
    if not decision:
        return "phase2: no recorded decision (phase 3 runs without phase 2's outcome)"
    trig = ", ".join(decision.get("triggered_fallbacks", [])) or "none"
    return (f"phase2: {str(decision.get('outcome', '?')).upper()} (run {decision.get('run_id', '?')}, "
            f"{decision.get('timestamp', '?')}; triggered fallbacks: {trig})")
