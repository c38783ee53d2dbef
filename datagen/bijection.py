"""Seeded per-row randomness that any slice of rows can compute on its own.

A generator that draws with one sequential random stream (a shuffle of a whole column) must
hold the whole column in one process. These functions instead give row ``i`` its random
position or number from ``(key, i)`` alone, so each Spark task computes its own rows and the
bytes do not depend on how the rows are split into tasks.

- :func:`permute` is a pseudo-random bijection of ``[0, n)``: an unbalanced Feistel network
  over the ``b`` bits of ``n - 1`` (rounds alternately XOR a keyed hash of the low half into
  the high half and of the high half into the low one; each round is its own inverse, so the
  network is a bijection of ``[0, 2^b)``), with cycle walking: re-encrypt until the value falls
  inside ``[0, n)``, which makes it a bijection of ``[0, n)``. As ``2^b < 2n``, a row needs
  fewer than 2 passes on average.
- :func:`uniform` is a hash of ``(key, i)`` to a double in ``[0, 1)``.

The round function is SplitMix64's finaliser (Steele et al., "Fast splittable pseudorandom
number generators", 2014), a full-avalanche 64-bit mixer; six rounds.
"""

from __future__ import annotations

import numpy as np

ROUNDS = 6
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over a uint64 array (wrapping arithmetic; also the online
    engine's routing hash, :mod:`joins.online.hashing`)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def round_keys(key: int) -> np.ndarray:
    """The six round keys of a Feistel network seeded by a 64-bit ``key``."""
    steps = np.arange(1, ROUNDS + 1, dtype=np.uint64) * GOLDEN
    with np.errstate(over="ignore"):
        return mix64(np.uint64(key & (2**64 - 1)) + steps)


def _encrypt(x: np.ndarray, keys: np.ndarray, bits: int) -> np.ndarray:
    low_bits = bits // 2
    low_mask = np.uint64((1 << low_bits) - 1)
    high_mask = np.uint64((1 << (bits - low_bits)) - 1)
    shift = np.uint64(low_bits)
    high, low = x >> shift, x & low_mask
    for r, k in enumerate(keys):
        if r % 2 == 0:
            high = high ^ (mix64(low ^ k) & high_mask)
        else:
            low = low ^ (mix64(high ^ k) & low_mask)
    return (high << shift) | low


def permute(index: np.ndarray, n: int, key: int) -> np.ndarray:
    """Where each row ``index`` (in ``[0, n)``) goes under the bijection of ``[0, n)`` named by
    ``key``; any subset of rows gives the same answers as the whole."""
    index = np.asarray(index, dtype=np.int64)
    if n <= 0 or len(index) == 0:
        return index.copy()
    if index.min() < 0 or index.max() >= n:
        raise ValueError(f"row index outside [0, {n})")
    bits = max(2, int(n - 1).bit_length())
    keys = round_keys(key)
    with np.errstate(over="ignore"):
        out = _encrypt(index.astype(np.uint64), keys, bits)
        outside = np.flatnonzero(out >= np.uint64(n))
        while len(outside):
            out[outside] = _encrypt(out[outside], keys, bits)
            outside = outside[out[outside] >= np.uint64(n)]
    return out.astype(np.int64)


def uniform(index: np.ndarray, key: int) -> np.ndarray:
    """A double in ``[0, 1)`` per row, a hash of ``(key, index)``."""
    k = round_keys(key)[0]
    with np.errstate(over="ignore"):
        bits = mix64(mix64(np.asarray(index, dtype=np.int64).astype(np.uint64) ^ k) + GOLDEN)
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53
