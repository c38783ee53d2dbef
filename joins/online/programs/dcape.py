"""D-CAPE's partitioned n-way join machine (Liu, Rundensteiner, WPI-CS-TR-05-04; catalogue
003 sections 2.1-2.7) as a worker program: one worker is one query processor (machine).

The machine runs MJoin (:class:`~joins.online.programs.mjoin.MJoin`) on the partition groups
the manager assigned to it: a group is every input's partition with one ID (``key mod
groups`` with D-CAPE's generator), results only come from within a group, and state moves
or spills a whole group at a time. Per group it keeps the paper's statistics (section 4.3):
``P_s`` (tuples in memory), ``P_o`` (results produced) and ``T_u`` (the last insert's event
time).

Disk adaptation (state spill, section 4): at a tick's end, when the memory used passes
``theta_m`` x the budget, the machine pushes ``push_percent`` of its in-memory state in whole
groups, chosen by ``push``: ``random`` (seeded by machine and push number, so a retried task
picks the same groups), ``low_output`` (groups idle longer than ``theta_t`` first, then the
largest P_s/P_o: the paper's policy) or ``high_output`` (the smallest P_s/P_o first: the other
end). Each push is one file on the executor's disk holding its groups' tuples, and the groups
get a new epoch; a pushed group's memory part starts anew (P_s and P_o from zero: written
choice, the paper does not say). Without a disk mode, memory past the budget is an
out-of-memory error: the machine reports ``oom`` and the run is cut there (Fig 7).

Relocation (section 5): the manager's new layout moves whole groups between machines at a tick
boundary (the engine's ``boundary`` move: the groups' tuples of that tick went to the sender
before the move, later ones go to the receiver, so every result is produced once - the paper's
deactivate/buffer/move/reactivate protocol with its buffering window on the boundary). A
group's statistics travel with it; a group with state on disk never moves. Forced pushes
(active-disk, section 6) come with a layout's ``push`` orders.

Clean-up (section 4.2): after the stream, per group with disk epochs, its epochs and its
memory part are merged and exactly the combinations whose tuples are not all of one epoch are
emitted (the normal run produced the same-epoch ones): Eq. 1 applied over all epochs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from joins.online.hashing import key_group, splitmix64
from joins.online.programs.base import commit_file
from joins.online.programs.mjoin import MJoin, MJoinState, Rows

ADAPT = ("none", "disk", "relocate", "lazy_disk", "active_disk")
PUSH = ("random", "low_output", "high_output")
SPILLING = ("disk", "lazy_disk", "active_disk")  # modes where a machine pushes to disk


class GroupRows(Rows):
    """Tuples of moving groups with the groups' statistics (P_o, T_u), which move with them."""

    __slots__ = ("stats",)

    @classmethod
    def of(cls, rows: Rows, stats: dict) -> GroupRows:
        out = cls(rows.tid, rows.seq, rows.u, rows.ts, rows.vals, rows.vals.shape[1])
        out.stats = stats
        return out


@dataclass
class DCapeState(MJoinState):
    p_o: np.ndarray = None  # results per group since its memory part began (P_o)
    t_u: np.ndarray = None  # event time of the group's last insert (T_u)
    epochs: np.ndarray = None  # disk epochs (pushes) per group
    disk: list = field(default_factory=list)  # files of this machine's pushes
    disk_tuples: int = 0
    pushes: int = 0  # pushes so far (local and forced)
    forced: int = 0  # of which ordered by the manager (active-disk)
    moving: bool = False  # a relocation touches this machine this tick (no push meanwhile)
    stats_sent: set = field(default_factory=set)  # groups whose statistics left in this move
    oom: bool = False
    spill_dir: str | None = None  # the run's folder for push files (set at every tick)
    budget: int | None = None  # the run's memory budget (tuples; reported to the manager)
    tick: dict = field(default_factory=dict)  # this tick's counts, added to the report's


