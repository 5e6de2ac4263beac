"""The scripted server records a client's X-Request-ID header in the ground truth: how a client that
sends no ``perfgate`` object (AIPerf) has its requests matched (benchmarks/bench_peers.py)."""

from __future__ import annotations

import json
import urllib.request

from pytest_perfgate.calib import Script, ScriptedServer


def _post(url: str, headers: dict[str, str]) -> None:
    body = json.dumps({"model": "scripted", "prompt": "hi", "max_tokens": 2}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()


def test_the_request_id_header_is_in_the_ground_truth() -> None:
    with ScriptedServer(Script(ttft=0.001, itl=0.001)) as srv:
        _post(srv.base_url, {"X-Request-ID": "5767c23c-c4bc"})
        _post(srv.base_url, {"X-Request-ID": "x" * 300})  # bounded: a client's header is input
        _post(srv.base_url, {})
        got = [t["request_id"] for t in srv.ground_truth()]
    assert got == ["5767c23c-c4bc", "x" * 128, None]
