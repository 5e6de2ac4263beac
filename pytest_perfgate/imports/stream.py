"""A large JSON document read in blocks and cut into pieces that msgspec decodes one at a time.

A 1M-request ``vllm bench serve --save-detailed`` file (1.6 GB) is one JSON object of parallel
per-request lists. Decoding it whole builds a Python object a number: the stdlib's ``json.load``
takes ~28 s and 4.2 GB, orjson ~3x less of both but still ~3x the file. Here the file is read
16 MiB at a time and each block is cut with byte searches only (``bytes.find``/``rfind``, C speed):
a top-level key is ``"name":`` (a quote that no backslash escapes: inside a string every quote is
escaped); a list value is cut after its last complete element in the block (a number's ``,``, a
row's ``],``, a string's ``",``). Each piece is decoded with msgspec into a typed list
(``list[float]``, ``list[list[float]]``, ``list[str]``) that the caller turns into numpy columns at
once: the memory is the columns plus one block, never the tree.

The cuts are guesses that decoding checks: a piece cut inside a string, a nested object's key taken
for a top-level one, NaN tokens, a string where a number is due all fail msgspec's decode (JSON's
grammar is unambiguous, so pieces that each decode are the document's own parse). The caller then
reads the file the old way (``jsondoc.load``: orjson, then json for the line and column), whose
errors name the file, key and request: the fast path never changes what is read or said.

Parsers compared on the 100k-request vLLM file (154 MB, this busy 2-core machine; docs/architecture.md):
``json.load`` ~3 s and ~2.5x the file; orjson ~1.5 s, the whole tree (~3x the file); ijson (yajl2_c)
~10 s (an event a number); a numpy structural index of every byte (simdjson's first stage in numpy)
~6 s; msgspec typed lists on byte-search pieces ~1-2 s with one block's memory: chosen.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import IO

from .errors import ResultsError

BLOCK = 16 << 20
NUMBERS, ROWS, STRINGS = "numbers", "rows", "strings"  # a list's elements: how a piece of it is cut
_CUT = {NUMBERS: (b",", 0), ROWS: (b"],", 1), STRINGS: (b'",', 1)}  # (what to find, bytes of it kept)
_WS = b" \t\r\n"


class Malformed(ValueError):
    """The document is not what the fast path reads (the caller reads it the old way, which says why)."""


def _escaped(buf: bytes, at: int) -> bool:
    """Whether the quote at ``at`` is escaped (an odd run of backslashes before it)."""
    k = at
    while k > 0 and buf[k - 1] == 0x5C:
        k -= 1
    return (at - k) % 2 == 1


def _key_at(buf: bytes, colon: int, first: bool) -> tuple[int, bytes] | None:
    """``(position of the comma or brace before the key, the key's JSON text)`` for a ``":`` at
    ``colon`` that ends a key of the top level (a comma or the opening brace before it), else None."""
    if _escaped(buf, colon):
        return None
    q = buf.rfind(b'"', 0, colon)
    if q < 0 or _escaped(buf, q):
        return None
    k = q - 1
    while k >= 0 and buf[k] in _WS:
        k -= 1
    if k < 0 or buf[k] != (b"{" if first else b",")[0]:
        return None
    return k, buf[q:colon + 1]


def members(f: IO[bytes], path: str, limit: int, lists: Mapping[str, str],
            block: int = BLOCK) -> Iterator[tuple[str, bytes, bool]]:
    """``(key, text, whole)`` of a top-level JSON object: for a key of ``lists`` whose value is a list,
    its elements in pieces (``text``: complete elements joined by commas, no brackets; ``whole``
    False), then an empty ``text`` where the list ends; for any other value, ``text`` is the whole value (``whole`` True). Raises
    :class:`Malformed` when the document is not one flat object as cut here; over ``limit`` bytes,
    the file's cap error."""
    import msgspec

    buf = b""
    key: str | None = None
    value_at = 0  # where the current value starts in buf
    opened = False  # the current list's "[" was seen (its pieces are being given)
    read = resume = 0
    while True:
        data = f.read(block)
        read += len(data)
        if read > limit:
            raise ResultsError(path, f"over {limit >> 20} MiB: not read further (the cap on a file perfgate reads)")
        buf = buf[value_at:] + data
        value_at = 0
        if key is None:  # the document's start: "{" then the first key
            s = buf.lstrip(_WS)
            if not s:
                if not data:
                    raise Malformed("empty")
                continue
            if s[:1] != b"{":
                raise Malformed("not a JSON object")
        search = resume
        while (colon := buf.find(b'":', search)) >= 0:
            got = _key_at(buf, colon, key is None)
            search = colon + 2
            if got is None:
                continue
            comma, text = got
            if key is not None:
                yield from _finish(key, buf[value_at:comma], opened, lists)
            try:
                key = msgspec.json.decode(text, type=str)
            except msgspec.DecodeError:
                raise Malformed("a key that is not a string") from None
            value_at, opened = colon + 2, False
        if not data:
            break
        kind = lists.get(key or "")
        if kind is not None and key is not None:
            head = buf[value_at:value_at + 64].lstrip(_WS)
            if not opened and head[:1] == b"[":
                value_at = buf.index(b"[", value_at) + 1
                opened = True
            if opened:
                find, keep = _CUT[kind]
                cut = buf.rfind(find, value_at, max(value_at, len(buf) - 64))  # a key may straddle the block's end
                if kind == STRINGS and cut >= 0 and _escaped(buf, cut):
                    cut = -1
                if cut > value_at:
                    start = _content(buf, value_at, cut + keep)
                    if start >= 0:  # (buf[value_at:cut + keep].lstrip(_WS).removeprefix(b",") not blank)
                        yield key, buf[start:cut + keep], False  # one copy of the piece
                    value_at = cut + keep
        resume = max(0, len(buf) - 64 - value_at)  # where the next search starts in the next buf
    if key is None:
        raise Malformed("no key")
    tail = buf[value_at:].rstrip(_WS)
    if not tail.endswith(b"}"):
        raise Malformed("truncated: no closing brace")
    yield from _finish(key, tail[:-1], opened, lists)


def _content(buf: bytes, lo: int, hi: int) -> int:
    """Where ``buf[lo:hi]``'s piece starts once its leading blanks and one comma are dropped
    (``lstrip(_WS).removeprefix(b",")``), or -1 when only blanks are left (no copy made)."""
    while lo < hi and buf[lo] in _WS:
        lo += 1
    if lo < hi and buf[lo] == 0x2C:  # ","
        lo += 1
    at = lo
    while at < hi and buf[at] in _WS:
        at += 1
    return lo if at < hi else -1


def _finish(key: str, text: bytes, opened: bool, lists: Mapping[str, str]) -> Iterator[tuple[str, bytes, bool]]:
    """The end of a value: a list's last piece (without its "]"), or the whole value."""
    if not opened:
        value = text.strip(_WS)
        if key in lists and value[:1] == b"[" and value.endswith(b"]"):
            inner = value[1:-1]
            if inner.strip(_WS):
                yield key, inner, False
            yield key, b"", False  # an empty piece: the list ended (a list of nothing is a list too)
            return
        yield key, value, True
        return
    last = text.rstrip(_WS)
    if not last.endswith(b"]"):
        raise Malformed(f"{key}: a list without its closing bracket")
    piece = last[:-1].lstrip(_WS).removeprefix(b",")
    if piece.strip(_WS):
        yield key, piece, False
    yield key, b"", False
