"""Phase 3 of the roadmap: cross-node all-reduce on torch.distributed (docs/distributed.md).

Layouts: under torchrun/srun the job's own ranks (NCCL on GPUs; rank 0 evaluates and writes, the
others measure and stay quiet); without it, ``[params.phase3] world_size`` local gloo ranks, and
for the cross-node gate two network-namespace hosts on this machine (root + iproute2). Every test
says which phase-2 outcome (decisions.json) it ran under; results go to
``<perfgate-out>/phase3-allreduce.json`` with every iteration's time and the comm environment.

Every verdict goes through ``perfgate.check`` (one per message size, labelled with it in the gate
table): its data is stored, ``--perfgate-baseline`` and ``--perfgate-confidence`` apply.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_perfgate import Engines, LoadConfig, Perfgate, Thresholds, distributed, prompts

pytestmark = pytest.mark.phase3


@pytest.fixture(scope="module")
def p3(perfgate_thresholds: Thresholds) -> distributed.Phase3Params:
    return distributed.Phase3Params.parse(perfgate_thresholds.params.get("phase3", {}))


@pytest.fixture(scope="module")
def per_token() -> distributed.PerToken:
    """The per-token times the cross-node test measured, for the single-node fallback after it."""
    return distributed.PerToken()


@pytest.fixture
def results(perfgate: Perfgate) -> distributed.Results:
    """Rank 0's phase3-allreduce.json, each section with the phase-2 outcome it ran under."""
    return distributed.Results(perfgate.out_dir, distributed.phase2_line(perfgate.decision("phase2")))


def check_sizes(perfgate: Perfgate, doc: dict[str, Any], gates: tuple[str, ...], extra: str, tag: str = "") -> None:
    """One verdict per message size of a benchmark document, each labelled with its size (and ``tag``)."""
    for d in doc["sizes"]:
        r = distributed.SizeResult.from_dict(d)
        note = distributed.size_note(r, doc, extra)
        label = distributed.size_label(r.nbytes) + (f", {tag}" if tag else "")
        if "allreduce_p99" in gates:
            perfgate.check(perfgate.samples(np.asarray(r.times_s), "s"), gate="allreduce_p99", note=note, label=label)
        if "allreduce_busbw" in gates:
            perfgate.check(perfgate.samples([r.busbw(r.quantile(0.5))], "B/s"), gate="allreduce_busbw", note=note,
                           label=label)


@pytest.mark.gate("allreduce_p99", "allreduce_busbw")
def test_allreduce_sizes(perfgate: Perfgate, p3: distributed.Phase3Params, results: distributed.Results) -> None:
    """All-reduce P99 and busbw per message size: the nccl-tests sweep plus the decode-step message."""
    sizes = tuple(sorted({*p3.sweep_sizes, p3.shape.message_bytes}))
    doc = distributed.measure(distributed.BenchSpec(sizes, p3.sweep_iters, p3.warmup, p3.shape.dtype), p3,
                              layout="sizes")
    if doc is None:
        return  # not rank 0: measured, rank 0 evaluates
    check_sizes(perfgate, doc, ("allreduce_p99", "allreduce_busbw"), results.ran_under)
    results.write("sizes", {**doc, "decode_shape": p3.shape.to_dict(), "model": p3.model})


@pytest.mark.gate("cross_node_p99_increase")
def test_cross_node_p99_increase(perfgate: Perfgate, p3: distributed.Phase3Params, results: distributed.Results,
                                 per_token: distributed.PerToken) -> None:
    """P99 per-token time (layers x 2 all-reduces) cross-node minus single-node < 20 ms: the two
    per-token series as the gate's runs ``cross_node`` and ``single_node``."""
    rank = distributed.RankEnv.from_env()
    spec = p3.decode_spec()
    if rank.distributed:
        if rank.nodes < 2:
            pytest.skip(f"torchrun job on one node ({rank.world_size} ranks): the cross-node layout needs >= 2 nodes")
        single = distributed.measure(spec, p3, layout="single_node", node_local=True)
        cross = distributed.measure(spec, p3, layout="cross_node")
        hosts = f"torchrun {rank.nodes} nodes"
    else:
        why = distributed.unavailable_reason()
        if why:
            pytest.skip(f"cross-node layout on this machine: {why}; on a cluster run this suite under torchrun")
        single, cross, hosts = distributed.measure_netns(spec, p3.link)
    if single is None or cross is None:
        return  # not rank 0
    k = p3.shape.allreduces_per_token
    per_token.single = distributed.per_token_times(single["sizes"][0]["times_us"], k) / 1e6
    per_token.cross = distributed.per_token_times(cross["sizes"][0]["times_us"], k) / 1e6
    note = (f"{p3.shape.layers} layers x {p3.shape.allreduces_per_layer} all-reduces of {p3.shape.message_bytes} B "
            f"per token; {hosts}; {results.ran_under}")
    runs = {"cross_node": perfgate.samples(per_token.cross, "s"), "single_node": perfgate.samples(per_token.single, "s")}
    v = perfgate.evaluate(runs, note=note)
    results.write("cross_node", {"verdict": v.to_dict(), "hosts": hosts, "decode_shape": p3.shape.to_dict(),
                                 "single_node": single, "cross_node": cross,
                                 "per_token_us": {"single_node": (per_token.single * 1e6).tolist(),
                                                  "cross_node": (per_token.cross * 1e6).tolist()}})
    perfgate.raise_for(v)


