"""The terminal gate table names which of several verdicts of one gate a row is (its label): phase 3
records one ``allreduce_p99`` verdict per message size, each row says which size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_perfgate import evaluate, load_thresholds, make_samples
from pytest_perfgate.writers.table import gate_table

ROOT = Path(__file__).resolve().parents[2]


def test_rows_of_one_gate_say_their_label() -> None:
    th = load_thresholds(ROOT / "thresholds.toml")
    rng = np.random.default_rng(5)
    rows = []
    for label in ("8 B", "4 KiB", "1 MiB"):
        v = evaluate(th.gate("allreduce_p99"), make_samples(rng.lognormal(-9, 0.3, 200), "s"), thresholds=th)
        rows.append({**v.to_dict(), "label": label})
    unlabelled = {**rows[0]}
    del unlabelled["label"]
    lines = gate_table([*rows, unlabelled])
    assert [ln.split()[0:3] for ln in lines[2:5]] == [["phase3", "allreduce_p99", "[8"], ["phase3", "allreduce_p99", "[4"],
                                                       ["phase3", "allreduce_p99", "[1"]]
    assert "allreduce_p99 [4 KiB]" in lines[3] and "allreduce_p99 [1 MiB]" in lines[4]
    assert lines[5].split()[1] == "allreduce_p99" and "[" not in lines[5].split()[2]