def _ratio(p_s: np.ndarray, p_o: np.ndarray) -> np.ndarray:
    """P_s/P_o, infinite for a group that produced nothing (the least productive)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_o > 0, p_s / np.maximum(p_o, 1), np.inf)


class DCape(MJoin):
    name = "dcape"
    inputs = None
    edges = False
    moves = ("boundary",)
    spill_modes = ("charge",)
    uses_disk = True
    cleans_up = True
    counters = (*MJoin.counters, "cleanup_read")  # clean-up tuples read from disk

    def __init__(self, groups: int = 300, by: str = "mod", adapt: str = "none",
                 push: str = "low_output", push_percent: float = 30.0, theta_m: float = 1.0,
                 theta_t: float | None = None, seed: int = 0) -> None:
        if adapt not in ADAPT:
            raise ValueError(f"adapt must be one of {', '.join(ADAPT)}, got {adapt!r}")
        if push not in PUSH:
            raise ValueError(f"push must be one of {', '.join(PUSH)}, got {push!r}")
        if not 0 < push_percent <= 100:
            raise ValueError(f"push_percent must be in (0, 100], got {push_percent}")
        if not theta_m > 0:
            raise ValueError(f"theta_m must be > 0, got {theta_m}")
        self.groups, self.by, self.adapt, self.push = groups, by, adapt, push
        self.push_percent, self.theta_m, self.theta_t, self.seed = (
            push_percent, theta_m, theta_t, seed)

    def new_worker(self, wid):
        g = self.groups
        return DCapeState(wid, p_o=np.zeros(g, np.int64), t_u=np.full(g, -np.inf),
                          epochs=np.zeros(g, np.int64))

    def _group(self, rows: Rows) -> np.ndarray:
        return key_group(rows.vals[:, 0], self.groups, self.by)

    def _sizes(self, ws) -> np.ndarray:
        """P_s: tuples in memory per group (all inputs)."""
        out = np.zeros(self.groups, np.int64)
        for t in ws.tables.values():
            if len(t):
                out += np.bincount(self._group(t), minlength=self.groups)
        return out

    # -- arrivals -------------------------------------------------------------------------
    def deliver(self, ws, d, ctx, c, out):
        if ws.oom:  # the machine stopped (out of memory): the run is cut at that tick
            return
        super().deliver(ws, d, ctx, c, out)
        g = key_group(d.key, self.groups, self.by)
        when = d.ts if d.ts is not None else d.seq.astype(np.float64)
        np.maximum.at(ws.t_u, g, when)

    def _produced(self, ws, cfg, i, combo):
        rows = combo[i]
        if len(rows):
            keys = ws.tables[i].vals[rows, 0]
            ws.p_o += np.bincount(key_group(keys, self.groups, self.by), minlength=self.groups)

    # -- disk adaptation ------------------------------------------------------------------
    def _order(self, ws, sizes: np.ndarray, now: float, policy: str) -> np.ndarray:
        """Groups in memory in the order a push takes them."""
        held = np.flatnonzero(sizes > 0)
        if policy == "random":
            draw = splitmix64(np.uint64(self.seed * 1_000_003 + ws.wid * 7919 + ws.pushes) +
                              held.astype(np.uint64))
            return held[np.argsort(draw, kind="stable")]
        ratio = _ratio(sizes[held], ws.p_o[held])
        if policy == "high_output":  # the most productive first (smallest P_s/P_o)
            return held[np.lexsort((held, ratio))]
        idle = np.zeros(len(held), bool)
        if self.theta_t is not None:
            idle = now - ws.t_u[held] > self.theta_t
        # idle groups first, then the least productive (largest P_s/P_o), larger first on ties
        return held[np.lexsort((held, -sizes[held], -ratio, ~idle))]

    def _push(self, ws, now: float, share: float, policy: str, forced: bool = False) -> int:
        """Push whole groups holding at least ``share`` of the in-memory state to one file."""
        sizes = self._sizes(ws)
        total = int(sizes.sum())
        if not total:
            return 0
        order = self._order(ws, sizes, now, policy)
        need = share * total
        cum = np.cumsum(sizes[order])
        take = order[: int(np.searchsorted(cum, need - 1e-9)) + 1]
        chosen = np.zeros(self.groups, bool)
        chosen[take] = True
        parts = {}
        for i, t in ws.tables.items():
            mask = chosen[self._group(t)]
            if mask.any():
                parts[i] = t.select(mask)
                self._set(ws, i, t.select(~mask))
        ws.epochs[take] += 1
        ws.p_o[take] = 0
        path = os.path.join(ws.spill_dir or "/tmp",
                            f"dcape-w{ws.wid:05d}-push{ws.pushes:06d}.npz")
        arrays = {}
        for i, rows in parts.items():
            g = self._group(rows)
            arrays.update({f"tid{i}": rows.tid, f"seq{i}": rows.seq, f"key{i}": rows.vals[:, 0],
                           f"epoch{i}": ws.epochs[g] - 1})

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)

        commit_file(path, write)  # one name per machine and push: a retry replaces it
        moved = int(sum(len(r) for r in parts.values()))
        ws.disk.append(path)
        ws.disk_tuples += moved
        ws.pushes += 1
        ws.forced += int(forced)
        # this tick's counts; the pushed tuples are the engine's "spilled" (what it charges)
        for k, v in (("pushes", 1), ("forced_pushes", int(forced)), ("spilled", moved)):
            ws.tick[k] = ws.tick.get(k, 0) + v
        return moved

    def end_tick(self, ws, ctx, c):
        cfg = ctx.config
        ws.spill_dir = cfg.spill_dir
        budget = ws.budget = cfg.budget_tuples
        used = sum(len(t) for t in ws.tables.values())
        if budget is not None and self.adapt in SPILLING and used > self.theta_m * budget \
                and not ws.moving:
            used -= self._push(ws, ctx.watermark, self.push_percent / 100.0, self.push)
        ws.moving = False
        for k, v in ws.tick.items():
            c[k] = c.get(k, 0) + v
        ws.tick = {}
        if budget is None:
            return False
        if self.adapt not in SPILLING and used > budget:
            ws.oom = True
        return used > budget

    # -- relocation -----------------------------------------------------------------------
    def begin_move(self, ws, old, new, start, mode):
        if mode != "boundary":
            raise RuntimeError("D-CAPE moves partition groups at tick boundaries only")
        if ws.wid in new.push:  # active-disk: the manager's forced push
            # the idle rule's clock: the machine's latest insert (begin_move has no tick)
            self._push(ws, float(np.max(ws.t_u)), new.push[ws.wid], "low_output", forced=True)
        leaving = (old.owner == ws.wid) & (new.owner != ws.wid)
        coming = (old.owner != ws.wid) & (new.owner == ws.wid)
        if (leaving & (ws.epochs > 0)).any():
            raise RuntimeError(f"machine {ws.wid}: a group with state on disk cannot move")
        ws.moving = bool(leaving.any() or coming.any())
        ws.stats_sent = set()
        if leaving.any():
            super().begin_move(ws, old, new, start, "handoff")

    def take(self, ws, dest, rel, k):
        """The moving tuples of one input; a group's statistics go once, whole, with the first
        piece that carries the group (``take`` runs once per input: a second piece must not
        overwrite them on the receiver with the zeros left behind)."""
        sent = super().take(ws, dest, rel, k)
        if sent is None:
            return None
        g = [int(x) for x in np.unique(self._group(sent)) if int(x) not in ws.stats_sent]
        stats = {x: (int(ws.p_o[x]), float(ws.t_u[x])) for x in g}
        ws.stats_sent.update(g)
        ws.p_o[g], ws.t_u[g] = 0, -np.inf
        return GroupRows.of(sent, stats)

    def receive(self, ws, piece, ctx, c, out):
        for g, (p_o, t_u) in getattr(piece.tuples, "stats", {}).items():
            ws.p_o[g], ws.t_u[g] = p_o, t_u
        return super().receive(ws, piece, ctx, c, out)

    # -- clean-up -------------------------------------------------------------------------
    def cleanup(self, ws, pieces, ctx, c, out):
        """Per group with disk epochs: everything it ever held (its files and its memory
        part, the last epoch) joined, minus the same-epoch combinations the run produced."""
        if not ws.disk:
            return
        cfg = ctx.config
        frames = {i: [] for i in range(cfg.inputs)}
        read = 0
        for path in ws.disk:
            with np.load(path) as z:
                for i in range(cfg.inputs):
                    if f"tid{i}" in z:
                        frames[i].append(pd.DataFrame({"tid": z[f"tid{i}"], "key": z[f"key{i}"],
                                                       "epoch": z[f"epoch{i}"]}))
                        read += len(z[f"tid{i}"])
        spilled = ws.epochs > 0
        for i, t in ws.tables.items():
            g = self._group(t)
            keep = spilled[g]
            frames[i].append(pd.DataFrame({"tid": t.tid[keep], "key": t.vals[keep, 0],
                                           "epoch": ws.epochs[g[keep]]}))
        sides = []
        for i in range(cfg.inputs):
            f = pd.concat(frames[i], ignore_index=True) if frames[i] else \
                pd.DataFrame({"tid": [], "key": [], "epoch": []})
            sides.append(f[f["key"].notna()])
        c["cleanup_read"] += read
        # what the cost model charges: every tuple joined once, a disk access per tuple read
        c["probes"] += sum(len(f) for f in sides)
        c["disk_probes"] += read
        count = _missing_count(sides)
        if cfg.want_pairs or cfg.pairs_dir is not None:
            tids = _missing_rows(sides)
            if len(tids[0]) != count:
                raise RuntimeError(f"clean-up rows {len(tids[0])} != its count {count}")
            out.add(count, *tids)
        else:
            out.add(count)

    # -- reports --------------------------------------------------------------------------
    def report(self, ws):
        sizes = self._sizes(ws)
        movable = np.flatnonzero((sizes > 0) & (ws.epochs == 0))
        movable = movable[np.lexsort((movable, _ratio(sizes[movable], ws.p_o[movable])))]
        return dict(**super().report(ws), disk_tuples=ws.disk_tuples, pushes_total=ws.pushes,
                    forced_total=ws.forced, oom=ws.oom,
                    budget=-1 if ws.budget is None else ws.budget,
                    # the manager's view (not kept in the metrics): groups a relocation may
                    # take, the most productive first, with their sizes
                    _movable=(movable, sizes[movable]))


def _missing_count(sides: list[pd.DataFrame]) -> int:
    """Per key: prod over inputs of all its tuples - sum over epochs of the same-epoch
    products (the catalogue's per-key reading of Eq. 1)."""
    per_key, per_epoch = None, None
    for f in sides:
        k = f.groupby("key").size().rename("n")
        ke = f.groupby(["key", "epoch"]).size().rename("n")
        per_key = k if per_key is None else per_key.mul(k, fill_value=0)
        per_epoch = ke if per_epoch is None else per_epoch.mul(ke, fill_value=0)
        per_key, per_epoch = per_key[per_key > 0], per_epoch[per_epoch > 0]
    if per_key is None:
        return 0
    return int(per_key.sum() - per_epoch.sum())


def _missing_rows(sides: list[pd.DataFrame]) -> tuple[np.ndarray, ...]:
    """The missing combinations themselves (tids per input): a key join whose epochs differ."""
    out = sides[0].rename(columns={"tid": "t0", "epoch": "e0"})
    for i, f in enumerate(sides[1:], 1):
        out = out.merge(f.rename(columns={"tid": f"t{i}", "epoch": f"e{i}"}), on="key")
    same = np.ones(len(out), bool)
    for i in range(1, len(sides)):
        same &= out[f"e{i}"].to_numpy() == out["e0"].to_numpy()
    out = out[~same]
    return tuple(out[f"t{i}"].to_numpy(np.int64) for i in range(len(sides)))
