"""Routing models (layouts): which workers store and which probe each tuple, and who holds what.

A layout is the routing table of one epoch (the paper's word for a version of the mapping). It
answers three questions, vectorised over tuples, so one migration mechanism serves every model:

* ``route``: the deliveries of new tuples (tuple, worker, role); role STORE keeps the tuple,
  PROBE joins it against the worker's stored tuples of the other relation (BOTH does both);
* ``holds``: does a worker store this tuple under the layout;
* ``source``: which holder under this (old) layout sends the tuple to a worker that needs it
  under the next layout (locality: the pairwise exchange of Squall's catalogue 2.8).

Implemented: the (n,m) grid of Squall (content-insensitive, each R tuple to the m workers of a
random row, each S tuple to the n workers of a random column), hash partitioning on the key with
partition groups (SHJ; D-CAPE's partition-group relocation changes the group -> worker table),
and BiStream's join-biclique (each tuple stored once on its side, probes sent to the other side).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from joins.online.hashing import key_hash, part_of

STORE, PROBE, BOTH = 1, 2, 3


class Layout(ABC):
    """One epoch's routing table. Worker ids are small ints; ``workers`` lists the active ones."""

    kind: str = ""

    @property
    @abstractmethod
    def workers(self) -> np.ndarray: ...

    @property
    def joiners(self) -> int:
        return len(self.workers)

    @property
    def mapping(self) -> tuple[int, int]:
        """(n, m) of a grid; (0, 0) when the layout is not a grid."""
        return (0, 0)

    def origin(self, worker: int) -> int:
        """The old worker whose position a (possibly new) worker inherits for ``source``."""
        return worker

    @abstractmethod
    def route(self, is_r: np.ndarray, key: np.ndarray, u: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Deliveries of tuples: (tuple index, worker, role) arrays."""

    @abstractmethod
    def holds(self, is_r: bool, key: np.ndarray, u: np.ndarray, worker: int) -> np.ndarray:
        """Whether ``worker`` stores each tuple of one relation under this layout."""

    @abstractmethod
    def source(self, is_r: bool, key: np.ndarray, u: np.ndarray, near: int) -> np.ndarray:
        """The holder (under this layout) that sends each tuple to a worker positioned at
        ``near`` (an id of this layout's worker, or a new id)."""

    def is_active(self, worker: int) -> bool:
        return bool(np.any(self.workers == worker))

    def may_send(self, is_r: bool, me: int, near: int) -> bool:
        """Cheap pre-check: can ``source(.., near)`` be ``me`` for some tuple? (False skips
        the vectorised test; it must never be False when a tuple would be sent.)"""
        return True

    def describe(self) -> dict:
        n, m = self.mapping
        return {"layout": self.kind, "joiners": self.joiners, "n": n, "m": m}


class GridLayout(Layout):
    """Squall's (n,m)-mapping: worker w sits at cell (rows[w], cols[w]); n*m = J cells.

    ``rows``/``cols`` are indexed by worker id (-1: inactive id), so a migration can renumber
    cells while every worker keeps its id (and its state) - the point of the locality-aware
    exchange. ``origins`` maps workers created by a scale-out to the old worker they split from.
    """

    kind = "grid"

    def __init__(self, n: int, m: int, rows: np.ndarray, cols: np.ndarray,
                 origins: dict[int, int] | None = None) -> None:
        self.n, self.m = int(n), int(m)
        self.rows, self.cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
        active = np.flatnonzero(self.rows >= 0)
        self._workers = active
        self.cell = np.full((self.n, self.m), -1, dtype=np.int64)
        self.cell[self.rows[active], self.cols[active]] = active
        if len(active) != self.n * self.m or (self.cell < 0).any():
            raise ValueError(f"grid ({n},{m}) needs exactly one worker per cell")
        self.origins = dict(origins or {})

    @classmethod
    def initial(cls, n: int, m: int) -> GridLayout:
        w = np.arange(n * m)
        return cls(n, m, w // m, w % m)

    @property
    def workers(self) -> np.ndarray:
        return self._workers

    @property
    def mapping(self) -> tuple[int, int]:
        return (self.n, self.m)

    def origin(self, worker: int) -> int:
        return self.origins.get(worker, worker)

    def route(self, is_r, key, u):
        idx_r, idx_s = np.flatnonzero(is_r), np.flatnonzero(~is_r)
        w_r = self.cell[part_of(u[idx_r], self.n), :].ravel()
        w_s = self.cell[:, part_of(u[idx_s], self.m)].T.ravel()
        t = np.concatenate([np.repeat(idx_r, self.m), np.repeat(idx_s, self.n)])
        w = np.concatenate([w_r, w_s])
        return t, w, np.full(len(t), BOTH, dtype=np.int8)

    def holds(self, is_r, key, u, worker):
        if worker >= len(self.rows) or self.rows[worker] < 0:
            return np.zeros(len(u), dtype=bool)
        if is_r:
            return part_of(u, self.n) == self.rows[worker]
        return part_of(u, self.m) == self.cols[worker]

    def source(self, is_r, key, u, near):
        if near < len(self.rows) and self.rows[near] >= 0:
            r0, c0 = self.rows[near], self.cols[near]
        else:
            r0, c0 = near % self.n, near % self.m
        if is_r:
            return self.cell[part_of(u, self.n), c0]
        return self.cell[r0, part_of(u, self.m)]

    def may_send(self, is_r, me, near):
        if near < len(self.rows) and self.rows[near] >= 0:
            r0, c0 = self.rows[near], self.cols[near]
        else:
            r0, c0 = near % self.n, near % self.m
        return bool(c0 == self.cols[me]) if is_r else bool(r0 == self.rows[me])

    # --- transitions -------------------------------------------------------------------
    def _moved(self, n: int, m: int, new_rc) -> GridLayout:
        rows, cols = np.full_like(self.rows, -1), np.full_like(self.cols, -1)
        w = self.workers
        rows[w], cols[w] = new_rc(self.rows[w], self.cols[w])
        return GridLayout(n, m, rows, cols)

    def halve_rows(self) -> GridLayout:
        """(n,m) -> (n/2,2m): the pair (2i,j),(2i+1,j) becomes (i,2j),(i,2j+1) (catalogue 2.8):
        the two swap their R tuples and each keeps one half of its S."""
        if self.n % 2:
            raise ValueError(f"cannot halve n={self.n}")
        return self._moved(self.n // 2, self.m * 2, lambda r, c: (r // 2, 2 * c + r % 2))

    def halve_cols(self) -> GridLayout:
        """(n,m) -> (2n,m/2): the symmetric step; the pair swaps S tuples."""
        if self.m % 2:
            raise ValueError(f"cannot halve m={self.m}")
        return self._moved(self.n * 2, self.m // 2, lambda r, c: (2 * r + c % 2, c // 2))

    def regrid(self, n: int, m: int) -> GridLayout:
        """The layout for (n,m) reached by single pairwise steps when n/self.n is a power of two
        (a multi-step jump moves as much as the steps in sequence); otherwise a fresh
        row-major assignment of the same workers (a direct redistribution)."""
        if n * m != self.n * self.m:
            raise ValueError(f"({n},{m}) does not have {self.n * self.m} cells")
        lay: GridLayout = self
        ratio = max(n, self.n) // min(n, self.n)
        if max(n, self.n) % min(n, self.n) == 0 and ratio & (ratio - 1) == 0:
            while lay.n > n:
                lay = lay.halve_rows()
            while lay.n < n:
                lay = lay.halve_cols()
            return lay
        w = self.workers
        rows, cols = np.full_like(self.rows, -1), np.full_like(self.cols, -1)
        rows[w], cols[w] = np.arange(len(w)) // m, np.arange(len(w)) % m
        return GridLayout(n, m, rows, cols)

    def scale_out(self) -> GridLayout:
        """Elasticity (catalogue 2.9, Fig 4b): every worker splits into 4, (n,m) -> (2n,2m).
        Worker w at (r,c) moves to (2r,2c); new workers J+3k.. take the other three cells and
        are filled from w (their origin)."""
        w = self.workers
        size = int(w.max()) + 1 + 3 * len(w)
        rows, cols = np.full(size, -1, np.int64), np.full(size, -1, np.int64)
        rows[w], cols[w] = 2 * self.rows[w], 2 * self.cols[w]
        origins = {}
        nxt = int(w.max()) + 1
        for k in w:
            for dr, dc in ((1, 0), (0, 1), (1, 1)):
                rows[nxt], cols[nxt] = 2 * self.rows[k] + dr, 2 * self.cols[k] + dc
                origins[nxt] = int(k)
                nxt += 1
        return GridLayout(self.n * 2, self.m * 2, rows, cols, origins)

    def scale_in(self) -> GridLayout:
        """The inverse of :meth:`scale_out`: (n,m) -> (n/2,m/2); the worker at (2r,2c) stays
        as (r,c), the other three send their state away and leave."""
        if self.n % 2 or self.m % 2:
            raise ValueError(f"cannot scale in ({self.n},{self.m})")
        rows, cols = np.full_like(self.rows, -1), np.full_like(self.cols, -1)
        keep = self.workers[(self.rows[self.workers] % 2 == 0) & (self.cols[self.workers] % 2 == 0)]
        rows[keep], cols[keep] = self.rows[keep] // 2, self.cols[keep] // 2
        return GridLayout(self.n // 2, self.m // 2, rows, cols)


class HashLayout(Layout):
    """Content-sensitive hash partitioning on the key (parallel SHJ).

    Keys hash to one of ``groups`` partition groups and ``owner[g]`` is the worker of group g,
    so each tuple goes to exactly one worker, stored and probed there. With groups > J this is
    D-CAPE's model (300 groups): relocation reassigns groups to other workers (:meth:`relocate`).
    """

    kind = "hash"

    def __init__(self, owner: np.ndarray) -> None:
        self.owner = np.asarray(owner, np.int64)
        self._workers = np.unique(self.owner)

    @classmethod
    def initial(cls, joiners: int, groups: int | None = None) -> HashLayout:
        g = groups or joiners
        return cls(np.arange(g) % joiners)

    @property
    def workers(self) -> np.ndarray:
        return self._workers

    def group(self, key: np.ndarray) -> np.ndarray:
        return (key_hash(key) % np.uint64(len(self.owner))).astype(np.int64)

    def route(self, is_r, key, u):
        w = self.owner[self.group(key)]
        return np.arange(len(key)), w, np.full(len(key), BOTH, dtype=np.int8)

    def holds(self, is_r, key, u, worker):
        return self.owner[self.group(key)] == worker

    def source(self, is_r, key, u, near):
        return self.owner[self.group(key)]

    def relocate(self, groups: np.ndarray, to: int) -> HashLayout:
        """Move partition groups to worker ``to`` (D-CAPE's state relocation)."""
        owner = self.owner.copy()
        owner[np.asarray(groups, np.int64)] = to
        return HashLayout(owner)

    def describe(self) -> dict:
        return {**super().describe(), "groups": len(self.owner)}


class BicliqueLayout(Layout):
    """BiStream's join-biclique with random routing: ``a`` units store R, ``b`` units store S
    (workers 0..a-1 and a..a+b-1). A tuple is stored once, at a random unit of its own side,
    and sent as a probe to every unit of the other side; each pair is produced where the later
    of its two tuples probes the earlier (the engine's arrival-order rule keeps it exactly-once).
    """

    kind = "biclique"

    def __init__(self, a: int, b: int) -> None:
        if a < 1 or b < 1:
            raise ValueError("a join-biclique needs at least one unit per side")
        self.a, self.b = int(a), int(b)

    @property
    def workers(self) -> np.ndarray:
        return np.arange(self.a + self.b)

    @property
    def mapping(self) -> tuple[int, int]:
        return (self.a, self.b)

    def route(self, is_r, key, u):
        idx_r, idx_s = np.flatnonzero(is_r), np.flatnonzero(~is_r)
        s_units, r_units = self.a + np.arange(self.b), np.arange(self.a)
        t = np.concatenate([idx_r, idx_s, np.repeat(idx_r, self.b), np.repeat(idx_s, self.a)])
        w = np.concatenate([part_of(u[idx_r], self.a), self.a + part_of(u[idx_s], self.b),
                            np.tile(s_units, len(idx_r)), np.tile(r_units, len(idx_s))])
        role = np.concatenate([np.full(len(idx_r) + len(idx_s), STORE, np.int8),
                               np.full(len(t) - len(idx_r) - len(idx_s), PROBE, np.int8)])
        return t, w, role

    def holds(self, is_r, key, u, worker):
        if is_r:
            return part_of(u, self.a) == worker
        return self.a + part_of(u, self.b) == worker

    def source(self, is_r, key, u, near):
        return part_of(u, self.a) if is_r else self.a + part_of(u, self.b)


def grid_mappings(joiners: int) -> list[tuple[int, int]]:
    """Every (n,m) with n*m = J (for J a power of two: n = 1, 2, 4, ..., J)."""
    return [(n, joiners // n) for n in range(1, joiners + 1) if joiners % n == 0]


def square_mapping(joiners: int) -> tuple[int, int]:
    """(sqrt J, sqrt J), or the divisor pair closest to square (n <= m) when J is no square."""
    n = max(d for d in range(1, math.isqrt(joiners) + 1) if joiners % d == 0)
    return (n, joiners // n)
