"""How long ``traces.load`` takes on a generated ShareGPT file (issue 31: it was quadratic).

    .venv/bin/python benchmarks/bench_traces.py                  # 5k, 10k, 20k, 100k conversations
    .venv/bin/python benchmarks/bench_traces.py --sizes 5000,10000

A script, not a test: it prints one line per size (conversations, MB, seconds, peak RSS growth).
Conversations are like the public ShareGPT release's: 2-6 turns, a few hundred characters each,
indented JSON (one line per key), loaded without a tokenizer (parsing and line bookkeeping only).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_perfgate.load import traces  # noqa: E402

WORDS = "the a model token prompt cache server answer question long context draft accept batch".split()


def sharegpt(n: int, seed: int = 0) -> list[dict[str, object]]:
    rnd = random.Random(seed)
    out: list[dict[str, object]] = []
    for k in range(n):
        turns: list[dict[str, str]] = []
        for j in range(rnd.randrange(2, 7)):
            text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randrange(20, 80)))
            turns.append({"from": "human" if j % 2 == 0 else "gpt", "value": text})
        out.append({"id": f"c{k}", "conversations": turns})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5000,10000,20000,100000")
    ns = ap.parse_args()
    print(f"{'conversations':>13} {'MB':>7} {'requests':>9} {'load s':>8} {'max RSS MB':>10}")
    with tempfile.TemporaryDirectory() as d:
        for n in (int(s) for s in ns.sizes.split(",")):
            p = Path(d) / f"sharegpt-{n}.json"
            p.write_text(json.dumps(sharegpt(n), indent=1))
            t0 = time.perf_counter()
            tr = traces.load(p)
            dt = time.perf_counter() - t0
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{n:>13,} {p.stat().st_size / 1e6:>7.1f} {len(tr):>9,} {dt:>8.2f} {rss:>10.0f}", flush=True)
            p.unlink()


if __name__ == "__main__":
    main()
