"""Records of an export as :class:`~pytest_perfgate.load.columns.RequestColumns`, a block at a time.

For the formats whose records are read one at a time (AIPerf's JSON lines, inference-perf's list of
entries), each record is made by the format's own reader exactly as before and kept only until its
block of :data:`BLOCK` is turned into columns: the memory is the columns plus one block. A record that
:mod:`~pytest_perfgate.load.plausible` would fail, or a piece that does not decode, hands the file to
the old path (the whole list of records), so what is read and said never changes.

:func:`array_pieces` cuts a top-level JSON array of objects (inference-perf) into pieces decoded by
orjson (the old path's decoder, so the same values): a piece ends at a ``}`` followed by ``,`` and the next element's ``{`` (inside an entry an
object is followed by a key, never by ``{``), checked by decoding (:mod:`.stream` says why that is
sound).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..contract import RequestRecord
from ..load import plausible
from ..load.columns import RequestColumns
from .errors import ResultsError
from .stream import BLOCK as READ_BLOCK
from .stream import Malformed, _escaped

BLOCK = 50_000  # records a block
_WS = b" \t\r\n"


class Implausible(Exception):
    """A record the old path would fail as implausible (it words that): read the file the old way."""


def build(records: Iterable[RequestRecord]) -> RequestColumns:
    """Columns of ``records`` in send order (stable, as ``list.sort``); :class:`Implausible` at the
    first record :func:`~pytest_perfgate.load.plausible.problem` names."""
    parts: list[RequestColumns] = []
    block: list[RequestRecord] = []
    for r in records:
        if plausible.problem(r) is not None:
            raise Implausible(r.index)
        block.append(r)
        if len(block) >= BLOCK:
            parts.append(RequestColumns.from_records(block))
            block = []
    if block or not parts:
        parts.append(RequestColumns.from_records(block))
    return RequestColumns.concat(parts).sorted_by_sent()


def _element_end(buf: bytes, lo: int, hi: int) -> int:
    """The position after the last ``}`` in ``buf[lo:hi]`` that ends an element of the top-level array
    (followed by a comma and a ``{``); -1 when there is none."""
    at = hi
    while (at := buf.rfind(b"{", lo, at)) > lo:
        head = buf[max(lo, at - 64):at].rstrip(_WS)
        if head.endswith(b","):
            head = head[:-1].rstrip(_WS)
            if head.endswith(b"}"):
                return at - (at - max(lo, at - 64) - len(head))
    return -1


def array_pieces(f: IO[bytes], path: str, limit: int) -> Iterator[list[Any]]:
    """The elements of a top-level JSON array, a decoded list at a time (orjson, as the old path's
    ``jsondoc.load`` decodes the whole: the same values, an int past 64 bits a float too; msgspec would
    keep it an int). :class:`.stream.Malformed` when the file is not cut so (the old path's)."""
    import orjson

    def decode(text: bytes) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            raise Malformed("a piece that does not decode") from None
    buf = b""
    read = 0
    first = True
    while True:
        data = f.read(READ_BLOCK)
        read += len(data)
        if read > limit:
            raise ResultsError(path, f"over {limit >> 20} MiB: not read further (the cap on a file perfgate reads)")
        buf += data
        if first:
            s = buf.lstrip(_WS)
            if not s and data:
                continue
            if s[:1] != b"[":
                raise Malformed("not a JSON array")
            buf, first = s[1:], False
        if not data:
            break
        end = _element_end(buf, 0, len(buf))
        if end > 0:
            yield decode(b"[" + buf[:end] + b"]")
            buf = buf[end:].lstrip(_WS).removeprefix(b",")
    tail = buf.rstrip(_WS)
    if not tail.endswith(b"]"):
        raise Malformed("truncated: no closing bracket")
    yield decode(b"[" + tail[:-1] + b"]") if tail[:-1].strip(_WS) else []


_JWS = rb"[ \t\r\n]*"  # JSON's whitespace (``\s`` would also pass \f and \v, which JSON does not)
_NEXT = re.compile(rb"}" + _JWS + rb"(?:," + _JWS + rb"(?={)|])")  # an object's end, then "," and "{", or "]"
_TRIES = 256  # candidate ends tried for one element (inner lists of objects, "}, {" in a string)
START, ITEM, END, DOC = "start", "item", "end", "doc"


def marker(n: int) -> str:
    """What list ``n`` is replaced by in the document's skeleton (:func:`keyed_lists`)."""
    return f"\x00perfgate-list:{n}"


def keyed_lists(f: IO[bytes], path: str, limit: int, keys: Iterable[str]) -> Iterator[tuple[str, int, Any]]:
    """A JSON document with every list of objects under a key of ``keys`` (at any depth) given an
    element at a time, without building the whole tree: ``(START, n, key)`` where the ``n``-th such
    list begins, ``(ITEM, n, element)`` for each element (decoded by orjson, the old path's decoder:
    the same values), ``(END, n, None)``; last ``(DOC, -1, skeleton)``: the document's bytes with each
    such list replaced by the JSON string :func:`marker` ``(n)`` (the caller decodes it and checks that
    the markers stand where the lists should).

    Cut with byte searches only: a key is ``"name":`` then ``[`` (the key's opening quote unescaped:
    inside a string every quote is escaped, so this is a key); an element is an object from ``{`` to
    the first ``}`` followed by ``, {`` or ``]`` at which it decodes (an earlier one ends an inner
    object or lies in a string: the text up to it is cut short, "unexpected end of data"). Anything
    else (an element that is not an object, a decode error, a truncated file): :class:`.stream.Malformed`;
    over ``limit`` bytes: the cap's :class:`ResultsError`."""
    import orjson

    key_re = re.compile(rb'"(' + b"|".join(re.escape(k.encode()) for k in keys) + rb')"' + _JWS + b":" + _JWS + rb"\[")
    buf = b""
    pos = 0  # buf[:pos] is dealt with
    read = 0
    eof = False
    n = -1
    in_list = False
    first = False  # just after the list's "[" (a "]" may end it there)
    resume = 0  # where the search for the current element's end goes on (ends before it failed)
    tries = 0

    def more() -> None:
        nonlocal buf, pos, read, eof, resume
        data = f.read(READ_BLOCK)
        read += len(data)
        if read > limit:
            raise ResultsError(path, f"over {limit >> 20} MiB: not read further (the cap on a file perfgate reads)")
        eof = not data
        resume = max(0, resume - pos)
        buf = buf[pos:] + data
        pos = 0

    skeleton: list[bytes] = []
    while True:
        if not in_list:
            m = key_re.search(buf, pos)
            while m is not None and _escaped(buf, m.start()):
                m = key_re.search(buf, m.start() + 1)
            if m is None:
                if eof:
                    skeleton.append(buf[pos:])
                    break
                keep = max(pos, len(buf) - 256)  # a key may straddle the block's end
                skeleton.append(buf[pos:keep])
                pos = keep
                more()
                continue
            n += 1
            skeleton.append(buf[pos:m.end() - 1] + orjson.dumps(marker(n)))
            yield START, n, m.group(1).decode()
            pos, in_list, first = m.end(), True, True
            continue
        at = pos
        while at < len(buf) and buf[at] in _WS:
            at += 1
        if at == len(buf):
            if eof:
                raise Malformed("truncated in a list")
            more()
            continue
        if first and buf[at] == 0x5D:  # "]": an empty list
            yield END, n, None
            pos, in_list = at + 1, False
            continue
        if buf[at] != 0x7B:  # "{"
            raise Malformed("a list element that is not an object")
        pos = at
        resume, tries = max(resume, at + 1), 0
        while True:
            m = _NEXT.search(buf, resume)
            if m is None:
                if eof:
                    raise Malformed("truncated in a list")
                more()
                continue
            end = m.start() + 1
            try:
                item = orjson.loads(memoryview(buf)[pos:end])
            except orjson.JSONDecodeError as e:
                tries += 1
                if e.msg != "unexpected end of data" or tries > _TRIES:
                    raise Malformed("an element that does not decode") from None
                resume = end
                continue
            yield ITEM, n, item
            first, pos = False, m.end()
            if buf[m.end() - 1] == 0x5D:  # "]"
                yield END, n, None
                in_list = False
            break
    yield DOC, -1, b"".join(skeleton)

