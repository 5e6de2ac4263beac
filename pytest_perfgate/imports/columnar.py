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

from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..contract import RequestRecord
from ..load import plausible
from ..load.columns import RequestColumns
from .errors import ResultsError
from .stream import BLOCK as READ_BLOCK
from .stream import Malformed

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
