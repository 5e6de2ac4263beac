"""Issue 39: comparing two dependent 150-request vLLM bench exports (``perfgate gate --run new=A --run
old=B``, a TTFT P90 ratio) printed "too few samples (n=150)", "need >= 36 samples a run (0 more in the
smaller) before any bound exists" and "vllm bench serve --num-prompts 36 would decide it" although 150
were run. Now the count is in requests the user sends: what the runs' dependence makes their 150 worth,
how many requests a run give the 36 independent samples a bound needs, and how many more.

The exports are the committed real one (tests/imports/data/vllm-bench-serve.json, 24 requests) grown
to 150 requests each with seeded AR(1) log-normal TTFTs (phi 0.97: a slowly drifting server), every
other field as vLLM wrote it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import signal

from pytest_perfgate.cli import main

REAL = Path(__file__).parent / "data" / "vllm-bench-serve.json"
GATES = """
[perfgate]
inconclusive = "fail"
[phases.p]
[gates.ttft_ratio]
phase = "p"
metric = "ttft"
statistic = "p90"
compare = "ratio"
runs = ["new", "old"]
max = "1.5"
"""


def _export(path: Path, seed: int, n: int = 150, phi: float = 0.97) -> Path:
    src = json.loads(REAL.read_text())
    rng = np.random.default_rng(seed)
    e = rng.normal(size=n) * math.sqrt(1 - phi**2)
    e[0] = rng.normal()
    ttft = 0.13 * np.exp(0.5 * signal.lfilter([1.0], [1.0, -phi], e))
    doc = dict(src)
    for k in ("input_lens", "output_lens", "itls", "generated_texts", "errors", "queue_times"):
        doc[k] = [src[k][i % len(src[k])] for i in range(n)]
    doc.update(ttfts=ttft.tolist(), latencies=(ttft + 0.2).tolist(), num_prompts=n, completed=n,
               start_times=(489.0 + 0.25 * np.arange(n)).tolist())
    path.write_text(json.dumps(doc))
    return path


def test_a_dependent_comparison_says_its_count_in_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "thresholds.toml").write_text(GATES)
    a, b = _export(tmp_path / "A.json", 1), _export(tmp_path / "B.json", 2)
    rc = main(["gate", "--thresholds", str(tmp_path / "thresholds.toml"), "--out", str(tmp_path / "out"),
               "--run", f"new={a}", "--run", f"old={b}"])
    out = capsys.readouterr().out
    assert rc == 1, out
    v = json.loads((tmp_path / "out" / "decisions.json").read_text())["phases"]["p"]["verdicts"][0]
    assert v["outcome"] == "inconclusive" and v["needed"] > 150, v
    need, worth = v["needed"], v["details"]["independent"]
    assert worth < 36
    assert re.search(rf"too few independent \(n=150, ~{worth:.3g} independent\)", out), out
    assert (f"need >= {need:,} requests a run ({need - 150:,} more in the smaller) before any bound exists: at their "
            f"dependence the 150 requests count as about {worth:.3g} of the 36 independent samples a bound needs") in out
    assert f"vllm bench serve --num-prompts {need} (each run) is the least that could decide it" in out
    assert "--num-prompts 36 " not in out and "(0 more" not in out and "too few samples (n=150)" not in out
