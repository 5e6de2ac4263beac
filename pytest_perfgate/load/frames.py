"""Length-prefixed pickles between a load run and its client workers (load/workers.py, load/worker.py)."""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

_HEAD = struct.Struct("<I")


def send(out: IO[bytes], msg: Any) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEAD.pack(len(data)) + data)
    out.flush()


def receive(inp: IO[bytes]) -> Any:
    """The next message, None at EOF."""
    head = inp.read(_HEAD.size)
    if len(head) < _HEAD.size:
        return None
    n = _HEAD.unpack(head)[0]
    data = inp.read(n)
    return pickle.loads(data) if len(data) == n else None
