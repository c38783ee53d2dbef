"""Deterministic per-tuple randomness: the same tuple routes identically on every recomputation.

Squall routes a tuple to a *uniformly random* row (R) or column (S) of the (n,m) grid. A Spark
task may be recomputed (lineage, retries), so the "random" draw must be a pure function of the
tuple: ``u = splitmix64(seed, relation, tuple id)``, a 32-bit coordinate stored with the tuple.
The partition index under n parts is ``floor(u * n / 2^32)``, so partitions nest when n doubles
(``part(u, 2n) // 2 == part(u, n)``), which makes the pairwise exchange of catalogue 2.8 exact.
"""

from __future__ import annotations

import numpy as np

from datagen.bijection import GOLDEN, mix64

_U64 = np.uint64


def splitmix64(x: np.ndarray) -> np.ndarray:
    """One splitmix64 step (Steele et al.) of state ``x``, vectorised; wraps modulo 2^64."""
    with np.errstate(over="ignore"):
        return mix64(np.asarray(x).astype(_U64) + GOLDEN)


def tuple_u(seed: int, is_r: np.ndarray | bool, tid: np.ndarray) -> np.ndarray:
    """The 32-bit routing coordinate of each tuple (uint32), a pure function of its identity."""
    salt = splitmix64(np.array([seed * 2], dtype=np.int64))[0]
    rel = np.asarray(is_r).astype(_U64)
    with np.errstate(over="ignore"):
        mixed = splitmix64(np.asarray(tid).astype(_U64) ^ salt ^ (rel * _U64(0x5851F42D4C957F2D)))
    return (mixed >> _U64(32)).astype(np.uint32)


def part_of(u: np.ndarray, n: int) -> np.ndarray:
    """Which of ``n`` equal parts the coordinate falls in (nested when n doubles)."""
    return ((np.asarray(u).astype(_U64) * _U64(n)) >> _U64(32)).astype(np.int64)


def key_hash(keys: np.ndarray) -> np.ndarray:
    """A hash of float64 join keys (equal keys, including -0.0/0.0, hash alike; NaN to one value)."""
    k = np.asarray(keys, dtype=np.float64) + 0.0  # -0.0 + 0.0 == +0.0
    k = np.where(np.isnan(k), np.float64(np.nan), k)
    return splitmix64(k.view(np.int64))


def key_group(keys: np.ndarray, groups: int, by: str = "hash") -> np.ndarray:
    """The partition group of each key: ``hash`` spreads keys by :func:`key_hash`; ``mod`` is
    ``key mod groups`` (D-CAPE's generator makes the partition a function of the key, so it
    controls each partition's join ratio); a null key (NaN) falls in group 0 (it joins
    nothing wherever it is stored)."""
    if by == "hash":
        return (key_hash(keys) % np.uint64(groups)).astype(np.int64)
    if by != "mod":
        raise ValueError(f"groups are formed by hash or mod, got {by!r}")
    k = np.asarray(keys, dtype=np.float64)
    return np.where(np.isnan(k), 0, np.mod(np.nan_to_num(k), groups)).astype(np.int64)


def reshuffler_of(seed: int, seq: np.ndarray, j: int) -> np.ndarray:
    """Which of the J reshufflers a tuple lands on (the paper sends each tuple to a random one)."""
    return part_of(tuple_u(seed + 7919, True, seq), j)
