"""The ``perfgate_engines`` fixture's value: the session's engines, the one way to run load.

``run(engine, requests, config=LoadConfig(), keep_as=NAME)`` starts (or reuses) the engine, sends the
requests under ``config`` (warm-up with prompts of its own built with the engine's tokenizer) and
keeps the run under ``NAME`` in the session's :class:`~pytest_perfgate.session.runs.Runs`
(``perfgate.runs[NAME]``). Variants of an engine are declared with :meth:`Engines.variant`. No
pytest import: the plugin builds it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import EngineSpec
from .runs import Runs

if TYPE_CHECKING:
    from ..config import Gate, Thresholds
    from ..contract import Engine, Request
    from ..engines.manager import EngineManager
    from ..load.result import RunResult
    from ..load.schedule import LoadConfig, RayWorkers
    from .enginelog import LoggedEngines
    from .perfgate import Perfgate


class Engines:
    """Lazy engines, at most one alive at a time (starting one stops the other)."""

    def __init__(self, logged: LoggedEngines, manager: EngineManager, specs: dict[str, EngineSpec], runs: Runs) -> None:
        self._logged = logged
        self._mgr = manager
        self._specs = specs  # the manager's specs: thresholds.toml's engines, then declared variants
        self.runs = runs
        # client worker processes of a run whose config says 1 (load/workers.py), or a Ray cluster's
        self.workers: int | RayWorkers = 1
        self.out_dir: Path | None = None  # the results directory (its history file: a run's plan)

    @classmethod
    def open(cls, specs: Mapping[str, EngineSpec], aliases: Mapping[str, str], out_dir: Path,
             suspend: Callable[[], AbstractContextManager[Any]], say: Callable[[str], None], runs: Runs) -> Engines:
        """The session's engines: ``specs`` from thresholds.toml, ``aliases`` from ``--perfgate-engine
        ROLE=NAME``, engine output in ``out_dir/engines/``, ``suspend`` pauses the test runner's
        output capture, ``say`` prints progress lines."""
        from ..contract import EngineError
        from ..engines.manager import EngineManager
        from .enginelog import LoggedEngines

        own = dict(specs)
        said: list[LoggedEngines] = []
        mgr = EngineManager(own, dict(aliases), lambda m: said[0].say(m))
        logged = LoggedEngines(mgr, out_dir, suspend, EngineError, say)
        said.append(logged)
        engines = cls(logged, mgr, own, runs)
        engines.out_dir = out_dir
        return engines

    def get(self, name: str) -> Engine:
        """The started engine ``name`` (``[engines.NAME]``, a built-in one, or a declared variant)."""
        engine: Engine = self._logged.get(name)
        return engine

    def spec(self, name: str) -> EngineSpec:
        return self._mgr.spec(name)

    def is_embedded(self, name: str) -> bool:
        """Does engine ``name`` run the tiny generated models (the CPU default)?"""
        return self._mgr.is_embedded(name)

    def tokenizer(self, name: str) -> Any:
        """The tokenizer of engine ``name`` (for exact-length prompts; starts the engine). A missing
        or broken optional package (transformers, a torchvision built for another torch) is one
        line with its fix (:func:`~pytest_perfgate.engines.requirements.import_failure`), an EngineError."""
        engine = self.get(name)
        try:
            return engine.tokenizer()
        except (ImportError, RuntimeError) as e:
            from ..contract import EngineError
            from ..engines.requirements import import_failure

            line = import_failure(e, f"engine {engine.name!r} ({engine.kind}) tokenizer")
            if line is None:
                raise
            raise EngineError(line) from None

    def variant(self, base: str, name: str, **args: Any) -> str:
        """Declare engine ``name``: engine ``base`` with vLLM arguments ``args`` changed; returns
        ``name``. Declaring the same name again with other arguments is an error."""
        spec = self.spec(base)
        new = EngineSpec(name, spec.kind, {**spec.args, **args}, spec.name)
        old = self._specs.get(name)
        if old is not None and old != new:
            raise ValueError(f"engine {name!r} is already declared with other arguments ({dict(old.args)})")
        self._specs[name] = new
        return name

    def retuned(self, name: str, decision: Mapping[str, Any] | None, gate: str = "batch_retune_capacity") -> str:
        """Engine ``name`` with the batch arguments (``max_num_seqs``, ``max_num_batched_tokens``) that
        a passing re-tune recorded in ``decision`` (phase 1's re-tune step, gate ``gate``:
        load/retune.py), as variant ``<name>-retuned``, when ``name`` is a vLLM engine; else ``name``
        itself (nothing recorded or passed, or an engine those arguments don't apply to)."""
        from ..engines.registry import VLLM_KINDS
        from ..load.retune import retuned_args

        args = retuned_args(decision, gate)
        if not args or self.spec(name).kind not in VLLM_KINDS:
            return name
        return self.variant(name, f"{name}-retuned", **args)

    def declare(self, name: str, kind: str, **args: Any) -> str:
        """Declare engine ``name`` of ``kind`` (an engine kind of the registry, e.g.
        ``"transformers-vlm"``) with ``args``, for an engine a suite builds itself (phase 2's
        embedded pipelines); returns ``name``. It then starts, logs and stops like any other
        engine. Declaring the same name again with other arguments is an error."""
        new = EngineSpec(name, kind, dict(args))
        old = self._specs.get(name)
        if old is not None and old != new:
            raise ValueError(f"engine {name!r} is already declared with other arguments ({dict(old.args)})")
        self._specs[name] = new
        return name

    def run(
        self,
        engine: str,
        requests: Sequence[Request],
        config: LoadConfig | None = None,
        *,
        keep_as: str | None = None,
        stop: Callable[[RunResult], bool] | None = None,
        slos: Mapping[str, float] | None = None,
    ) -> RunResult:
        """Measure ``requests`` on engine ``engine`` under ``config`` (default: each request once,
        one at a time); ``keep_as``: keep the run in ``perfgate.runs`` under that name."""
        from ..load.runner import run_load
        from ..load.schedule import LoadConfig
        from ..runtime.progress import progress_printer

        eng = self.get(engine)
        cfg, warm = self._prepared(eng, requests, config if config is not None else LoadConfig())
        run = run_load(eng, requests, cfg, progress_printer(self._logged.say, eng.name), stop, slos=slos, warmup=warm)
        return self._kept(eng, cfg, run, keep_as, requests)

    def run_until_decided(
        self,
        engine: str,
        requests: Sequence[Request],
        config: LoadConfig | None = None,
        *,
        gates: Perfgate | Iterable[Gate | tuple[Gate, float]],
        max_requests: int | None = None,
        max_seconds: float | None = None,
        looks: int | Sequence[int] | None = None,
        keep_as: str | None = None,
        slos: Mapping[str, float] | None = None,
    ) -> RunResult:
        """Measure ``requests`` on engine ``engine`` under ``config`` until every gate of ``gates`` is
        decided (pass or fail) at the planned looks, or ``max_requests`` / ``max_seconds`` run out.

        ``gates``: the ``perfgate`` fixture (its test's ``@pytest.mark.gate`` gates, each at its
        confidence), or gates (``perfgate.gate(name)``, optionally ``(gate, confidence)``).
        ``looks``: the request counts of the looks (the last is the budget), or the first look
        (default 100, then doubling up to ``max_requests``). Before the first request the run says
        its plan, at each look which gates are decided and what the open ones probably still need;
        ``perfgate.check_all(run)`` / ``check(run, gate)`` then give each gate the verdict of the look
        that decided it (load/decided.py, docs/statistics.md "Sequential load runs")."""
        from ..load.decided import LoadLooks, load_looks
        from ..load.schedule import LoadConfig
        from ..load.watcher import run_until_decided
        from ..runtime.progress import progress_printer

        if looks is not None and not isinstance(looks, int):
            counts = tuple(looks)
            if max_requests is not None and counts and counts[-1] != max_requests:
                raise ValueError(f"run_until_decided: the last look ({counts[-1]:,}) is the budget; "
                                 f"max_requests = {max_requests:,} differs")
        elif max_requests is None:
            raise ValueError("run_until_decided: max_requests is required (the run's budget in requests)")
        else:
            counts = load_looks(max_requests) if looks is None else load_looks(max_requests, first=looks)
        pairs, th = _gates_of(gates)
        plan = LoadLooks.plan(pairs, counts, th, max_seconds)
        eng = self.get(engine)
        cfg, warm = self._prepared(eng, requests, config if config is not None else LoadConfig())
        run = run_until_decided(eng, requests, cfg, plan, progress=progress_printer(self._logged.say, eng.name),
                                say=lambda line: self._logged.say(f"perfgate: [{eng.name}] {line}"), slos=slos,
                                warmup=warm, prior=self._prior([g.name for g, _ in pairs]))
        return self._kept(eng, cfg, run, keep_as, requests)

    def _prior(self, gates: Sequence[str]) -> dict[str, float]:
        """Each gate's dependence factor D (requests per independent one) in the previous run of the
        history file beside the results, where it recorded one (the plan's "probably needs")."""
        if self.out_dir is None:
            return {}
        from ..store import history
        from ..verdicts.verdict import Verdict

        path = history.path_of(self.out_dir)
        out: dict[str, float] = {}
        for name in gates if path.exists() else ():
            try:
                rows = history.verdicts(path, gate=name, limit=1)
                v = Verdict.from_dict(rows[-1]["verdict"]) if rows else None
            except (history.HistoryError, ValueError, KeyError, TypeError, sqlite3.Error):
                continue  # a history that cannot say: the plan says less, the run is unaffected
            n_eff = v.details.get("dependence_n_eff") if v is not None else None
            if v is not None and isinstance(n_eff, (int, float)) and n_eff > 0 and v.n:
                out[name] = v.n / float(n_eff)
        return out

    def _prepared(self, eng: Engine, requests: Sequence[Request], cfg: LoadConfig) -> tuple[LoadConfig, Any]:
        """``cfg`` with the session's client workers, and the warm-up requests for ``requests``."""
        from ..load.prompts import warmup_prompts

        if cfg.workers == 1 and cfg.ray is None and self.workers != 1 and cfg.in_flight != 1 \
                and callable(getattr(eng, "worker_spec", None)):
            from dataclasses import replace

            # the session's setting, for an engine a worker can rebuild
            w = self.workers
            cfg = replace(cfg, workers=w) if isinstance(w, int) else replace(cfg, ray=w.address, per_node=w.per_node)
        # token-id prompts get token-id warm-ups of an exact length (the engine's tokenizer), text prompts text
        tok = eng.tokenizer() if cfg.warmup and requests and isinstance(requests[0].prompt, tuple) else None
        warm = warmup_prompts(requests, cfg.warmup, tok) if cfg.warmup else None
        return cfg, warm

    def _kept(self, eng: Engine, cfg: LoadConfig, run: RunResult, keep_as: str | None,
              requests: Sequence[Request]) -> RunResult:
        for h in run.worker_health if cfg.ray is not None else ():  # workers on other hosts: their clocks
            self._logged.say(f"perfgate: [{eng.name}] client worker on {h.text()}")
        if keep_as is not None:
            self.runs.keep(keep_as, run, requests)
        return run

    def warm_up(self, engine: str, count: int = 1) -> None:
        """Send ``count`` requests of their own to engine ``engine`` (started if needed), not kept:
        the first measured request then finds the engine warm, and no measured prompt in its
        prefix cache."""
        import time

        from ..load.prompts import warmup_prompts

        prompts = warmup_prompts([], count, self.tokenizer(engine))
        t0 = time.monotonic()
        self._logged.say(f"perfgate: [{engine}] warm-up: {count} request(s), not measured")
        run = self.run(engine, prompts)
        self._logged.say(f"perfgate: [{engine}] warm-up done: {len(run.successful)}/{len(run.measured)} answered "
                         f"in {time.monotonic() - t0:.1f} s")

    @staticmethod
    def gpus() -> int:
        """CUDA devices visible to this process (0 on a CPU-only machine)."""
        from ..runtime.device import cpu_only

        if cpu_only():
            return 0
        import torch

        return int(torch.cuda.device_count())

    def current(self) -> str | None:
        """The live engine's name, else the last one started (or attempted), else None."""
        live = self._mgr.live
        return live.name if live is not None else (sorted(self.used)[-1] if self.used else None)

    def stop(self) -> None:
        """Stop the live engine (the next ``get``/``run`` starts what it needs)."""
        self._mgr.stop()

    @property
    def used(self) -> set[str]:
        """Engine names started (or attempted) in this session."""
        return self._logged.used

    @property
    def live(self) -> Engine | None:
        return self._mgr.live

    def close(self) -> None:
        self._mgr.close()

    def close_in_background(self) -> Callable[[float], str | None]:
        """Stop the live engine on a thread; ``wait(timeout_s)`` joins it (an error message or None)."""
        return self._logged.close_in_background()


def _gates_of(gates: Any) -> tuple[list[tuple[Gate, float]], Thresholds | None]:
    """(gate, confidence) pairs and the thresholds of ``run_until_decided``'s ``gates``: the
    ``perfgate`` fixture, or gates with or without their confidence (default: the gate's own, else 0.95)."""
    from ..config import Gate

    if callable(getattr(gates, "bound_gates", None)):
        return list(gates.bound_gates()), gates.thresholds
    out: list[tuple[Gate, float]] = []
    for g in gates:
        if isinstance(g, Gate):
            out.append((g, g.confidence or 0.95))
        elif isinstance(g, tuple) and len(g) == 2 and isinstance(g[0], Gate):
            out.append((g[0], float(g[1])))
        else:
            raise TypeError(f"run_until_decided: gates are the perfgate fixture or Gate objects "
                            f"(perfgate.gate(name)), not {type(g).__name__}")
    return out, None
