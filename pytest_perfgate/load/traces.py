"""Traces and datasets as requests with arrival offsets: ``traces.load(path, tokenizer=None)``.

Formats (``format=`` names one; by default it is detected from the suffix and the first row):

* ``sharegpt``: a JSON list of conversations, ``{"id": ..., "conversations": [{"from": "human",
  "value": ...}, {"from": "gpt", "value": ...}, ...]}`` (``conversation``/``messages`` and
  ``role``/``content`` are accepted too). Every user turn is one request whose prompt is the whole
  history so far (earlier turns with the recorded answers), its output length the recorded
  answer's token count; turn ``k`` of a conversation is sent only after turn ``k - 1`` finished.
  No timestamps: replay it at a rate (``LoadConfig(mode="poisson", rate=R)``) or a concurrency.
* ``burstgpt``: BurstGPT's CSV (``Timestamp`` in seconds, ``Request tokens``, ``Response tokens``;
  rows with 0 response tokens, failed requests in the log, are skipped and counted).
* ``mooncake``: JSONL rows ``{"timestamp": ms, "input_length": n, "output_length": m,
  "hash_ids": [...]}``: the prompt is one block of ``block_size`` tokens (512, as Mooncake and
  AIPerf) per hash id, the last one cut to fit ``input_length``; equal hash ids are equal token
  blocks, so rows that share leading hash ids share a real prefix (prefix-cache hits).
* ``jsonl``: generic JSONL rows with ``prompt`` (text) or ``messages`` (chat), optional
  ``max_tokens`` (else ``max_tokens=``), ``timestamp`` (ms) and ``session_id`` (rows of one
  session are its turns, in order).

Timestamps become ``Request.arrival`` in seconds after the trace's first row, and the requests are
sorted by it. Length-only rows (BurstGPT, Mooncake) get token-id prompts of exactly their length
from the engine's tokenizer (load/prompts.py), which they need. With a tokenizer, chat histories
are rendered with its chat template into token ids (the completions API: every engine takes them,
and the prompt length is exact); without one they go as chat requests (``extra["messages"]``, the
openai engine's body). A bad row is a :class:`TraceError` naming the file and line.
"""

from __future__ import annotations

import codecs
import csv
import json
import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..contract import Request
from .prompts import _WORDS, FALLBACK_CORPUS, _encode, _Stream, bos_id

FORMATS = ("sharegpt", "burstgpt", "mooncake", "jsonl")
BLOCK_SIZE = 512  # tokens per Mooncake hash id (Mooncake's traces, AIPerf's default)
_SPACE = re.compile(r"[ \t\r\n]*")
_SEPARATORS = re.compile(r"[ \t\r\n,]*")


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file and line."""


class Trace(list[Request]):
    """The requests of a trace (a plain list of :class:`Request`), with where they came from."""

    def __init__(self, requests: Sequence[Request], *, path: str, format: str, skipped: int = 0) -> None:
        super().__init__(requests)
        self.path, self.format, self.skipped = path, format, skipped

    @property
    def duration(self) -> float | None:
        """Seconds from the first to the last arrival (None without timestamps)."""
        arr = [r.arrival for r in self if r.arrival is not None]
        return max(arr) if arr and len(arr) == len(self) else None


def load(path: str | Path, tokenizer: Any = None, format: str | None = None, *, max_tokens: int = 128,
         block_size: int = BLOCK_SIZE, seed: int = 0, limit: int | None = None) -> Trace:
    """The requests of the trace at ``path`` (see the module docstring); ``limit``: the first rows only."""
    p = Path(path)
    try:
        return _load(p, tokenizer, format, max_tokens, block_size, seed, limit)
    except UnicodeDecodeError:
        bad = _undecodable(p)
        if bad is None:  # not the file's bytes (a tokenizer's own error)
            raise
        raise TraceError(f"{p}:{bad[0]}: not UTF-8 text (byte {bad[1]:,}); a trace is UTF-8 JSON, JSONL or CSV") from None
    except RecursionError:  # a structure nested beyond what the row handling can walk
        raise TraceError(f"{p}: nested too deeply to read") from None


def _load(p: Path, tokenizer: Any, format: str | None, max_tokens: int, block_size: int, seed: int,
          limit: int | None) -> Trace:
    fmt = format or detect(p)
    if fmt not in FORMATS:
        raise TraceError(f"{p}: trace format {fmt!r} unknown (known: {', '.join(FORMATS)})")
    if not p.is_file():
        raise TraceError(f"{p}: no such trace file")
    if fmt in ("burstgpt", "mooncake") and tokenizer is None:
        raise TraceError(f"{p}: a {fmt} trace gives token counts only; its prompts need the engine's tokenizer "
                         "(traces.load(path, tokenizer=engines.tokenizer(NAME)))")
    if block_size < 1:
        raise TraceError(f"{p}: block_size must be >= 1, got {block_size}")
    reqs, skipped = _build(_Builder(p, tokenizer, max_tokens, block_size, seed), fmt, limit)
    if not reqs:
        raise TraceError(f"{p}: no requests in the trace")
    return Trace(_by_arrival(reqs), path=str(p), format=fmt, skipped=skipped)


def _build(build: _Builder, fmt: str, limit: int | None) -> tuple[list[Request], int]:
    if fmt == "sharegpt":
        return build.sharegpt(limit)
    if fmt == "burstgpt":
        return build.burstgpt(limit)
    if fmt == "mooncake":
        return build.mooncake(limit), 0
    return build.jsonl(limit), 0


def _undecodable(path: Path) -> tuple[int, int] | None:
    """(line, byte offset) of the first bytes of ``path`` that are not UTF-8 (read in 1 MiB blocks)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            pending = len(dec.getstate()[0])  # bytes of a sequence split across blocks, decoded with these
            try:
                dec.decode(block)
            except UnicodeDecodeError as e:
                at = max(0, e.start - pending)
                return line + block.count(b"\n", 0, at), offset + at
            line += block.count(b"\n")
            offset += len(block)
    tail = len(dec.getstate()[0])
    return (line, offset - tail) if tail else None  # the file ends inside a sequence, or is UTF-8


