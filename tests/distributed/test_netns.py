"""Two real hosts from network namespaces + veth: single-node vs cross-node measured in one run,
unshaped and tc-shaped links, the cross-node gate evaluated on both; cleanup always."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.distributed import netns
from pytest_perfgate.distributed.netns import NetnsHosts, Shaping
from pytest_perfgate.distributed.pertoken import per_token_times
from pytest_perfgate.distributed.phase3 import Phase3Params, cross_node, single_node
from pytest_perfgate.runtime.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(netns.unavailable_reason() is not None, reason=str(netns.unavailable_reason()))


def _mine() -> list[str]:
    return [n for n in netns.list_namespaces() if n.startswith(f"{netns.PREFIX}-{os.getpid()}-")]


def test_shaped_and_unshaped_links_are_measured_across_real_namespaces() -> None:
    """Single-node and cross-node runs over a real veth pair, then the same with the link shaped by
    ``tc``: the ranks run in the two namespaces over the veth (gloo on its device), the shaping is
    installed on both ends, every run records its per-token times, the cross-node gate evaluates
    both pairs with the suite's P99-difference method, and nothing is left behind.

    What the verdicts say is printed, not asserted: they compare two wall-clock measurements of a
    shared machine (single-node per-token P99 upper bounds reached 80-185 ms at load averages 15-22
    on 2 cores, and the unshaped pass failed once at load 5 beside two busy loops). The decision rule
    is proven on scripted and recorded timings instead (tests/stats/test_difference_sizing.py, the
    recorded H200 fixture in tests/distributed/test_pertoken.py)."""
    th = load_thresholds(ROOT / "thresholds.toml")
    p = Phase3Params.parse(th.params["phase3"])
    # the embedded model's message (hidden 256, fp32) with one layer (2 all-reduces per token), so that
    # 1,000 tokens fit the CI budget on a loaded 2-core machine
    p = replace(p, shape=replace(p.shape, layers=1))
    g = th.gate("cross_node_p99_increase")
    k = p.shape.allreduces_per_token
    with NetnsHosts(tag="g") as h:
        assert set(_mine()) == {h.ns_a, h.ns_b}
        single = single_node(h, p.decode_spec(1000))
        fast = cross_node(h, p.decode_spec(1000))
        h.shape(p.shaped_link)
        for ns, dev in ((h.ns_a, h.dev_a), (h.ns_b, h.dev_b)):
            shown = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev],
                                   capture_output=True, text=True, check=True).stdout
            assert p.shaped_link.qdisc in shown and "rate" in shown, shown
        slow = cross_node(h, p.decode_spec(p.shaped_tokens))
    assert _mine() == []  # namespaces, link and rank processes gone
    assert fast["comm_env"]["GLOO_SOCKET_IFNAME"] == h.dev_a and fast["hosts"] == [h.ns_a, h.ns_b]
    assert slow["hosts"] == [h.ns_a, h.ns_b]
    assert single["comm_env"]["GLOO_SOCKET_IFNAME"] == "lo"
    print("priority:", single["priority"])
    ts, tf, tsl = (per_token_times(np.asarray(d["sizes"][0]["times_us"]) / 1e6, k) for d in (single, fast, slow))
    assert (ts.size, tf.size, tsl.size) == (1000, 1000, p.shaped_tokens)
    assert np.all(np.isfinite(np.concatenate([ts, tf, tsl]))) and ts.min() > 0
    for treat in (tf, tsl):
        v = evaluate(g, (make_samples(treat, "s"), make_samples(ts, "s")), confidence=0.95, thresholds=th)
        print(v.summary())
        assert v.outcome in ("pass", "fail", "inconclusive") and v.unit == "ms", v.summary()
        assert v.triggered == (("single_node",) if v.outcome == "fail" else ())


def test_shaping_commands_and_errors() -> None:
    assert Shaping("5mbit", "htb").commands("ns", "d")[1][-4:] == ["rate", "5mbit", "burst", "32kbit"]
    with pytest.raises(netns.NetnsError, match="tbf' or 'htb"):
        Shaping(qdisc="netem").commands("ns", "d")


def test_stale_namespaces_of_a_killed_run_are_cleaned_next_time() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # a pid that no longer runs
    stale = f"{netns.PREFIX}-{p.pid}-xa"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in netns.clean_stale()
        assert stale not in netns.list_namespaces()
    finally:
        subprocess.run(["ip", "netns", "delete", stale], capture_output=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_cleanup_after_ctrl_c_and_after_sigkill(sig: int) -> None:
    code = ("import time, sys\nfrom pytest_perfgate.distributed.netns import NetnsHosts\n"
            "with NetnsHosts(tag='c') as h:\n    print(h.ns_a, flush=True)\n    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout is not None
    name = p.stdout.readline().strip()
    assert name in netns.list_namespaces()
    p.send_signal(sig)
    p.wait(timeout=scaled(120))
    if sig == signal.SIGKILL:  # nothing could run in the killed process: the next run cleans up
        assert name in netns.list_namespaces()
        netns.clean_stale()
    deadline = time.monotonic() + scaled(120)  # liveness only: the namespace goes, however busy the machine
    while name in netns.list_namespaces() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in netns.list_namespaces() and name.replace("ca", "cb") not in netns.list_namespaces()
