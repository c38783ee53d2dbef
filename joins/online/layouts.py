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

from joins.online.hashing import key_group, part_of
from joins.online.kernel import expand

STORE, PROBE, BOTH = 1, 2, 3


class Layout(ABC):
    """One epoch's routing table. Worker ids are small ints; ``workers`` lists the active ones.

    ``move_mode`` says how state moves when this layout replaces another (the engine runs one
    mechanism, :mod:`joins.online.migration`, in these three ways):

    * ``"rejoin"`` (Squall's Alg 3): a moving tuple leaves its sender's index when the move
      starts, mid-batch at the trigger tuple; the receiver joins it with the tuples stored
      there since the start, at a rate (grid layouts, where the new layout routes every later
      partner to the receiver).
    * ``"handoff"``: a moving tuple stays in its sender's index until it is sent and the
      receiver only stores it; probes during the move reach old and new holders
      (:meth:`route_moving`). Exact when each result has one prober and one stored partner
      (join-biclique).
    * ``"boundary"``: the move happens between two micro-batches, all at once, after the
      deliveries routed by the old layout: nothing arrives while state is in flight, so it is
      exact for any program and any number of inputs (partition-group relocation, hash
      rescaling; D-CAPE pauses a moving group's input the same way).

    ``max_inputs``: how many inputs the layout can route (2 for layouts with an R and an S
    side, None for any).
    """

    kind: str = ""
    move_mode: str = "rejoin"
    max_inputs: int | None = 2

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

    def route_moving(self, old: Layout, is_r, key, u):
        """Routing of new tuples while state moves from ``old`` (handoff layouts override)."""
        return self.route(is_r, key, u)

    def moves(self, new: Layout, is_r: bool, key, u, me: int):
        """What worker ``me`` does with the tuples of one relation it holds under this (old)
        layout when ``new`` replaces it: (keep mask, [(dest, send mask), ...]). A receiver
        needs what it stores under ``new`` and did not store before; it gets each tuple from
        the old holder ``source(.., near=dest)`` (locality, catalogue 2.8)."""
        sends = []
        for dest in new.workers:
            dest = int(dest)
            if dest == me:
                continue
            near = new.origin(dest)
            if not self.may_send(is_r, me, near):
                continue
            need = new.holds(is_r, key, u, dest)
            if self.is_active(dest):
                need &= ~self.holds(is_r, key, u, dest)
            need &= self.source(is_r, key, u, near) == me
            if need.any():
                sends.append((dest, need))
        keep = new.holds(is_r, key, u, me) if new.is_active(me) else \
            np.zeros(len(u), dtype=bool)
        return keep, sends

    def rescale(self, units: tuple[int, ...]) -> Layout:
        """The layout with another number of units (``rescale=`` of the stream CLI)."""
        raise ValueError(f"a {self.kind} layout cannot be rescaled")

    def retire(self, stored: dict[int, int]) -> Layout | None:
        """The layout without units that were left to drain and now hold nothing (``stored``:
        tuples held per worker after a step), or None."""
        return None

    @property
    def drains(self) -> bool:
        """Units are left to drain: :meth:`retire` may change the layout after any step."""
        return False


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

    def rescale(self, units: tuple[int, ...]) -> GridLayout:
        """J' joiners on the square-most (n', m'): the first min(J, J') workers keep their ids
        (and what they hold that stays theirs), new workers get fresh ids, the rest leave."""
        if len(units) != 1 or units[0] < 1:
            raise ValueError("a grid rescales to a joiner count, e.g. 16")
        n, m = square_mapping(units[0])
        if n * m == self.n * self.m:
            return self.regrid(n, m)
        w = self.workers
        ids = np.concatenate([w, int(w.max()) + 1 + np.arange(max(0, n * m - len(w)))])[: n * m]
        rows, cols = np.full(int(ids.max()) + 1, -1, np.int64), np.full(int(ids.max()) + 1, -1,
                                                                         np.int64)
        rows[ids], cols[ids] = np.arange(n * m) // m, np.arange(n * m) % m
        return GridLayout(n, m, rows, cols)

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
    ``by``: how keys form groups (:func:`~joins.online.hashing.key_group`: ``hash`` or D-CAPE's
    ``mod``). ``push``: orders the manager gives with this layout, carried out when it takes
    over: worker -> the share of its in-memory state to push to disk (D-CAPE's active-disk);
    a layout derived from this one carries none.
    """

    kind = "hash"
    move_mode = "boundary"
    max_inputs = None

    def __init__(self, owner: np.ndarray, by: str = "hash",
                 push: dict[int, float] | None = None) -> None:
        self.owner = np.asarray(owner, np.int64)
        self._workers = np.unique(self.owner)
        self.by = by
        self.push = dict(push or {})

    @classmethod
    def initial(cls, joiners: int, groups: int | None = None, by: str = "hash") -> HashLayout:
        g = groups or joiners
        return cls(np.arange(g) % joiners, by)

    @property
    def workers(self) -> np.ndarray:
        return self._workers

    def group(self, key: np.ndarray) -> np.ndarray:
        return key_group(key, len(self.owner), self.by)

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
        return HashLayout(owner, self.by)

    def ordering(self, push: dict[int, float]) -> HashLayout:
        """The same routing with the manager's push orders (carried out at the switch)."""
        return HashLayout(self.owner, self.by, push)

    def rescale(self, units: tuple[int, ...]) -> HashLayout:
        """J' workers (ids 0..J'-1): partition group g goes to worker g mod J'."""
        if len(units) != 1 or units[0] < 1:
            raise ValueError("a hash layout rescales to a worker count, e.g. 8")
        return HashLayout(np.arange(len(self.owner)) % units[0], self.by)

    def describe(self) -> dict:
        return {**super().describe(), "groups": len(self.owner)}


class BicliqueLayout(Layout):
    """BiStream's join-biclique with random routing: the units in ``r_ids`` store R, those in
    ``s_ids`` store S. A tuple is stored once, at a random unit of its own side, and sent as a
    probe to every unit of the other side; each pair is produced where the later of its two
    tuples probes the earlier (the engine's arrival-order rule keeps it exactly-once).

    Unit ids are explicit per side, so a resize never renumbers a unit that stays: adding R
    units does not touch the S units' ids (and state). A resize moves no state between units
    that stay (any placement is valid when probes reach the whole other side): new tuples go to
    the new side's units, and only retiring units hand their tuples over (``move_mode`` =
    "handoff": a moving tuple stays in its sender's index, where every probe still reaches it,
    until its receiver holds it).
    """

    kind = "biclique"
    move_mode = "handoff"

    def __init__(self, a: int | np.ndarray, b: int | np.ndarray,
                 draining: np.ndarray | None = None) -> None:
        if np.isscalar(a):
            a, b = np.arange(int(a)), int(a) + np.arange(int(b))
        self.r_ids, self.s_ids = np.asarray(a, np.int64), np.asarray(b, np.int64)
        # retired units still holding state: probed, never stored to, gone once empty
        # (their state expired), so a windowed biclique shrinks without moving anything
        self.draining = np.zeros(0, np.int64) if draining is None else \
            np.asarray(draining, np.int64)
        if len(self.r_ids) < 1 or len(self.s_ids) < 1:
            raise ValueError("a join-biclique needs at least one unit per side")
        if len(np.intersect1d(self.r_ids, self.s_ids)) or \
                len(np.unique(self.r_ids)) != len(self.r_ids) or \
                len(np.unique(self.s_ids)) != len(self.s_ids):
            raise ValueError("join-biclique unit ids must be distinct")
        self.a, self.b = len(self.r_ids), len(self.s_ids)
        self._workers = np.sort(np.concatenate([self.r_ids, self.s_ids, self.draining]))
        self._draining_side: dict[bool, np.ndarray] = {True: np.zeros(0, np.int64),
                                                       False: np.zeros(0, np.int64)}
        self.rebalance = False  # moving to this layout moves every unit's state (resize)

    @property
    def workers(self) -> np.ndarray:
        return self._workers

    @property
    def mapping(self) -> tuple[int, int]:
        return (self.a, self.b)

    def side(self, is_r: bool) -> np.ndarray:
        return self.r_ids if is_r else self.s_ids

    def probed(self, is_r: bool) -> np.ndarray:
        """The units holding side ``is_r``'s tuples, which the other side probes (active and
        draining)."""
        return np.union1d(self.side(is_r), self._draining_side[is_r])

    def route(self, is_r, key, u):
        idx_r, idx_s = np.flatnonzero(is_r), np.flatnonzero(~is_r)
        pr_r, pr_s = self.probed(True), self.probed(False)  # R units and S units to probe
        t = np.concatenate([idx_r, idx_s, np.repeat(idx_r, len(pr_s)),
                            np.repeat(idx_s, len(pr_r))])
        w = np.concatenate([self.r_ids[part_of(u[idx_r], self.a)],
                            self.s_ids[part_of(u[idx_s], self.b)],
                            np.tile(pr_s, len(idx_r)), np.tile(pr_r, len(idx_s))])
        role = np.concatenate([np.full(len(idx_r) + len(idx_s), STORE, np.int8),
                               np.full(len(t) - len(idx_r) - len(idx_s), PROBE, np.int8)])
        return t, w, role

    def drain(self, a: int, b: int) -> BicliqueLayout:
        """Like :meth:`resize`, but the units that leave keep their state and keep being probed
        until it has expired (a windowed join), instead of handing it over."""
        new = self.resize(a, b)
        gone_r = np.setdiff1d(self.probed(True), new.r_ids)
        gone_s = np.setdiff1d(self.probed(False), new.s_ids)
        out = BicliqueLayout(new.r_ids, new.s_ids, np.concatenate([gone_r, gone_s]))
        out._draining_side = {True: gone_r, False: gone_s}
        return out

    @property
    def drains(self) -> bool:
        return len(self.draining) > 0

    def retire(self, stored):
        empty = [int(w) for w in self.draining if stored.get(int(w), 0) == 0]
        return self.without(empty) if empty else None

    def without(self, units) -> BicliqueLayout:
        """This layout with drained (now empty) units gone."""
        out = BicliqueLayout(self.r_ids, self.s_ids, np.setdiff1d(self.draining, units))
        out._draining_side = {k: np.setdiff1d(v, units) for k, v in self._draining_side.items()}
        return out

    def route_moving(self, old: Layout, is_r, key, u):
        """Routing while tuples move from ``old``: stored by this layout, probing every unit of
        the other side in either layout (a retiring unit holds state until it is sent)."""
        if not isinstance(old, BicliqueLayout):
            raise ValueError("a join-biclique moves only from a join-biclique")
        union = BicliqueLayout(np.union1d(self.probed(True), old.probed(True)),
                               np.union1d(self.probed(False), old.probed(False)))
        idx_r, idx_s = np.flatnonzero(is_r), np.flatnonzero(~is_r)
        t = np.concatenate([idx_r, idx_s, np.repeat(idx_r, union.b), np.repeat(idx_s, union.a)])
        w = np.concatenate([self.r_ids[part_of(u[idx_r], self.a)],
                            self.s_ids[part_of(u[idx_s], self.b)],
                            np.tile(union.s_ids, len(idx_r)), np.tile(union.r_ids, len(idx_s))])
        role = np.concatenate([np.full(len(idx_r) + len(idx_s), STORE, np.int8),
                               np.full(len(t) - len(idx_r) - len(idx_s), PROBE, np.int8)])
        return t, w, role

    def place(self, is_r: bool, u: np.ndarray) -> np.ndarray:
        """Where a tuple is stored when it arrives under this layout (or must leave a unit)."""
        ids = self.side(is_r)
        return ids[part_of(u, len(ids))]

    def holds(self, is_r, key, u, worker):
        # the placement of a tuple that arrived under this layout; a unit that stays keeps
        # what it holds across resizes (see moves)
        return self.place(is_r, u) == worker

    def source(self, is_r, key, u, near):
        return self.place(is_r, u)

    def moves(self, new: Layout, is_r: bool, key, u, me: int):
        """(keep mask, [(dest, mask)]) of the tuples unit ``me`` holds: a unit that stays keeps
        everything; a retiring unit sends each tuple to its placement under ``new``. Under a
        rebalancing ``new`` (:meth:`resize`), every unit keeps only what ``new`` places on it
        and sends the rest there: a full-history side is even again after a scale-out."""
        if not isinstance(new, type(self)):
            raise ValueError(f"a {type(self).__name__} moves only to a layout of its kind")
        dest = new.source(is_r, key, u, me)  # each tuple's placement under the new layout
        if new.rebalance:
            keep = dest == me
            return keep, [(int(d), dest == d) for d in np.unique(dest[~keep])]
        if np.any(new.probed(is_r) == me):  # stays, or drains where it is
            return np.ones(len(u), bool), []
        return np.zeros(len(u), bool), [(int(d), dest == d) for d in np.unique(dest)]

    def resize(self, a: int, b: int, rebalance: bool = False) -> BicliqueLayout:
        """``a`` R units and ``b`` S units: units that stay keep their ids, new units get fresh
        ids, the last units of a shrinking side retire. ``rebalance``: the state moves too,
        each stored tuple to its placement under the new layout (2PS on a full history)."""
        nxt = int(max(self._workers.max(), self.draining.max(initial=-1))) + 1
        r = self.r_ids[:a] if a <= self.a else np.concatenate(
            [self.r_ids, nxt + np.arange(a - self.a)])
        nxt += max(0, a - self.a)
        s = self.s_ids[:b] if b <= self.b else np.concatenate(
            [self.s_ids, nxt + np.arange(b - self.b)])
        out = BicliqueLayout(r, s)
        out.rebalance = rebalance
        return out

    def rescale(self, units: tuple[int, ...]) -> BicliqueLayout:
        if len(units) != 2:
            raise ValueError("a join-biclique rescales to R+S units, e.g. 6+4")
        return self.resize(*units)


class ContRandLayout(BicliqueLayout):
    """BiStream's ContRand routing (Alg 1, "JBx-CRy"): each side's units are split into
    subgroups (``r_groups``: d arrays of R unit ids, ``s_groups``: e of S); a tuple is stored
    at a random unit (its coordinate u) of the subgroup its key maps to on its own side and
    probes every unit of the subgroup(s) its key maps to on the other side. d = e = 1 is random
    routing; one unit per subgroup is hash partitioning.

    Equi-joins map a key by hash (``h_R(v) = hash(v) mod d``, ``h_S(v) = hash(v) mod e``: equal
    keys meet whatever d and e). The paper runs ContRand on its band query without saying how;
    the choice here: subgroups own equal-width ranges of ``key_range`` (Alg 1's
    ``ValueRangeOf``), a tuple is stored by its key's range and probes every opposite subgroup
    whose range meets [key - band, key + band] (one, or two at a boundary): exact, since a
    partner's key lies in that interval. A null key is stored and probes nothing.
    """

    kind = "biclique"

    def __init__(self, r_groups: list, s_groups: list, band: float | None = None,
                 key_range: tuple[float, float] | None = None,
                 r_draining: list | None = None, s_draining: list | None = None) -> None:
        self.r_groups = [np.asarray(g, np.int64) for g in r_groups]
        self.s_groups = [np.asarray(g, np.int64) for g in s_groups]
        if not self.r_groups or not self.s_groups or \
                any(len(g) == 0 for g in self.r_groups + self.s_groups):
            raise ValueError("ContRand needs at least one unit in every subgroup")
        # per subgroup, units that left it and still hold state: probed, never stored to
        self.r_draining = [np.asarray(g, np.int64) for g in (r_draining or
                                                             [[]] * len(self.r_groups))]
        self.s_draining = [np.asarray(g, np.int64) for g in (s_draining or
                                                             [[]] * len(self.s_groups))]
        gone = [np.concatenate(d) for d in (self.r_draining, self.s_draining)]
        super().__init__(np.concatenate(self.r_groups), np.concatenate(self.s_groups),
                         np.concatenate(gone))
        self._draining_side = {True: gone[0], False: gone[1]}
        self.band = band
        if band is not None and key_range is None:
            raise ValueError("ContRand on a band join needs the key range its subgroups split")
        self.key_range = None if key_range is None else (float(key_range[0]),
                                                         float(key_range[1]))
        # flat unit ids per side, subgroup by subgroup (its storing units, then its draining
        # ones), each subgroup's first position, and how many of its units store
        self._flat, self._start, self._stores = {}, {}, {}
        for side, groups, drains in ((True, self.r_groups, self.r_draining),
                                     (False, self.s_groups, self.s_draining)):
            self._flat[side] = np.concatenate([np.concatenate([g, d])
                                               for g, d in zip(groups, drains, strict=True)])
            self._start[side] = np.concatenate(
                [[0], np.cumsum([len(g) + len(d) for g, d in zip(groups, drains, strict=True)])])
            self._stores[side] = np.array([len(g) for g in groups], np.int64)

    @classmethod
    def even(cls, r_units: int, s_units: int, d: int, e: int, band: float | None = None,
             key_range: tuple[float, float] | None = None) -> ContRandLayout:
        """``r_units`` R units in d equal subgroups, ``s_units`` S units in e (ids 0..)."""
        if d < 1 or e < 1 or r_units % d or s_units % e:
            raise ValueError(f"ContRand subgroups must divide the units: {r_units} R units in "
                             f"{d}, {s_units} S units in {e}")
        r = np.arange(r_units).reshape(d, -1)
        s = r_units + np.arange(s_units).reshape(e, -1)
        return cls(list(r), list(s), band, key_range)

    def groups(self, is_r: bool) -> list[np.ndarray]:
        return self.r_groups if is_r else self.s_groups

    def subgroup(self, key: np.ndarray, is_r: bool, shift: float = 0.0) -> np.ndarray:
        """The subgroup of side ``is_r`` that each key (plus ``shift``) maps to."""
        count = len(self.groups(is_r))
        if self.band is None:
            return key_group(key, count)
        lo, hi = self.key_range
        cuts = lo + (hi - lo) * np.arange(1, count) / count
        return np.searchsorted(cuts, np.nan_to_num(np.asarray(key) + shift, nan=lo), "right")

    def place_keyed(self, is_r: bool, key: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The unit storing each tuple: a random unit of its key's subgroup on its side."""
        g = self.subgroup(key, is_r)
        size = self._stores[is_r][g]
        pick = ((np.asarray(u).astype(np.uint64) * size.astype(np.uint64))
                >> np.uint64(32)).astype(np.int64)
        return self._flat[is_r][self._start[is_r][g] + pick]

    def _probe_ranges(self, is_r: bool, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per tuple of side ``is_r``, the slice [lo, hi) of the other side's flat unit ids it
        probes (empty for a null key)."""
        other = not is_r
        start = self._start[other]
        if self.band is None:
            g = self.subgroup(key, other)
            lo, hi = start[g], start[g + 1]
        else:
            lo = start[self.subgroup(key, other, -self.band)]
            hi = start[self.subgroup(key, other, self.band) + 1]
        null = np.isnan(np.asarray(key, dtype=float))
        return np.where(null, 0, lo), np.where(null, 0, hi)

    def route(self, is_r, key, u):
        idx_r, idx_s = np.flatnonzero(is_r), np.flatnonzero(~is_r)
        t, w = [idx_r, idx_s], [self.place_keyed(True, key[idx_r], u[idx_r]),
                                self.place_keyed(False, key[idx_s], u[idx_s])]
        for idx, mine in ((idx_r, True), (idx_s, False)):
            lo, hi = self._probe_ranges(mine, key[idx])
            which, pos = expand(lo, hi)
            t.append(idx[which])
            w.append(self._flat[not mine][pos])
        role = np.concatenate([np.full(len(idx_r) + len(idx_s), STORE, np.int8),
                               np.full(sum(len(x) for x in t[2:]), PROBE, np.int8)])
        return np.concatenate(t), np.concatenate(w), role

    def holds(self, is_r, key, u, worker):
        return self.place_keyed(is_r, key, u) == worker

    def source(self, is_r, key, u, near):
        return self.place_keyed(is_r, key, u)

    def route_moving(self, old, is_r, key, u):
        """Stored by this layout; probing every unit of the matching opposite subgroup(s) in
        either layout, once (a unit that hands its tuples over holds them until sent)."""
        if not isinstance(old, ContRandLayout):
            raise ValueError("a ContRand join-biclique moves only from a ContRand one")
        t, w, role = self.route(is_r, key, u)
        ot, ow, orole = old.route(is_r, key, u)
        probe = orole == PROBE
        t, w = np.concatenate([t, ot[probe]]), np.concatenate([w, ow[probe]])
        role = np.concatenate([role, orole[probe]])
        width = int(max(w.max(initial=0), 0)) + 1
        _, first = np.unique((t.astype(np.int64) * width + w) * 2 + (role == STORE),
                             return_index=True)
        first = np.sort(first)
        return t[first], w[first], role[first]

    def regroup(self, r_sizes: list[int], s_sizes: list[int], *, drain: bool = False,
                rebalance: bool = False) -> ContRandLayout:
        """Each subgroup with its new number of storing units (2PS per subgroup): units that
        stay keep their ids, new ones get fresh ids, a shrinking subgroup's last units leave:
        ``drain`` keeps them probed until their state has expired (a window), otherwise they
        hand their state over; ``rebalance`` moves every unit's state to its new placement."""
        nxt = int(self._workers.max()) + 1
        out = {}
        for side, groups, drains, sizes in ((True, self.r_groups, self.r_draining, r_sizes),
                                            (False, self.s_groups, self.s_draining, s_sizes)):
            if len(sizes) != len(groups) or min(sizes) < 1:
                raise ValueError("regroup takes one size >= 1 per subgroup")
            keep, gone = [], []
            for g, d, k in zip(groups, drains, sizes, strict=True):
                if k >= len(g):
                    keep.append(np.concatenate([g, nxt + np.arange(k - len(g))]))
                    nxt += k - len(g)
                    gone.append(d)
                else:
                    keep.append(g[:k])
                    gone.append(np.concatenate([d, g[k:]]) if drain else d)
            out[side] = (keep, gone)
        new = ContRandLayout(out[True][0], out[False][0], self.band, self.key_range,
                             out[True][1], out[False][1])
        new.rebalance = rebalance
        return new

    def without(self, units) -> ContRandLayout:
        """This layout with drained (now empty) units gone."""
        return ContRandLayout(self.r_groups, self.s_groups, self.band, self.key_range,
                              [np.setdiff1d(d, units) for d in self.r_draining],
                              [np.setdiff1d(d, units) for d in self.s_draining])

    def resize(self, a: int, b: int, rebalance: bool = False) -> BicliqueLayout:  # drain too
        raise ValueError("a ContRand join-biclique resizes by subgroup (regroup), not by side")

    def rescale(self, units: tuple[int, ...]) -> ContRandLayout:
        """R+S units, each side's spread evenly over its subgroups (sizes differ by at most
        one, the first subgroups take the extra units), then :meth:`regroup`: units that leave
        hand their state over, as 2PS does on a full history."""
        if len(units) != 2:
            raise ValueError("a join-biclique rescales to R+S units, e.g. 6+4")
        sizes = []
        for side, count, groups in (("R", units[0], self.r_groups),
                                    ("S", units[1], self.s_groups)):
            d = len(groups)
            if count < d:
                raise ValueError(f"a ContRand join-biclique with {d} {side} subgroups needs at "
                                 f"least {d} {side} units, got {count}")
            sizes.append([count // d + (i < count % d) for i in range(d)])
        return self.regroup(*sizes)

    def describe(self) -> dict:
        return {**super().describe(), "subgroups_r": len(self.r_groups),
                "subgroups_s": len(self.s_groups)}


class OneSiteLayout(Layout):
    """Every tuple of every input at one worker (DINER's single-site operators; an n-way join
    whose edges use different attributes cannot be hash-partitioned on one of them)."""

    kind = "one_site"
    max_inputs = None

    @property
    def workers(self) -> np.ndarray:
        return np.zeros(1, np.int64)

    def route(self, is_r, key, u):
        return np.arange(len(key)), np.zeros(len(key), np.int64), \
            np.full(len(key), BOTH, dtype=np.int8)

    def holds(self, is_r, key, u, worker):
        return np.full(len(key), worker == 0)

    def source(self, is_r, key, u, near):
        return np.zeros(len(key), np.int64)


def grid_mappings(joiners: int) -> list[tuple[int, int]]:
    """Every (n,m) with n*m = J (for J a power of two: n = 1, 2, 4, ..., J)."""
    return [(n, joiners // n) for n in range(1, joiners + 1) if joiners % n == 0]


def square_mapping(joiners: int) -> tuple[int, int]:
    """(sqrt J, sqrt J), or the divisor pair closest to square (n <= m) when J is no square."""
    n = max(d for d in range(1, math.isqrt(joiners) + 1) if joiners % d == 0)
    return (n, joiners // n)
