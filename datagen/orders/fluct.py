"""The Squall paper's fluctuating arrival (§5.4, catalogue squall 4.4) with factor k.

The cardinality ratio alternates between k and 1/k: one relation streams until it has sent k
times as many tuples as the other, then it is quiesced and the other streams until it has sent
k times as many, and so on; when one relation is exhausted the rest of the other follows. As
in Squall's StormInterchangingDataSource (an implementation detail the paper leaves open), the
relation ``first`` (default S = Squall's relation 2) opens with ``initial`` = 2 tuples, then
the other relation starts the alternation; each phase length is ceil(k*sent_other) - sent_self,
exactly Squall's ``nextToStop`` for integer k. Deterministic: the seed is not used.
"""

from __future__ import annotations

import math

import numpy as np

from datagen.errors import GeneratorError
from datagen.orders import Arrival

NAME = "fluct"  # the order's name in order= (found by datagen.orders.discover)


def phases(n_r: int, n_s: int, k: float, first: str = "S", initial: int = 2) -> list[tuple[str, int]]:
    """The (relation, tuple count) runs of the order."""
    if not k > 1:
        raise GeneratorError(f"fluctuation factor k must be > 1, got {k}")
    if first not in ("R", "S"):
        raise GeneratorError(f"first must be R or S, got {first!r}")
    if initial < 1:
        raise GeneratorError(f"initial must be >= 1, got {initial}")
    left = {"R": n_r, "S": n_s}
    sent = {"R": 0, "S": 0}
    runs: list[tuple[str, int]] = []

    def emit(side: str, want: int) -> None:
        n = min(want, left[side])
        if n:
            runs.append((side, n))
            left[side] -= n
            sent[side] += n

    side = first
    emit(side, initial)
    while left["R"] and left["S"]:
        side = "R" if side == "S" else "S"
        other = "S" if side == "R" else "R"
        emit(side, max(1, math.ceil(k * sent[other]) - sent[side]))
    for s in ("R", "S"):
        emit(s, left[s])
    return runs


def fluct(n_r: int, n_s: int, rng: np.random.Generator, *, k: float = 2.0, first: str = "S",
          initial: int = 2) -> Arrival:
    runs = phases(n_r, n_s, k, first, initial)
    if not runs:
        return Arrival(np.zeros(0, dtype=bool))
    sides = np.array([s == "R" for s, _ in runs])
    return Arrival(np.repeat(sides, [n for _, n in runs]))


ORDER = fluct
