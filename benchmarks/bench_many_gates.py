"""A session with thousands of gates (issue 31: 10,006 gates took 272 s, 34 s of it in gates.xml).

    .venv/bin/python benchmarks/bench_many_gates.py                 # 1,000 and 10,000 gates
    .venv/bin/python benchmarks/bench_many_gates.py --gates 1000,2000 --junit-only

A script, not a test: per size it prints the pytest session's wall time (a subprocess, scripted
samples: no engine), the time gates.xml takes to render from that session's decisions.json, and the
longest terminal line. ``--junit-only`` renders gates.xml from a generated decision document only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_perfgate.writers import junit  # noqa: E402

TEST = """
import pytest

NAMES = [f"g{i:05d}" for i in range({n})]

@pytest.mark.gate(*NAMES)
def test_all_gates(perfgate):
    perfgate.check_all(perfgate.samples([100.0] * 30, "ms"))
"""


def project(d: Path, n: int) -> None:
    gates = "".join(f'[gates.g{i:05d}]\nphase = "phase1"\nmetric = "ttft"\nstatistic = "p50"\nmax = "150 ms"\n\n'
                    for i in range(n))
    (d / "thresholds.toml").write_text('[phases.phase1]\ntitle = "many"\n\n' + gates)
    (d / "test_many.py").write_text(TEST.replace("{n}", str(n)))


def session(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        project(d, n)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "test_many.py"], cwd=d, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT),
                            "PATH": "/usr/bin:/bin", "PERFGATE_PREWARM": "0", "HOME": tmp})
        wall = time.perf_counter() - t0
        lines = p.stdout.splitlines()
        longest = max(range(len(lines)), key=lambda i: len(lines[i]), default=0)
        print(f"  longest line (#{longest + 1}): {lines[longest][:150] if lines else ''}")
        doc = json.loads((d / "perfgate-results" / "decisions.json").read_text())
        t0 = time.perf_counter()
        junit.render(doc)
        jt = time.perf_counter() - t0
        print(f"{n:>7,} gates: exit {p.returncode}, session {wall:7.1f} s, gates.xml render {jt:6.2f} s, "
              f"longest terminal line {len(lines[longest]) if lines else 0:,} characters", flush=True)


def junit_only(n: int) -> None:
    v = {"gate": "g", "phase": "phase1", "outcome": "pass", "metric": "ttft", "statistic": "p50", "unit": "ms",
         "observed": 0.1, "n": 30, "summary": "ok"}
    doc = {"schema": "pytest-perfgate/decisions/1", "phases": {"phase1": {
        "title": "many", "outcome": "pass", "verdicts": [{**v, "gate": f"g{i:05d}"} for i in range(n)]}}}
    t0 = time.perf_counter()
    junit.render(doc)
    print(f"{n:>7,} gates: gates.xml render {time.perf_counter() - t0:6.2f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gates", default="1000,10000")
    ap.add_argument("--junit-only", action="store_true")
    ns = ap.parse_args()
    for n in (int(x) for x in ns.gates.split(",")):
        (junit_only if ns.junit_only else session)(n)


if __name__ == "__main__":
    main()
