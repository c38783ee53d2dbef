"""Random interleave of R and S (the default order of the Squall paper's other experiments).

Without ``p_r`` every interleave of the n_r R and n_s S tuples is equally likely (the overall
rate proportions, catalogue squall 4.4). With ``p_r`` each arrival is R with probability p_r
until one relation is exhausted; the rest of the other follows.
"""

from __future__ import annotations

import numpy as np

from datagen.errors import GeneratorError
from datagen.orders import Arrival

NAME = "random"  # the order's name in order= (found by datagen.orders.discover)


def random_order(n_r: int, n_s: int, rng: np.random.Generator, *,
                 p_r: float | None = None) -> Arrival:
    n = n_r + n_s
    if p_r is None:
        is_r = np.zeros(n, dtype=bool)
        is_r[rng.choice(n, size=n_r, replace=False)] = True
        return Arrival(is_r)
    if not 0.0 <= p_r <= 1.0:
        raise GeneratorError(f"p_r must be in [0, 1], got {p_r}")
    draws = rng.random(n) < p_r
    c_r, c_s = np.cumsum(draws), np.cumsum(~draws)
    over = np.flatnonzero((c_r > n_r) | (c_s > n_s))
    head = draws[: over[0]] if len(over) else draws
    rest_r = n_r - int(head.sum())
    tail = np.ones(rest_r, dtype=bool) if rest_r else np.zeros(n - len(head), dtype=bool)
    return Arrival(np.concatenate([head, tail]))


ORDER = random_order