@pytest.mark.gate("allreduce_p99")
def test_tuning_sweep(perfgate: Perfgate, p3: distributed.Phase3Params, results: distributed.Results) -> None:
    """Communication settings (NCCL_* / gloo) applied to the ranks' env: every config's distribution,
    the best with its gain over the default and a lower confidence bound."""
    if distributed.RankEnv.from_env().distributed:
        pytest.skip("the sweep starts ranks per configuration; run it without torchrun (one machine), "
                    "or launch one torchrun job per configuration with its NCCL_* variables")
    backend = distributed.local_backend(p3.world_size)
    configs = p3.tuning.get(backend)
    if not configs:
        pytest.skip(f"no [params.phase3.tuning.{backend}] table in thresholds.toml")
    spec = distributed.BenchSpec((p3.shape.message_bytes,), p3.tuning_iters, p3.warmup, p3.shape.dtype)
    docs: dict[str, dict[str, Any]] = {}

    def run(cfg: distributed.CommConfig) -> tuple[list[float], dict[str, str]]:
        doc = distributed.measure(spec, p3, layout=f"tuning {cfg.name}", comm=cfg.env)
        assert doc is not None
        docs[cfg.name] = doc
        return [t / 1e6 for t in doc["sizes"][0]["times_us"]], doc["comm_env"]

    res = distributed.run_sweep(configs, run, perfgate.confidence)
    for row in res.rows:
        check_sizes(perfgate, docs[row.config.name], ("allreduce_p99",), results.ran_under, f"tuning {row.config.name}")
    perfgate.note(res.summary())
    results.write("tuning", {"backend": backend, "summary": res.summary(), "best": res.best,
                             "gain_us": res.gain_s * 1e6, "gain_lower_us": res.gain_lower_s * 1e6,
                             "confidence": res.confidence, "per_config_confidence": res.per_config_confidence,
                             "table": res.table()})


@pytest.mark.fallback("single_node")
@pytest.mark.gate("single_node_throughput")
def test_single_node_fallback(perfgate: Perfgate, perfgate_engines: Engines, results: distributed.Results,
                              per_token: distributed.PerToken) -> None:
    """Single-node serving: this node's measured output throughput, and the halving cost from numbers."""
    rank = distributed.RankEnv.from_env()
    if rank.distributed and not rank.writes:
        return
    reqs = prompts.exact_length_prompts(perfgate_engines.tokenizer("baseline"), 128, 8, max_tokens=32)
    run = perfgate_engines.run("baseline", reqs, LoadConfig(num_requests=8))
    v = perfgate.evaluate(run, note=lambda v: halving_cost(v.observed, per_token))  # recorded, never failed
    cost = halving_cost(v.observed, per_token)
    results.write("single_node_fallback", {"throughput_tok_s": v.observed, "halving_cost": cost, "verdict": v.to_dict()})


def halving_cost(x: float, per_token: distributed.PerToken) -> str:
    """A model split over 2 nodes: half the compute per node per token, plus the measured per-token
    all-reduce overhead; the throughput of the pair vs one node alone (``x`` tok/s)."""
    d, t1 = per_token.overhead_s, per_token.single_s
    if d is None or t1 is None or not x > 0:
        return f"single node {x:.1f} tok/s measured; cross-node overhead not measured in this run"
    per_tok = 1.0 / x
    pair = 1.0 / (per_tok / 2 + max(d, 0.0))
    cost = (f"single node {x:.1f} tok/s measured; a 2-node split would give {pair:.1f} tok/s "
            f"(per-token time {per_tok * 1e3:.1f} ms halved, + {d * 1e3:.2f} ms measured cross-node "
            f"all-reduce overhead per token): ")
    return cost + (f"the fallback keeps {x / pair * 100:.0f}% of it (cost {(1 - x / pair) * 100:.0f}% of throughput)"
                   if x < pair else "the fallback loses nothing here: the measured cross-node overhead is larger "
                   "than the per-token time the split would save")
