"""Load configuration and precomputed, seeded send schedules.

Modes:

* ``sequential``: one request at a time (closed loop, concurrency 1);
* ``concurrency``: ``concurrency`` requests in flight (closed loop: a new one as one finishes);
* ``poisson``: open loop at ``rate`` req/s, exponential gaps;
* ``gamma``: open loop at ``rate`` req/s, gamma gaps of shape ``burstiness`` (1 = Poisson, < 1
  burstier, > 1 more regular; vLLM bench's convention). ``concurrency`` caps requests in flight;
* ``trace``: open loop at the requests' own ``arrival`` times (``traces.load``), times
  ``time_scale`` (0.5: twice as fast); ``concurrency`` caps requests in flight (load/replay.py).

Exact rate (``exact_rate``, default True): the drawn gaps are rescaled so that the schedule offers
exactly ``rate``: request ``i`` of ``n`` at ``t_i`` with ``t_0 = 0`` and ``t_(n-1) = (n-1)/rate``,
as ``vllm bench serve`` rescales its delays (it sends its first request one gap after the start
and its last at ``n/rate``; the mean gap is the same, ``1/rate``). Why the default: without it
the offered load is itself random -- at 32 requests, seed 0, "2 req/s" offers 1.73 req/s, and
the spread is about ``1/sqrt(n)`` (+-17% at n = 32, one standard deviation) -- which is noise in
a latency gate and makes a run incomparable with vLLM's bench at the same nominal rate. For a
Poisson schedule nothing else changes: n exponential gaps divided by their sum are the arrival
times of a Poisson process given that the window holds n arrivals (uniform order statistics),
so the local burstiness is untouched. ``exact_rate = false`` keeps the raw draws (an
unconditioned renewal process: the rate varies from run to run as real traffic does).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ..config.load import MAX_WORKERS, shown

Mode = Literal["sequential", "concurrency", "poisson", "gamma", "trace"]
MODES: tuple[str, ...] = ("sequential", "concurrency", "poisson", "gamma", "trace")


class LoadConfigError(ValueError):
    """A load configuration that cannot be run."""


@dataclass(frozen=True)
class LoadConfig:
    """How to send requests: mode, level, budgets (requests and seconds), warm-up, seed."""

    mode: Mode = "sequential"
    concurrency: int | None = None  # closed loop: in flight; open loop: cap (None = no cap)
    rate: float | None = None  # req/s for poisson/gamma
    burstiness: float = 1.0  # gamma shape
    # request budget (measured requests, warm-up not included); None: each given request once
    num_requests: int | None = None
    max_seconds: float | None = None  # time budget: no new request after this many seconds
    # warm-up requests sent (sequentially) before the measured run, with prompts of their own (never
    # the measured ones, which would then be prefix-cache hits): load.prompts.warmup_prompts
    warmup: int = 0
    seed: int = 0
    exact_rate: bool = True  # open loop: rescale the gaps to offer exactly ``rate`` (see the module doc)
    gauge_interval: float | None = None  # seconds between gauge polls during the run (None: off)
    # after max_seconds, how long requests in flight may still run before they are cancelled and
    # recorded as errors (None: until the engine's own per-request timeout)
    drain_seconds: float | None = None
    time_scale: float = 1.0  # mode "trace": send offsets are the trace's arrivals times this factor
    workers: int = 1  # client worker processes sharing the schedule (load/workers.py); 1: this process
    # workers on the nodes of a Ray cluster (load/ray_workers.py): "auto" or "HOST:PORT"; None: local
    ray: str | None = None
    per_node: int = 1  # with ``ray``: worker actors on each alive node

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise LoadConfigError(f"load mode {self.mode!r} unknown (known: {', '.join(MODES)})")
        if self.num_requests is not None and self.num_requests < 1:
            raise LoadConfigError(f"num_requests must be >= 1, got {self.num_requests}")
        if self.warmup < 0:
            raise LoadConfigError(f"warmup must be >= 0, got {self.warmup}")
        if self.concurrency is not None and self.concurrency < 1:
            raise LoadConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.mode == "concurrency" and self.concurrency is None:
            raise LoadConfigError("mode 'concurrency' needs concurrency = N")
        if self.mode in ("poisson", "gamma"):
            if self.rate is None or not self.rate > 0 or not np.isfinite(self.rate):
                raise LoadConfigError(f"mode {self.mode!r} needs rate > 0 (requests per second), got {self.rate}")
        if not (self.time_scale > 0 and np.isfinite(self.time_scale)):
            raise LoadConfigError(f"time_scale must be > 0, got {self.time_scale}")
        if not self.burstiness > 0:
            raise LoadConfigError(f"burstiness must be > 0, got {self.burstiness}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise LoadConfigError(f"max_seconds must be > 0, got {self.max_seconds}")
        if self.gauge_interval is not None and not self.gauge_interval > 0:
            raise LoadConfigError(f"gauge_interval must be > 0, got {self.gauge_interval}")
        if self.drain_seconds is not None and not self.drain_seconds >= 0:
            raise LoadConfigError(f"drain_seconds must be >= 0, got {self.drain_seconds}")
        if not (isinstance(self.workers, int) and 1 <= self.workers <= MAX_WORKERS):
            raise LoadConfigError(f"workers must be an integer from 1 to {MAX_WORKERS}, got {shown(self.workers)} "
                                  "(\"auto\": load.workers.resolve_workers)")
        if self.ray is not None:
            if not (isinstance(self.per_node, int) and 1 <= self.per_node <= MAX_WORKERS):
                raise LoadConfigError(f"per_node: from 1 to {MAX_WORKERS} worker processes per node, got {shown(self.per_node)}")
            parse_ray(f"ray://{self.ray}?per_node={self.per_node}")
        if self.drain_seconds is not None and self.max_seconds is None:
            raise LoadConfigError("drain_seconds needs max_seconds (the time budget it extends)")

    def sized(self, n_requests: int) -> LoadConfig:
        """This config with its request budget set (``num_requests=None``: ``n_requests``)."""
        return self if self.num_requests is not None else replace(self, num_requests=n_requests)

    @property
    def open_loop(self) -> bool:
        return self.mode in ("poisson", "gamma", "trace")

    @property
    def in_flight(self) -> int | None:
        """Requests in flight at most (None: unbounded open loop)."""
        if self.mode == "sequential":
            return 1
        return self.concurrency

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RayWorkers:
    """Client workers on a Ray cluster: its ``address`` (``"auto"``: the running cluster, else
    ``HOST:PORT``) and ``per_node`` worker actors on each alive node (load/ray_workers.py)."""

    address: str = "auto"
    per_node: int = 1

    @property
    def url(self) -> str:
        return f"ray://{self.address}?per_node={self.per_node}"


# fullmatch: "$" would admit a trailing newline (pytest and `perfgate check` refuse the same values)
_RAY = re.compile(r"ray://(?P<addr>auto|[A-Za-z0-9_.-]+:[0-9]{1,5})(?:\?per_node=(?P<n>[^&]*))?")


def parse_ray(text: str) -> RayWorkers:
    """``ray://auto`` / ``ray://HOST:PORT``, optionally ``?per_node=N`` (1 to ``MAX_WORKERS``); a
    clear error otherwise, the value shown bounded."""
    m = _RAY.fullmatch(text.strip())
    if m is None:
        raise LoadConfigError(f'workers {shown(text)}: a Ray cluster is "ray://auto" or "ray://HOST:PORT" '
                              "(optionally ?per_node=N)")
    addr, n = m["addr"], m["n"]
    if addr != "auto" and not 0 < int(addr.rsplit(":", 1)[1]) < 65536:
        raise LoadConfigError(f"workers {shown(text)}: port must be 1-65535")
    if n is not None and not (n.isascii() and n.isdigit() and n.strip("0")):
        raise LoadConfigError(f"workers {shown(text)}: per_node must be a positive integer, got {shown(n)}")
    if n is not None and (len(n.lstrip("0")) > 6 or int(n) > MAX_WORKERS):  # no int() of 5,000 digits
        raise LoadConfigError(f"workers {shown(text)}: per_node: at most {MAX_WORKERS} worker processes per node, "
                              f"got {shown(n)}")
    return RayWorkers(addr, int(n) if n is not None else 1)


def send_offsets_ns(config: LoadConfig, n: int | None = None) -> npt.NDArray[np.int64] | None:
    """Send times (ns after the run's start) of the measured requests; None for closed loops.

    The first request goes at 0; gaps are gamma(shape=burstiness, scale=1/(rate*burstiness)),
    i.e. exponential for Poisson, drawn from ``numpy.random.default_rng(seed)``; with
    ``exact_rate`` they are then scaled so that the last request goes at exactly ``(n-1)/rate``.
    """
    if not config.open_loop or config.mode == "trace":  # trace: load.replay.trace_offsets_ns
        return None
    n = n if n is not None else config.num_requests
    if n is None:
        raise LoadConfigError("send_offsets_ns: num_requests is None; size the config first (LoadConfig.sized)")
    assert config.rate is not None
    shape = 1.0 if config.mode == "poisson" else config.burstiness
    rng = np.random.default_rng(config.seed)
    gaps = rng.gamma(shape, 1.0 / (config.rate * shape), size=max(n - 1, 0))
    total = float(gaps.sum())
    if config.exact_rate and total > 0:
        gaps *= (n - 1) / config.rate / total
    offsets = np.concatenate([[0.0], np.cumsum(gaps)]) * 1e9
    return np.asarray(np.round(offsets), dtype=np.int64)[:n]
