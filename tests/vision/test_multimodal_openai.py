"""The multimodal requests of phase 2 through the OpenAI chat API: the ``openai`` engine sends the
``messages`` with ``image_url`` data URIs unchanged, over a real socket, to a scripted server."""

from __future__ import annotations

import json

import numpy as np

from pytest_perfgate.calib.scripted_server import ScriptedServer
from pytest_perfgate.contract import Request
from pytest_perfgate.engines.registry import create
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.vision.vlm import data_uri, decode_data_uri, multimodal_messages


def _request() -> Request:
    img = np.zeros((16, 16, 3), dtype=np.uint8)
    img[4:12, 4:12] = (250, 10, 10)
    return Request(prompt="Which shape is this?", max_tokens=8, api="chat", tag="shapes",
                   extra={"messages": multimodal_messages("Which shape is this?", [data_uri(img)])})


def test_chat_payload_carries_the_image_as_a_data_uri() -> None:
    eng = create("mm", "openai", {"base_url": "http://127.0.0.1:9", "model": "m", "api": "chat"})
    body = json.loads(eng._payload(_request(), "chat"))  # type: ignore[attr-defined]
    parts = body["messages"][0]["content"]
    assert parts[0]["type"] == "image_url" and parts[1] == {"type": "text", "text": "Which shape is this?"}
    img = np.asarray(decode_data_uri(parts[0]["image_url"]["url"]))
    assert img.shape == (16, 16, 3) and tuple(img[8, 8]) == (250, 10, 10)
    assert body["stream"] is True and body["max_tokens"] == 8


def test_multimodal_requests_stream_tokens_over_a_socket() -> None:
    with ScriptedServer() as srv:
        eng = create("mm", "openai", {"base_url": srv.base_url, "model": srv.model, "api": "chat"})
        eng.start()
        try:
            run = run_load(eng, [_request()] * 3, LoadConfig(mode="sequential", num_requests=3))
        finally:
            eng.stop()
    assert len(run.successful) == 3 and all(r.output_tokens == 8 for r in run.successful)
    assert run.perfgate_data("output_throughput").n == 3
