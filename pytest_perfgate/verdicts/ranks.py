"""Ranks and normal scores of a run's values: the transform :mod:`.dependence` estimates memory on.

A 31M-gap ITL run is ranked with one argsort index and the ranks as its only full-size arrays: the
ranks are kept doubled (``2 x`` the average rank, a whole number even where ties share a half rank)
in int32, half the size of the float64 ranks, and the scores are made from them number for number
(:func:`scores_of`), so the caller can drop the scores and make them again rather than hold two
float64 copies (issue 41: the rank stage set the gate's peak memory).

API::

    d = doubled_ranks(x)        # 2 x scipy.stats.rankdata(x), int32 (int64 past 2**30 values); no NaN
    s = scores_of(d, x.size)    # ndtri(rankdata(x) / (n + 1)), the same float64 numbers
    s = normal_scores(x)        # both at once (NaN: rankdata's own handling)
    r = average_ranks(x)        # rankdata(x) as float64
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import numpy.typing as npt
from scipy import special as spc

from .sorting import stable_argsort

Array = npt.NDArray[np.float64]
Ranks = npt.NDArray[np.signedinteger]

RANK_CHUNK = 1 << 18  # sorted positions ranked at a time (~13 MB of temporaries beside the full-size buffer)


def normal_scores(x: Array) -> Array:
    """Van der Waerden scores of ``x`` (average ranks of ties): a transform no tail can dominate.
    The same numbers as ``ndtri(rankdata(x) / (n + 1))``, made in the argsort index's own buffer
    (:func:`_scores_in_index`: no full-size array beside it, where rankdata's way held ~6)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size and not math.isnan(float(x.min())):
        return _scores_in_index(x) if _fits(int(x.size)) else scores_of(doubled_ranks(x), int(x.size))
    from scipy import stats as sps  # (NaN only: scipy.stats is not imported on the way of a verdict)

    r = np.asarray(sps.rankdata(x), dtype=np.float64)
    np.divide(r, x.size + 1.0, out=r)
    return np.asarray(spc.ndtri(r, out=r), dtype=np.float64)


def scores_of(doubled: Ranks, n: int) -> Array:
    """The normal scores from :func:`doubled_ranks` of ``n`` values: ``ndtri((d / 2) / (n + 1))``
    in one float64 array (``d / 2`` is the average rank, exact: the numbers of :func:`normal_scores`)."""
    r = np.multiply(doubled, 0.5, dtype=np.float64)
    np.divide(r, n + 1.0, out=r)
    return np.asarray(spc.ndtri(r, out=r), dtype=np.float64)


def average_ranks(x: Array) -> Array:
    """The average ranks of ``x`` (1-based, ties share the mean of their ranks; no NaN): scipy's
    ``rankdata(x)``, number for number (every rank is a whole or half integer, exact in float64)."""
    return np.multiply(doubled_ranks(x), 0.5, dtype=np.float64)


def doubled_ranks(x: Array) -> Ranks:
    """Twice the average ranks of ``x`` (no NaN): ``first + end + 1`` for a tie group at sorted
    positions ``[first, end)``, an integer, in int32 (int64 when ``2 n + 1`` does not fit), with
    one argsort index beside it (rankdata held ~6 full-size arrays: 1.5 GB for a 31M-gap ITL run).
    A tie group is found in chunks of sorted positions, the one that crosses a chunk's end by a
    binary search beyond it."""
    x = np.asarray(x, dtype=np.float64).ravel()
    n = int(x.size)
    r: Ranks = np.empty(n, dtype=np.int32 if _fits(n) else np.int64)
    _rank_into(x, stable_argsort(x), r)  # any sort: ties get their group's mean rank whatever their order
    return r


def _fits(n: int) -> bool:
    """Doubled ranks of ``n`` values fit in int32."""
    return 2 * n + 1 <= int(np.iinfo(np.int32).max)


def _scores_in_index(x: Array) -> Array:
    """:func:`normal_scores` of ``x`` (no NaN, :func:`_fits`) in one full-size buffer, the argsort
    index's (n x 8 bytes): the index made int32 in its first half (each chunk read before it is
    written over: it lands at or before where it was), the doubled ranks in its second half, then
    the scores as float64 over the whole of it, chunk by chunk from the start (scores ``[a, b)``
    overwrite the ranks ``[2a - n, 2b - n)``, already read). The same numbers as
    :func:`scores_of` of :func:`doubled_ranks`."""
    n = int(x.size)
    buf = stable_argsort(x)  # int64 (numpy's SIMD sort of packed words: 2.6x np.argsort on 31M values)
    words = buf.view(np.int32)  # 2 n
    for a in range(0, n, RANK_CHUNK):
        b = min(n, a + RANK_CHUNK)
        words[a:b] = buf[a:b].astype(np.int32)  # a copy first: the chunk is read whole before the write
    _rank_into(x, words[:n], words[n:])
    f = buf.view(np.float64)
    for a in range(0, n, RANK_CHUNK):
        b = min(n, a + RANK_CHUNK)
        t = np.multiply(words[n + a: n + b], 0.5, dtype=np.float64)  # read before f[a:b] is written
        np.divide(t, n + 1.0, out=t)
        f[a:b] = spc.ndtri(t, out=t)
    return f


def _rank_into(x: Array, order: Ranks, r: Ranks) -> None:
    """Doubled ranks of ``x`` into ``r`` from its argsort index ``order`` (any integer dtype)."""
    n = int(x.size)
    start = 0  # the first sorted position of the tie group the next chunk opens in
    for a in range(0, n, RANK_CHUNK):
        b = min(n, a + RANK_CHUNK)
        idx = order[a:b]
        v = x[idx]
        pos = np.arange(a, b, dtype=np.int64)
        new = np.empty(b - a, dtype=bool)  # a sorted position that opens a tie group
        new[0] = a == 0 or bool(v[0] != x[order[a - 1]])
        np.not_equal(v[1:], v[:-1], out=new[1:])
        first = np.maximum.accumulate(np.where(new, pos, start))
        ends = np.where(np.append(new[1:], True), pos + 1, n)  # the group's end (exclusive) where it closes
        top = float(v[-1])
        if b < n and float(x[order[b]]) == top:  # the last group runs on past this chunk
            ends[-1] = b + bisect.bisect_left(range(b, n), True, key=lambda p: bool(x[order[p]] != top))
        end = np.minimum.accumulate(ends[::-1])[::-1]
        r[idx] = first + end + 1
        start = int(first[-1])
