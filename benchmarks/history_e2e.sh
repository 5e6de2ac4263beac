#!/bin/bash
# The issue-40 try: 14 commits on main, one real pytest run each (the scripted server over real sockets,
# TTFT 20 ms), a slowdown (26 ms) from commit 9 on; gate ttft_p50 has regression = { vs = "main", tolerance = "5%" }.
# Then: cd DIR && perfgate history --changes && perfgate report perfgate-results --history site
# usage: benchmarks/history_e2e.sh [DIR]   (about 15-45 s a commit on a busy 2-core machine)
set -e
WT=$(cd "$(dirname "$0")/.." && pwd)
R=${1:-/tmp/perfgate-history-e2e}; LOGS=$R.logs
if [ -e "$R" ]; then echo "$R exists: name a new directory" >&2; exit 2; fi
mkdir -p $R $LOGS; cd $R
git init -q -b main
cat > thresholds.toml <<'T'
[phases.p1]
title = "Latency"
[gates.ttft_p50]
phase = "p1"
metric = "ttft"
statistic = "p50"
max = "100 ms"
regression = { vs = "main", tolerance = "5%" }
T
cat > test_gates.py <<'P'
from pathlib import Path
import pytest
from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.contract import Request
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig

TTFT = float(Path(__file__).with_name("server_ttft.txt").read_text())

@pytest.fixture(scope="module")
def engine():
    with ScriptedServer(Script(ttft=TTFT, itl=0.005, num_spec_tokens=2, tokens_per_chunk=2)) as srv:
        eng = OpenAIEngine("scripted", {"base_url": srv.base_url, "model": "scripted", "timeout": 10})
        eng.start()
        yield eng
        eng.stop()

@pytest.mark.gate("ttft_p50")
def test_ttft(perfgate, engine):
    reqs = [Request(prompt=tuple(range(1, 9)), max_tokens=4, extra={"perfgate": {"id": f"r{i}"}}) for i in range(300)]
    run = run_load(engine, reqs, LoadConfig(mode="concurrency", concurrency=2, num_requests=300, warmup=4))
    perfgate.check(run, "ttft_p50")
P
printf 'perfgate-results/\n' > .gitignore
for i in $(seq 0 13); do
  if [ $i -ge 9 ]; then echo 0.026 > server_ttft.txt; else echo 0.020 > server_ttft.txt; fi
  echo "change $i" > CHANGES.txt
  git add -A; git -c user.email=a@b -c user.name=a commit -qm "commit $i"
  PYTHONPATH=$WT $WT/.venv/bin/python -m pytest -q -p no:cacheprovider test_gates.py --perfgate-out perfgate-results > $LOGS/run$i.log 2>&1 || echo "run $i rc=$?"
  echo "commit $i $(git rev-parse HEAD) $(tail -1 $LOGS/run$i.log)"
done
