"""The one error a reader raises: a file that cannot be read as the format, naming the file, the
record (line or index) and the field."""

from __future__ import annotations

from pathlib import Path


class ResultsError(ValueError):
    """``FILE: record 12: field 'ttfts': missing`` (each part only where known)."""

    def __init__(self, path: str | Path, problem: str, *, record: str = "", field: str = "") -> None:
        parts = [str(path)]
        if record:
            parts.append(record)
        if field:
            parts.append(f"field {field!r}")
        parts.append(" ".join(problem.split())[:300])
        super().__init__(": ".join(parts))
        self.path = str(path)
        self.record = record
        self.field = field


def bounded(text: object, limit: int = 160) -> str:
    """A tool's error text as one short line (a traceback becomes its last line): untrusted input."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    line = "".join(c if c.isprintable() else "?" for c in line)
    return line if len(line) <= limit else line[: limit - 3] + "..."
