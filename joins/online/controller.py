"""The driver-side controller: statistics, the migration trigger, and the mapping choice.

A policy sees the arrival stream (which relation each tuple belongs to), decides at the exact
tuple where its trigger fires, and returns the next layout (a new epoch) or None. Trigger
detection is vectorised: cumulative counts over the batch, first index where the condition
holds. Squall's DYNAMIC (Algorithms 1-2) is :class:`DynamicGrid`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from joins.online.hashing import reshuffler_of
from joins.online.layouts import GridLayout, Layout, grid_mappings


def ilf(r: float, s: float, n: int, m: int) -> float:
    """Input-load factor (catalogue 2.3): tuples per joiner under (n,m), |R|/n + |S|/m."""
    return r / n + s / m


def best_mapping(r: float, s: float, joiners: int, current: tuple[int, int] | None = None
                 ) -> tuple[int, int]:
    """The (n,m), n*m = J, minimising |R|/n + |S|/m; a tie keeps ``current`` (as Squall's
    advisor does), otherwise the smallest n among the tied."""
    cands = grid_mappings(joiners)
    costs = np.array([ilf(r, s, n, m) for n, m in cands])
    best = costs.min()
    if current is not None and current in cands and \
            ilf(r, s, *current) <= best * (1 + 1e-12):
        return current
    return cands[int(np.flatnonzero(costs <= best * (1 + 1e-12))[0])]


def ilf_opt(r: np.ndarray, s: np.ndarray, joiners: int) -> np.ndarray:
    """ILF* (the oracle's ILF) for arrays of cardinalities."""
    cands = grid_mappings(joiners)
    r, s = np.asarray(r, float), np.asarray(s, float)
    return np.min([r / n + s / m for n, m in cands], axis=0)


@dataclass
class Decision:
    """One firing of a trigger, whether or not it changed the mapping."""

    at: int  # sequence number of the trigger tuple
    info: dict = field(default_factory=dict)
    layout: Layout | None = None


class Policy:
    """An operator's routing policy. The engine calls :meth:`scan` on the tuples of a batch
    that lie outside a running migration and :meth:`observe` on those inside one."""

    layout: Layout
    warmup: int = 0
    program: str | type = "joiner"  # the worker program: a name in PROGRAMS, or its class

    def scan(self, is_r: np.ndarray, seq0: int) -> int | None:
        """Index of the first tuple (of ``is_r``, starting at sequence ``seq0``) where the
        trigger fires, consuming the statistics up to it (all of them if None)."""
        return None

    def decide(self, at: int) -> Decision:
        """Called right after a fire; may return a new layout (a new epoch)."""
        return Decision(at)

    def observe(self, is_r: np.ndarray, seq0: int) -> None:
        """Count tuples that arrive while a migration runs (no new decision can start)."""

    def after_batch(self, metrics, seq_next: int) -> Decision | None:
        """A decision at a micro-batch boundary from executor statistics (e.g. relocation)."""
        return None

    def quiet_through(self, t1: float, arrived: np.ndarray | None = None) -> bool:
        """True if :meth:`after_batch` after a tick ending at event time ``t1`` cannot decide
        (e.g. within a minimal span after the last decision): the engine then lets the next
        tick share the step, one Spark job fewer, same counts. ``arrived``: the keys of the
        tuples routed since the statistics of the last step, when those statistics are fresh
        and state grows only by arrivals and moves (no window), else None."""
        return False


class Static(Policy):
    """A fixed layout (STATICMID, STATICOPT, SHJ, MJoin)."""

    def __init__(self, layout: Layout, program: str | type = "joiner",
                 program_params: dict | None = None) -> None:
        self.layout = layout
        self.program = program
        self.program_params = dict(program_params or {})  # the program's own settings


class DynamicGrid(Policy):
    """Squall's DYNAMIC: Algorithm 1 (scaled-increment statistics) + Algorithm 2 (doubling
    trigger, mapping choice among n*m = J).

    * ``controller="exact"`` counts every tuple; ``"sampled"`` is the paper's: the controller
      is reshuffler 0 of J, sees the tuples randomly sent to it and adds J per tuple.
    * Trigger (Alg 2 line 2 with footnote 1): |dR| >= eps|R| or |dS| >= eps|S|, counted with the
      trigger tuple itself (Alg 1 updates before deciding; that tuple is routed by the new map).
    * Warm-up: no decision before the estimated total reaches ``warmup`` tuples (the paper
      begins adapting after 500K tuples, < 1% of the input).
    * Ambiguity (catalogue 2.6): line 3 chooses the mapping before line 5 updates the totals.
      Default ``decide_on="updated"`` uses |R|+|dR|, |S|+|dS| (what Lemmas 4.2-4.3 analyse and
      Squall's advisor does); ``"previous"`` uses the totals of the last decision.
    * Multi-step jumps: the best mapping over all n*m = J is taken (e.g. (8,8) -> (1,64) at the
      first decision). ``jump="direct"`` (default) moves there in one migration (one epoch):
      the target layout is the composition of the pairwise steps, and each tuple goes straight
      from its old holder to its new one. ``jump="steps"`` migrates one doubling at a time,
      one epoch each (the paper's lemmas cover only these); each next step fires at the first
      tuple after the previous migration ended, without a new trigger.
    * While a migration runs, decisions are deferred (the controller may only start a new
      migration once all joiners finished), counts keep accumulating.
    """

    def __init__(self, joiners: int, *, initial: tuple[int, int], eps: float = 1.0,
                 warmup: int = 0, controller: str = "exact", seed: int = 0,
                 decide_on: str = "updated", jump: str = "direct") -> None:
        if controller not in ("exact", "sampled"):
            raise ValueError(f"controller must be exact or sampled, got {controller!r}")
        if decide_on not in ("updated", "previous"):
            raise ValueError(f"decide_on must be updated or previous, got {decide_on!r}")
        if not 0 < eps <= 1:
            raise ValueError(f"eps must be in (0, 1], got {eps}")
        if warmup < 0:
            raise ValueError(f"warmup must be >= 0 tuples, got {warmup}")
        if jump not in ("direct", "steps"):
            raise ValueError(f"jump must be direct or steps, got {jump!r}")
        self.J, self.eps, self.warmup = joiners, eps, int(warmup)
        self.controller, self.seed, self.decide_on = controller, seed, decide_on
        self.jump = jump
        self.target: tuple[int, int] | None = None  # where jump="steps" is still heading
        self.layout = GridLayout.initial(*initial)
        self.R = self.S = 0.0  # totals at the last decision
        self.dR = self.dS = 0.0  # scaled increments since

    def _increments(self, is_r: np.ndarray, seq0: int) -> tuple[np.ndarray, np.ndarray]:
        if self.controller == "exact":
            w = np.ones(len(is_r))
        else:
            own = reshuffler_of(self.seed, np.arange(seq0, seq0 + len(is_r)), self.J) == 0
            w = own * float(self.J)
        return np.where(is_r, w, 0.0), np.where(is_r, 0.0, w)

    def observe(self, is_r, seq0):
        ir, is_ = self._increments(is_r, seq0)
        self.dR += ir.sum()
        self.dS += is_.sum()

    def scan(self, is_r, seq0):
        if not len(is_r):
            return None
        if self.target is not None:  # the next step of a jump, at the first tuple
            self.observe(is_r[:1], seq0)
            return 0
        ir, is_ = self._increments(is_r, seq0)
        cr, cs = self.dR + np.cumsum(ir), self.dS + np.cumsum(is_)
        cond = ((cr >= self.eps * self.R) | (cs >= self.eps * self.S)) & \
            (self.R + self.S + cr + cs >= self.warmup)
        hits = np.flatnonzero(cond)
        f = int(hits[0]) if len(hits) else len(is_r) - 1
        self.dR, self.dS = float(cr[f]), float(cs[f])
        return f if len(hits) else None

    def _step(self, at: int, info: dict) -> Decision:
        """Move to the target, or with jump="steps" one doubling towards it (when the target
        is a power-of-two number of doublings away; otherwise directly)."""
        n, m = self.target
        cur_n = self.layout.mapping[0]
        ratio = max(n, cur_n) // min(n, cur_n)
        if self.jump == "steps" and max(n, cur_n) % min(n, cur_n) == 0 and \
                ratio & (ratio - 1) == 0:
            n = cur_n * 2 if n > cur_n else cur_n // 2
            m = self.J // n
        self.target = None if (n, m) == self.target else self.target
        self.layout = self.layout.regrid(n, m)
        return Decision(at, info, self.layout)

    def decide(self, at):
        if self.target is not None:
            cur = self.layout.mapping
            return self._step(at, dict(est_r=self.R, est_s=self.S, from_n=cur[0],
                                       from_m=cur[1], to_n=self.target[0], to_m=self.target[1]))
        prev = (self.R, self.S)
        self.R, self.S = self.R + self.dR, self.S + self.dS
        self.dR = self.dS = 0.0
        basis = (self.R, self.S) if self.decide_on == "updated" else prev
        cur = self.layout.mapping
        best = best_mapping(*basis, self.J, cur)
        info = dict(est_r=self.R, est_s=self.S, from_n=cur[0], from_m=cur[1], to_n=best[0],
                    to_m=best[1])
        if best == cur:
            return Decision(at, info)
        self.target = best
        return self._step(at, info)


class Scripted(Policy):
    """Layout changes at given tuples (tests and the elasticity/relocation extension points):
    ``changes`` is a list of (sequence number, function old layout -> new layout)."""

    def __init__(self, layout: Layout, changes: list[tuple[int, Callable[[Layout], Layout]]]):
        self.layout = layout
        self.changes = sorted(changes, key=lambda c: c[0])

    def scan(self, is_r, seq0):
        if self.changes and self.changes[0][0] < seq0 + len(is_r):
            return max(0, self.changes[0][0] - seq0)  # late if a migration deferred it
        return None

    def decide(self, at):
        _, fn = self.changes.pop(0)
        self.layout = fn(self.layout)
        return Decision(at, {"scripted": True}, self.layout)


class RelocatingHash(Static):
    """D-CAPE's distributed adaptation on a hash layout with partition groups (catalogue 003
    2.5): when the least loaded worker holds less than ``theta`` of the most loaded one, move
    about (M_max - M_min)/2 tuples' worth of partition groups from the most to the least loaded
    worker, at a micro-batch boundary, at most once every ``min_batches`` batches. Group sizes
    are exact (the driver routed every tuple); the groups moved are the largest that fit."""

    def __init__(self, layout, *, theta: float = 0.8, min_batches: int = 1) -> None:
        super().__init__(layout)
        self.theta, self.min_batches = theta, min_batches
        self.group_sizes = np.zeros(len(layout.owner), dtype=np.int64)
        self.last = -10**9
        self.batches = 0

    def observe(self, is_r, seq0):  # group sizes are fed by the engine via count_groups
        pass

    def count_groups(self, key: np.ndarray) -> None:
        self.group_sizes += np.bincount(self.layout.group(key), minlength=len(self.group_sizes))

    def after_batch(self, metrics, seq_next):
        self.batches += 1
        if self.batches - self.last < self.min_batches:
            return None
        load = np.bincount(self.layout.owner, weights=self.group_sizes,
                           minlength=int(self.layout.owner.max()) + 1)[self.layout.workers]
        hi_w, lo_w = self.layout.workers[load.argmax()], self.layout.workers[load.argmin()]
        if load.max() == 0 or load.min() / load.max() >= self.theta:
            return None
        goal = (load.max() - load.min()) / 2
        groups = np.flatnonzero(self.layout.owner == hi_w)
        groups = groups[np.argsort(-self.group_sizes[groups], kind="stable")]
        chosen, moved = [], 0
        for g in groups:
            if moved + self.group_sizes[g] <= goal:
                chosen.append(g)
                moved += self.group_sizes[g]
        if not chosen:
            return None
        self.last = self.batches
        self.layout = self.layout.relocate(np.array(chosen), int(lo_w))
        return Decision(seq_next, dict(groups=len(chosen), tuples=int(moved), src=int(hi_w),
                                       dest=int(lo_w)), self.layout)
