"""``np.argsort(x, kind="stable")`` of float64 values by numpy's vectorised sort of packed keys.

numpy sorts a float64 or uint64 array with its SIMD sort (x86-simd-sort, AVX2 and up), but an
*argsort* of float64 takes the scalar introsort: on a 31M-gap ITL run 7.7 s against 0.7 s for the
sort (2-core AMD EPYC, AVX2, numpy 2.3), and the gate's normal scores and arrival order each took
one (issue 41). Here each value becomes one 64-bit word, ``(its order-preserving bit pattern,
top bits) << k | its index`` with ``k`` the bits an index needs; the words are sorted by the SIMD
sort, so the order is by the top ``64 - k`` bits of the value, then by index. Values that share
those top bits but differ below them (about 1 in 40 on 31M random doubles) are put right by a
stable sort of just their runs. The result is ``np.argsort(x, kind="stable")`` index for index
(ties in index order; ``-0.0`` equal to ``0.0``); NaN goes to numpy's own stable sort.

API::

    order = stable_argsort(x)   # int64, == np.argsort(x, kind="stable")
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

CHUNK = 1 << 20  # values packed or checked at a time (the temporaries beside the one full-size array)
SMALL = 1 << 12  # below this numpy's own argsort is as fast: used as it is
_SIGN = np.uint64(1 << 63)
_LOW = np.uint64((1 << 63) - 1)


def stable_argsort(x: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Indices that sort ``x`` (float64, one dimension), equal values in index order: the same
    array as ``np.argsort(x, kind="stable")``, with one n-word array as its only full-size memory."""
    v = np.asarray(x, dtype=np.float64).ravel()
    n = int(v.size)
    if n < SMALL or math.isnan(float(v.min())):  # (min is NaN if any is)
        return np.argsort(v, kind="stable").astype(np.int64, copy=False)
    k = max(1, (n - 1).bit_length())
    shift, mask = np.uint64(k), np.uint64((1 << k) - 1)
    words = np.empty(n, dtype=np.uint64)
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        w = words[a:b]
        np.add(v[a:b], 0.0, out=w.view(np.float64))  # (-0.0 + 0.0 is 0.0: one key for both zeros)
        neg = w >= _SIGN
        np.bitwise_xor(w, _SIGN, out=w)  # not negative: the sign bit set (above every negative)
        np.bitwise_xor(w, _LOW, out=w, where=neg)  # negative: every bit flipped (larger magnitude first)
        np.right_shift(w, shift, out=w)
        np.left_shift(w, shift, out=w)
        np.bitwise_or(w, np.arange(a, b, dtype=np.uint64), out=w)
    words.sort()
    _put_right(v, words, shift, mask)
    np.bitwise_and(words, mask, out=words)
    return words.view(np.int64)


def _put_right(v: npt.NDArray[np.float64], words: npt.NDArray[np.uint64], shift: np.uint64,
               mask: np.uint64) -> None:
    """Within each run of words with equal top bits, order by value (stable): only the runs where
    a value is out of order are touched."""
    n = int(words.size)
    bad: list[npt.NDArray[np.intp]] = []  # sorted positions p whose value is above that at p + 1
    for a in range(0, n - 1, CHUNK):
        b = min(n, a + CHUNK + 1)
        s = v[(words[a:b] & mask).view(np.int64)]
        p = np.flatnonzero(s[1:] < s[:-1])
        if p.size:
            bad.append(p + a)
    if not bad:
        return
    top = words[np.concatenate(bad)] >> shift  # the runs (by their top bits) to put right: sorted already
    top = top[np.concatenate(([True], top[1:] != top[:-1]))]
    first = np.searchsorted(words, top << shift, side="left")
    end = np.searchsorted(words, (top + np.uint64(1)) << shift, side="left")
    sizes = end - first
    run = np.repeat(np.arange(top.size), sizes)
    pos = np.repeat(first - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes) + np.arange(int(sizes.sum()))
    sub = words[pos]
    words[pos] = sub[np.lexsort((v[(sub & mask).view(np.int64)], run))]  # stable: index order within ties
