"""The C heap's free pages handed back to the system (glibc's ``malloc_trim``; nothing elsewhere).

numpy's temporaries under glibc's mmap threshold (which rises to 32 MiB after a large block is freed)
come from the heap, and a heap keeps its freed pages: a 1M-request file's decoded pieces left ~250 MB
of them, and the ITL samples' pieces ~165 MiB before the ITL verdict's full-size copies (issue 41)."""

from __future__ import annotations


def trim_heap() -> None:
    """``malloc_trim(0)`` where the C library has it (glibc); nothing otherwise."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


TRIM_AT = 1 << 22  # values: a full-size array of as many float64 (32 MiB) is where :func:`trim_large` trims


def trim_large(n: int) -> None:
    """:func:`trim_heap` before (or after) full-size work on ``n >= TRIM_AT`` values: the heap's freed
    temporaries would otherwise sit beside the next full-size array (issue 41: the ITL verdict)."""
    if n >= TRIM_AT:
        trim_heap()