def detect(path: Path) -> str:
    """The format of ``path``: from its suffix, and for JSONL the keys of its first row."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "burstgpt"
    if suffix == ".json":
        return "sharegpt"
    if suffix == ".jsonl":
        for _, row in _jsonl_rows(path, 1):
            return "mooncake" if "input_length" in row or "hash_ids" in row else "jsonl"
        return "jsonl"
    raise TraceError(f"{path}: cannot tell the trace format from the suffix {suffix!r}; name it: "
                     f"format = one of {', '.join(FORMATS)}")


def _by_arrival(reqs: list[Request]) -> list[Request]:
    if any(r.arrival is None for r in reqs):
        return reqs
    t0 = min(float(r.arrival or 0.0) for r in reqs)
    out = sorted(reqs, key=lambda r: float(r.arrival or 0.0))
    return [replace(r, arrival=float(r.arrival or 0.0) - t0) for r in out]


def _jsonl_rows(path: Path, limit: int | None) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        got = 0
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            if limit is not None and got >= limit:
                return
            try:
                row = json.loads(line)
            except ValueError as e:
                raise TraceError(f"{path}:{line_no}: not JSON: {e}") from None
            except RecursionError:
                raise TraceError(f"{path}:{line_no}: JSON nested too deeply to read") from None
            if not isinstance(row, dict):
                raise TraceError(f"{path}:{line_no}: a row must be a JSON object, got {type(row).__name__}")
            got += 1
            yield line_no, row


def _json_entries(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, entry) of every element of the top-level JSON array of ``path``. Line numbers are
    counted forward from the previous entry (linear in the file; a count from the start per entry
    made 20k conversations take minutes)."""
    text = path.read_text(encoding="utf-8")
    dec = json.JSONDecoder()
    ws = _SPACE.match(text)
    i = ws.end() if ws else 0
    line, counted = 1, 0  # the line of position ``counted``

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    if not text[i:i + 1] == "[":
        raise TraceError(f"{path}:{line_at(i)}: a ShareGPT file is a JSON list of conversations")
    i += 1
    while True:
        sep = _SEPARATORS.match(text, i)
        i = sep.end() if sep else i
        if i >= len(text):
            raise TraceError(f"{path}:{line_at(len(text))}: the JSON list is not closed")
        if text[i] == "]":
            return
        at = line_at(i)
        try:
            entry, i = dec.raw_decode(text, i)
        except ValueError as e:
            raise TraceError(f"{path}:{at}: not JSON: {e}") from None
        except RecursionError:
            raise TraceError(f"{path}:{at}: JSON nested too deeply to read") from None
        yield at, entry


def _int(row: Mapping[str, Any], key: str, where: str, minimum: int = 1) -> int:
    v = row.get(key)
    n: int | None
    try:
        n = int(str(v).strip()) if not isinstance(v, int) else v
    except ValueError:
        n = None
    if isinstance(v, bool) or n is None or n < minimum:
        raise TraceError(f"{where}: {key} must be an integer >= {minimum}, got {v!r}")
    return n


