"""Partially sorted arrival (the DINER paper's Fig 14, catalogue diner 4.3 PS(k)): each
relation sorted on its key, cut into ``k`` intervals of equal size, and the intervals streamed
in a random order (sorted inside). ``k`` = 1 is a fully sorted stream; large ``k`` approaches
a random one.

Whether the two relations share one permutation of the intervals the paper does not say:
``shared=False`` (the default) draws one per relation, ``shared=True`` one for both (interval
i of R and of S then hold the same share of the key order). Which relation arrives next is a
random interleave (a timed generator such as ``diner_streams`` keeps its own arrival times
and uses only the within-relation orders).
"""

from __future__ import annotations

import numpy as np

from datagen.errors import GeneratorError
from datagen.orders import Arrival

NAME = "intervals"  # the order's name in order= (found by datagen.orders.discover)


def _order(keys: np.ndarray, k: int, interval_order: np.ndarray) -> np.ndarray:
    by_key = np.argsort(keys, kind="stable")
    pieces = np.array_split(by_key, k)
    return np.concatenate([pieces[i] for i in interval_order]) if len(keys) else by_key


def intervals_order(n_r: int, n_s: int, rng: np.random.Generator, *, k: int = 10,
                    shared: bool = False, keys_r: np.ndarray, keys_s: np.ndarray) -> Arrival:
    if k < 1:
        raise GeneratorError(f"intervals needs k >= 1, got {k}")
    first = rng.permutation(k)
    second = first if shared else rng.permutation(k)
    is_r = np.zeros(n_r + n_s, dtype=bool)
    is_r[rng.choice(n_r + n_s, size=n_r, replace=False)] = True
    return Arrival(is_r, perm_r=_order(keys_r, k, first), perm_s=_order(keys_s, k, second))


ORDER = intervals_order
