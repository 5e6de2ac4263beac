"""Phase 3 of the roadmap: cross-node all-reduce on torch.distributed (docs/distributed.md).

Layouts: under torchrun/srun the job's own ranks (NCCL on GPUs; rank 0 evaluates and writes, the
others measure and stay quiet); without it, ``[params.phase3] world_size`` local gloo ranks, and
for the cross-node gate two network-namespace hosts on this machine (root + iproute2). Every test
says which phase-2 outcome (decisions.json) it ran under; results go to
``<perfgate-out>/phase3-allreduce.json`` with every iteration's time and the comm environment.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_perfgate.distributed import phase3 as p3mod
from pytest_perfgate.distributed.bench import BenchSpec, SizeResult
from pytest_perfgate.distributed.netns import unavailable_reason
from pytest_perfgate.distributed.pertoken import cross_node_verdict, per_token_times
from pytest_perfgate.distributed.ranks import RankEnv


@pytest.fixture(scope="module")
def p3(perfgate_thresholds: Any) -> p3mod.Phase3Params:
    return p3mod.Phase3Params.parse(perfgate_thresholds.params.get("phase3", {}))


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    """What this module measured, shared by the tests that follow (cross-node overhead)."""
    return {}


@pytest.fixture
def out(perfgate: Any) -> Any:
    """``out(section, doc)``: rank 0 merges a section into phase3-allreduce.json (others: nothing)."""
    line = p3mod.phase2_line(perfgate.decision("phase2"))

    def write(section: str, doc: Any) -> None:
        if RankEnv.from_env().writes:
            p3mod.write_results(perfgate.out_dir, section, {**doc, "ran_under": line})

    write.phase2 = line  # type: ignore[attr-defined]
    return write


def _verdict_note(res: SizeResult, doc: dict[str, Any], extra: str = "") -> str:
    env = ", ".join(f"{k}={v}" for k, v in doc["comm_env"].items() if not k.startswith(("MASTER_", "WORLD_")))
    return (f"{res.nbytes} B, {doc['backend']} {doc['layout']}, world {res.world_size}, comm env: {env or 'defaults'}"
            + (f"; {extra}" if extra else ""))


@pytest.mark.gate("allreduce_p99", "allreduce_busbw")
def test_allreduce_sizes(perfgate: Any, p3: p3mod.Phase3Params, out: Any) -> None:
    """All-reduce P99 and busbw per message size: the nccl-tests sweep plus the decode-step message."""
    from pytest_perfgate.verdicts.verdict import evaluate

    sizes = tuple(sorted({*p3.sweep_sizes, p3.shape.message_bytes}))
    spec = BenchSpec(sizes, p3.sweep_iters, p3.warmup, p3.shape.dtype)
    doc = p3mod.measure(spec, p3, layout="sizes")
    if doc is None:
        return  # not rank 0: measured, rank 0 evaluates
    th = perfgate.thresholds
    for d in doc["sizes"]:
        r = SizeResult.from_dict(d)
        note = _verdict_note(r, doc, out.phase2)
        v = evaluate(th.gate("allreduce_p99"), perfgate.samples(np.asarray(r.times_s), "s"), thresholds=th)
        p3mod.record(perfgate, _with_note(v, note))
        bw = evaluate(th.gate("allreduce_busbw"), perfgate.samples([r.busbw(r.quantile(0.5))], "B/s"), thresholds=th)
        p3mod.record(perfgate, _with_note(bw, note))
    out("sizes", {**doc, "decode_shape": p3.shape.to_dict(), "model": p3.model})


def _with_note(v: Any, note: str) -> Any:
    from dataclasses import replace

    return replace(v, note=(v.note + "; " if v.note else "") + note)


@pytest.mark.gate("cross_node_p99_increase")
def test_cross_node_p99_increase(perfgate: Any, p3: p3mod.Phase3Params, out: Any, measured: dict[str, Any]) -> None:
    """P99 per-token time (layers x 2 all-reduces) cross-node minus single-node < 20 ms."""
    rank = RankEnv.from_env()
    spec = p3.decode_spec()
    if rank.distributed:
        if rank.nodes < 2:
            pytest.skip(f"torchrun job on one node ({rank.world_size} ranks): the cross-node layout needs >= 2 nodes")
        single = p3mod.measure(spec, p3, layout="single_node", node_local=True)
        cross = p3mod.measure(spec, p3, layout="cross_node")
        hosts = f"torchrun {rank.nodes} nodes"
    else:
        why = unavailable_reason()
        if why:
            pytest.skip(f"cross-node layout on this machine: {why}; on a cluster run this suite under torchrun")
        single, cross, hosts = p3mod.measure_netns(spec, p3.link)
    if single is None or cross is None:
        return  # not rank 0
    k = p3.shape.allreduces_per_token
    ts = per_token_times(single["sizes"][0]["times_us"], k) / 1e6
    tc = per_token_times(cross["sizes"][0]["times_us"], k) / 1e6
    measured["per_token_overhead_s"] = float(np.median(tc) - np.median(ts))
    measured["per_token_single_s"] = float(np.median(ts))
    th = perfgate.thresholds
    g = th.gate("cross_node_p99_increase")
    c = g.confidence or th.settings.confidence
    note = (f"{p3.shape.layers} layers x {p3.shape.allreduces_per_layer} all-reduces of {p3.shape.message_bytes} B "
            f"per token; {hosts}; {out.phase2}")
    v = cross_node_verdict(g, tc, ts, confidence=c, thresholds=th, note=note)
    out("cross_node", {"verdict": v.to_dict(), "hosts": hosts, "decode_shape": p3.shape.to_dict(),
                       "single_node": single, "cross_node": cross,
                       "per_token_us": {"single_node": (ts * 1e6).tolist(), "cross_node": (tc * 1e6).tolist()}})
    p3mod.record(perfgate, v)


@pytest.mark.gate("allreduce_p99")
def test_tuning_sweep(perfgate: Any, p3: p3mod.Phase3Params, out: Any) -> None:
    """Communication settings (NCCL_* / gloo) applied to the ranks' env: every config's distribution,
    the best with its gain over the default and a lower confidence bound."""
    from pytest_perfgate.distributed.tuning import run_sweep
    from pytest_perfgate.verdicts.verdict import evaluate

    if RankEnv.from_env().distributed:
        pytest.skip("the sweep starts ranks per configuration; run it without torchrun (one machine), "
                    "or launch one torchrun job per configuration with its NCCL_* variables")
    backend = p3mod.local_backend(p3.world_size)
    configs = p3.tuning.get(backend)
    if not configs:
        pytest.skip(f"no [params.phase3.tuning.{backend}] table in thresholds.toml")
    spec = BenchSpec((p3.shape.message_bytes,), p3.tuning_iters, p3.warmup, p3.shape.dtype)
    docs: dict[str, Any] = {}

    def run(cfg: Any) -> tuple[list[float], dict[str, str]]:
        doc = p3mod.measure(spec, p3, layout=f"tuning {cfg.name}", comm=cfg.env)
        assert doc is not None
        docs[cfg.name] = doc
        return [t / 1e6 for t in doc["sizes"][0]["times_us"]], doc["comm_env"]

    th = perfgate.thresholds
    res = run_sweep(configs, run, th.settings.confidence)
    for row in res.rows:
        r = SizeResult.from_dict(docs[row.config.name]["sizes"][0])
        v = evaluate(th.gate("allreduce_p99"), perfgate.samples(np.asarray(r.times_s), "s"), thresholds=th)
        p3mod.record(perfgate, _with_note(v, f"tuning {row.config.name}: " + _verdict_note(r, docs[row.config.name])))
    perfgate.note(res.summary())
    out("tuning", {"backend": backend, "summary": res.summary(), "best": res.best, "gain_us": res.gain_s * 1e6,
                   "gain_lower_us": res.gain_lower_s * 1e6, "confidence": res.confidence,
                   "per_config_confidence": res.per_config_confidence, "table": res.table()})


@pytest.mark.fallback("single_node")
@pytest.mark.gate("single_node_throughput")
def test_single_node_fallback(perfgate: Any, perfgate_engines: Any, p3: p3mod.Phase3Params, out: Any,
                              measured: dict[str, Any]) -> None:
    """Single-node serving: this node's measured output throughput, and the halving cost from numbers."""
    from pytest_perfgate.load.prompts import exact_length_prompts
    from pytest_perfgate.load.schedule import LoadConfig

    if RankEnv.from_env().distributed and not RankEnv.from_env().writes:
        return
    eng = perfgate_engines.get("baseline")
    reqs = exact_length_prompts(eng.tokenizer(), 128, 8, max_tokens=32)
    run = perfgate_engines.run("baseline", reqs, LoadConfig(num_requests=8))
    from pytest_perfgate.verdicts.verdict import evaluate

    v = evaluate(perfgate.gate("single_node_throughput"), run, thresholds=perfgate.thresholds)
    x = v.observed  # tok/s of one node serving alone
    d = measured.get("per_token_overhead_s")
    t1 = measured.get("per_token_single_s")
    if d is not None and t1 is not None and x > 0:
        # a model split over 2 nodes: half the compute per node per token, plus the measured
        # per-token all-reduce overhead; throughput of the pair vs one node alone
        per_tok = 1.0 / x
        pair = 1.0 / (per_tok / 2 + max(d, 0.0))
        cost = (f"single node {x:.1f} tok/s measured; a 2-node split would give {pair:.1f} tok/s "
                f"(per-token time {per_tok * 1e3:.1f} ms halved, + {d * 1e3:.2f} ms measured cross-node "
                f"all-reduce overhead per token): ")
        cost += (f"the fallback keeps {x / pair * 100:.0f}% of it (cost {(1 - x / pair) * 100:.0f}% of throughput)"
                 if x < pair else "the fallback loses nothing here: the measured cross-node overhead is larger "
                 "than the per-token time the split would save")
    else:
        cost = f"single node {x:.1f} tok/s measured; cross-node overhead not measured in this run"
    out("single_node_fallback", {"throughput_tok_s": x, "halving_cost": cost, "verdict": v.to_dict()})
    p3mod.record(perfgate, _with_note(v, cost), check=False)