def _timestamp(row: Mapping[str, Any], key: str, where: str, scale: float) -> float | None:
    if key not in row or row[key] is None or row[key] == "":
        return None
    try:
        t = float(row[key])
    except (TypeError, ValueError):
        t = math.nan
    if not math.isfinite(t) or t < 0:
        raise TraceError(f"{where}: {key} must be a number >= 0, got {row[key]!r}")
    return t * scale


_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
          "bard": "assistant", "model": "assistant", "bing": "assistant", "system": "system"}


class _Builder:
    def __init__(self, path: Path, tok: Any, max_tokens: int, block_size: int, seed: int) -> None:
        self.path, self.tok, self.max_tokens, self.block_size, self.seed = path, tok, max_tokens, block_size, seed
        self._stream: _Stream | None = None
        self._blocks: dict[int, list[int]] = {}
        self._bos: int | None | bool = False  # False: not looked up yet

    # -- chat ----------------------------------------------------------------------------------
    def _chat(self, messages: list[dict[str, str]], mt: int, tag: str, session: str = "", turn: int = 0,
              arrival: float | None = None) -> Request:
        last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), messages[-1]["content"])
        if self.tok is None:
            return Request(prompt=last, max_tokens=mt, api="chat", tag=tag, extra={"messages": messages},
                           session=session, turn=turn, arrival=arrival)
        ids = self._template(messages)
        return Request(prompt=tuple(ids), max_tokens=mt, prompt_tokens=len(ids), tag=tag, session=session,
                       turn=turn, arrival=arrival)

    def _template(self, messages: list[dict[str, str]]) -> list[int]:
        tok = self.tok
        if getattr(tok, "chat_template", None) and hasattr(tok, "apply_chat_template"):
            out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            ids = out["input_ids"] if isinstance(out, Mapping) else out
            return [int(i) for i in ids]
        text = "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in messages) + "Assistant:"
        return _encode(tok, text, True)

    def _count(self, text: str) -> int:
        return max(1, len(_encode(self.tok, text))) if self.tok is not None else self.max_tokens

    def sharegpt(self, limit: int | None) -> tuple[list[Request], int]:
        out: list[Request] = []
        skipped = 0
        for k, (line, conv) in enumerate(_json_entries(self.path)):
            if limit is not None and k >= limit:
                break
            where = f"{self.path}:{line}"
            if not isinstance(conv, dict):
                raise TraceError(f"{where}: a conversation must be a JSON object, got {type(conv).__name__}")
            turns = next((conv[key] for key in ("conversations", "conversation", "messages") if key in conv), None)
            if not isinstance(turns, list):
                raise TraceError(f"{where}: no 'conversations' list in conversation {conv.get('id', k)!r}")
            made = self._conversation(turns, str(conv.get("id", f"conv{k}")), where)
            skipped += not made
            out.extend(made)
        return out, skipped

    def _conversation(self, turns: list[Any], sid: str, where: str) -> list[Request]:
        msgs: list[dict[str, str]] = []
        for j, t in enumerate(turns):
            role = _ROLES.get(str(t.get("from", t.get("role", ""))).lower()) if isinstance(t, dict) else None
            text = t.get("value", t.get("content")) if isinstance(t, dict) else None
            if role is None or not isinstance(text, str):
                raise TraceError(f"{where}: turn {j} of conversation {sid!r} needs 'from' (human/gpt/system) "
                                 f"and a text 'value', got {t!r:.80}")
            msgs.append({"role": role, "content": text})
        out: list[Request] = []
        for j, m in enumerate(msgs):
            if m["role"] != "user":
                continue
            reply = msgs[j + 1] if j + 1 < len(msgs) and msgs[j + 1]["role"] == "assistant" else None
            mt = self._count(reply["content"]) if reply is not None else self.max_tokens
            out.append(self._chat(msgs[: j + 1], mt, "sharegpt", sid, len(out)))
        return out

    # -- length-only -----------------------------------------------------------------------------
    def _exact(self, n: int, index: int, tag: str) -> tuple[int, ...]:
        """A unique token-id prompt of exactly ``n`` tokens, as exact_length_prompts builds one (a unique
        head, then the corpus from a seeded offset; BOS first when the tokenizer adds one), with the
        corpus stream and the BOS looked up once per trace, not once per row (3x faster)."""
        if self._stream is None:
            self._stream = _Stream(self.tok, FALLBACK_CORPUS)
        if self._bos is False:
            self._bos = bos_id(self.tok)
        rnd = random.Random(self.seed * 1_000_003 + index)
        head = _encode(self.tok, f"[{tag} {index} {rnd.choice(_WORDS)}{rnd.randrange(10**6)}] ")
        lead = [self._bos] if isinstance(self._bos, int) else []
        need = n - len(lead)
        return tuple(lead + (head + self._stream.take(rnd.randrange(len(self._stream.ids)), need + 16))[:need])

    def burstgpt(self, limit: int | None) -> tuple[list[Request], int]:
        out: list[Request] = []
        skipped = 0
        with self.path.open(encoding="utf-8", newline="") as f:
            rows = csv.DictReader(f)
            need = ("Timestamp", "Request tokens", "Response tokens")
            missing = [c for c in need if c not in (rows.fieldnames or [])]
            if missing:
                raise TraceError(f"{self.path}:1: BurstGPT columns missing: {', '.join(missing)} "
                                 f"(header: {', '.join(rows.fieldnames or [])})")
            for k, row in enumerate(rows):
                if limit is not None and k >= limit:
                    break
                where = f"{self.path}:{rows.line_num}"
                arrival = _timestamp(row, "Timestamp", where, 1.0)
                if arrival is None:
                    raise TraceError(f"{where}: Timestamp missing")
                n_in = _int(row, "Request tokens", where)
                n_out = _int(row, "Response tokens", where, minimum=0)
                if n_out == 0:  # a failed request in the log: nothing to replay
                    skipped += 1
                    continue
                out.append(Request(prompt=self._exact(n_in, k, "burstgpt"), max_tokens=n_out, prompt_tokens=n_in,
                                   tag="burstgpt", arrival=arrival))
        return out, skipped

    def _block(self, h: int) -> list[int]:
        got = self._blocks.get(h)
        if got is None:
            if self._stream is None:
                self._stream = _Stream(self.tok, FALLBACK_CORPUS)
            head = _encode(self.tok, f"[block {h}] ")
            start = random.Random(self.seed * 7919 + h).randrange(len(self._stream.ids))
            got = self._blocks[h] = (head + self._stream.take(start, self.block_size))[: self.block_size]
        return got

    def mooncake(self, limit: int | None) -> list[Request]:
        out: list[Request] = []
        bos = bos_id(self.tok)
        for line, row in _jsonl_rows(self.path, limit):
            where = f"{self.path}:{line}"
            n_in, n_out = _int(row, "input_length", where), _int(row, "output_length", where)
            arrival = _timestamp(row, "timestamp", where, 1e-3)
            hashes = row.get("hash_ids")
            if hashes is None or hashes == []:
                out.append(Request(prompt=self._exact(n_in, line, "mooncake"), max_tokens=n_out, prompt_tokens=n_in,
                                   tag="mooncake", arrival=arrival))
                continue
            if not isinstance(hashes, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hashes):
                raise TraceError(f"{where}: hash_ids must be a list of integers, got {hashes!r:.80}")
            b = self.block_size
            if not (len(hashes) - 1) * b < n_in <= len(hashes) * b:
                raise TraceError(f"{where}: {len(hashes)} hash ids of {b} tokens cannot make input_length {n_in} "
                                 f"(needs {math.ceil(n_in / b)}; is block_size right?)")
            ids = [t for h in hashes for t in self._block(h)]
            ids = ([bos] if bos is not None else []) + ids
            out.append(Request(prompt=tuple(ids[:n_in]), max_tokens=n_out, prompt_tokens=n_in, tag="mooncake",
                               arrival=arrival))
        return out

    # -- generic JSONL -----------------------------------------------------------------------------
    def jsonl(self, limit: int | None) -> list[Request]:
        out: list[Request] = []
        turns: dict[str, int] = {}
        timed: bool | None = None
        for line, row in _jsonl_rows(self.path, limit):
            where = f"{self.path}:{line}"
            mt = _int(row, "max_tokens", where) if "max_tokens" in row else self.max_tokens
            arrival = _timestamp(row, "timestamp", where, 1e-3)
            if timed is not None and timed != (arrival is not None):
                raise TraceError(f"{where}: timestamp {'missing' if timed else 'given'}: either every row "
                                 "has one or none has")
            timed = arrival is not None
            sid = str(row.get("session_id", "") or "")
            turn = turns.get(sid, 0)
            if sid:
                turns[sid] = turn + 1
            if isinstance(row.get("prompt"), str):
                out.append(Request(prompt=row["prompt"], max_tokens=mt, tag="jsonl", arrival=arrival, session=sid,
                                   turn=turn))
                continue
            msgs = row.get("messages")
            ok = isinstance(msgs, list) and msgs and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in msgs)
            if not ok:
                raise TraceError(f"{where}: a row needs 'prompt' (text) or 'messages' (a list of "
                                 "{'role', 'content'} objects)")
            assert isinstance(msgs, list)
            out.append(self._chat([{"role": m["role"], "content": m["content"]} for m in msgs], mt, "jsonl", sid,
                                  turn, arrival))
        return out
