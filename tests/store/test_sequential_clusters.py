"""The sequential acceptance path stores what its bound used (issue 22 item 2): the pooled request
clusters, not one pooled fraction, so ``--perfgate-baseline`` sees 90% -> 55% as a regression and
re-evaluating the stored file gives the live verdict bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_perfgate import make_proportion, sample_until_decided
from pytest_perfgate.config import Thresholds, load_thresholds
from pytest_perfgate.store import baseline, records
from pytest_perfgate.verdicts.samples import Proportion
from pytest_perfgate.verdicts.verdict import evaluate

TOML = """
[phases.phase1]
title = "phase 1"
[gates.draft_acceptance]
phase = "phase1"
metric = "acceptance_rate"
min = "70%"
regression = 0.05
"""


def _th(tmp: Path) -> Thresholds:
    p = tmp / "thresholds.toml"
    p.write_text(TOML)
    return load_thresholds(p)


def _draws(rate: float, seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)

    def draw() -> Proportion:  # one round: 16 requests of 20-40 drafted tokens
        m = rng.integers(20, 41, 16)
        return make_proportion(rng.binomial(m, rng.beta(rate * 20, (1 - rate) * 20, 16)), m)

    return draw


def _stored(tmp: Path, th: Thresholds, rate: float, seed: int, run: str) -> tuple[object, records.Stored]:
    g = th.gate("draft_acceptance")
    res = sample_until_decided(_draws(rate, seed), g, thresholds=th, max_draws=4)
    assert res.pooled is not None and res.pooled.clustered and len(res.pooled.cluster_trials) % 16 == 0
    rel = records.write(tmp, gate=g, verdict=res.verdict, data=res.pooled, confidence=res.per_look_confidence,
                        run_id=run)
    return res, records.load(tmp / rel)


def test_stored_clusters_reevaluate_bit_identically(tmp_path: Path) -> None:
    th = _th(tmp_path)
    for rate, seed in ((0.9, 1), (0.55, 2), (0.72, 3)):
        res, stored = _stored(tmp_path, th, rate, seed, f"r{seed}")
        again = evaluate(th.gate("draft_acceptance"), stored.data, confidence=stored.confidence, thresholds=th)
        live = res.verdict  # type: ignore[attr-defined]
        assert isinstance(stored.data, Proportion) and stored.data == res.pooled  # type: ignore[attr-defined]
        assert (again.outcome, again.observed, again.lower, again.upper, again.n, again.method) == (
            live.outcome, live.observed, live.lower, live.upper, live.n, live.method)


def test_baseline_sees_ninety_to_fifty_five(tmp_path: Path) -> None:
    th = _th(tmp_path)
    _, base = _stored(tmp_path, th, 0.90, 4, "base")
    cur, _ = _stored(tmp_path, th, 0.55, 5, "cur")
    cmp = baseline.compare(th.gate("draft_acceptance"), cur.pooled, base.data, confidence=0.95,  # type: ignore[attr-defined]
                           thresholds=th)
    assert cmp is not None and cmp.regressed and "REGRESSED beyond the 5% regression tolerance" in cmp.text, cmp
    same, _ = _stored(tmp_path, th, 0.90, 6, "same")
    ok = baseline.compare(th.gate("draft_acceptance"), same.pooled, base.data, confidence=0.95,  # type: ignore[attr-defined]
                          thresholds=th)
    assert ok is not None and not ok.regressed
