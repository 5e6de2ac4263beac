"""The verdicts' binomial and normal quantiles without scipy.stats (issue 41: importing it was
~1.3 s of a `perfgate gate`): the same numbers as scipy.stats', and a gate that never imports it."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

from pytest_perfgate.verdicts import bounds

DATA = Path(__file__).resolve().parents[1] / "imports" / "data"


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_binomial_quantiles_and_cdf_are_scipys() -> None:
    rng = np.random.default_rng(0)
    qs = [0.0, 1.0, 0.5, 0.95, 0.05, 1e-12, 1 - 1e-12, -0.1, 1.1, math.nan, *rng.random(60)]
    ns = [0, 1, 2, 7, 100, 1_000, 31_000_000, 2.5, -1]
    ps = [0.0, 1.0, 0.5, 0.99, 0.01, 0.95, 1e-9, -0.2, 1.5, *rng.random(6)]
    for n in ns:
        for p in ps:
            for q in qs:
                assert _same(bounds.binom_ppf(q, n, p), float(sps.binom.ppf(q, n, p))), (q, n, p)
            for k in (-1, 0, 0.5, 1, 3.7, n / 2, n - 1, n, n + 1, math.nan):
                assert _same(bounds.binom_cdf(k, n, p), float(sps.binom.cdf(k, n, p))), (k, n, p)
    for q in (1e-300, 0.001, 0.05, 0.5, 0.95, 0.99, 0.999999, 0.0, 1.0):
        assert bounds.norm_ppf(q) == float(sps.norm.ppf(q))


def test_a_gate_does_not_import_scipy_stats(tmp_path: Path) -> None:
    (tmp_path / "thresholds.toml").write_text(
        '[phases.p]\n[gates.ttft]\nphase = "p"\nmetric = "ttft"\nstatistic = "p90"\nmax = "10 s"\n'
        '[gates.itl]\nphase = "p"\nmetric = "itl"\nstatistic = "p99"\nmax = "1 s"\n')
    code = ("import sys\nfrom pytest_perfgate.cli import main\n"
            f"rc = main(['gate', {str(DATA / 'vllm-bench-serve.json')!r}, '--thresholds', "
            f"{str(tmp_path / 'thresholds.toml')!r}, '--out', {str(tmp_path / 'out')!r}])\n"
            "print('rc', rc, 'scipy.stats' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    assert last in ("rc 0 False", "rc 1 False"), out.stdout[-2000:] + out.stderr[-2000:]  # decided; no scipy.stats
