"""MINER (Bornea et al., TKDE, section 4; paper ``diner``): DINER for multi-way joins of n
inputs on a different attribute per link - chains ``R1 a1 R2 a2 R3 ... Rn``, stars (a hub
relation joined to each spoke on another of its attributes) and snowflakes: any tree of
equality edges (:class:`JoinTree`) - as a worker program; and MJoin's coordinated flushing
(the paper's Fig 22 baseline) on the same machinery. The text below says "chain"; a tree's
orders are :class:`JoinTree`'s.

One worker holds the operator (the single-site loop of
:mod:`joins.online.programs.single_site`): per relation its in-memory tuples with a key-sorted
index per join attribute (a middle relation of the chain has two), per index the Up/Md/Lw
areas with their boundaries and Joins counters, one disk partition per relation (blocks of
real files carrying both attributes) and the virtual clock.

* **Arriving phase**: an arrival joins the other relations' in-memory tuples along the chain
  (results now, phase ``arriving``); every tuple of a result sets its join bit and credits the
  result to its area on each of its indexes (footnote 2: the counters count final results);
  blocks are flushed while the memory would pass the budget; the tuple is indexed.
* **Flushing**: the victim relation holds the most tuples in memory; its area with the
  smallest benefit over all its indexes gives the block (then the next-lowest, as DINER), Up
  and Lw from the index's ends, Md by DINER's clock over the join bits. The flushed tuples
  leave every index of the relation, so the other index's areas shrink with them; the
  relation's Joins counters restart and the flushed index's boundaries move as DINER's do.
* **Reactive phase** (section 4.2): one relation is the outer (batches of up to
  ``max_outer_mem`` blocks), every other an inner with one block in memory, visited like an
  odometer: the inners on the outer's left (nearest first) are the slow digits, those on its
  right (nearest first) the fast ones, the right sequence having priority as in the paper's
  Fig 5 example. One unit joins the outer batch with the current block of every inner and
  then checks for new input (after each block of the innermost relation). Which block
  combinations are joined is kept as boxes (a block range per relation): a round covers every
  disk block present when it starts, split into one box per relation whose blocks are new
  since the last round (that relation is the box's outer, over its new blocks; relations
  before it in chain order take only their old blocks, those after it all of theirs), so the
  boxes never overlap: the generalisation of DINER's role change (the paper's text for it is
  garbled). Combinations whose tuples' [ATS, DTS] intervals all overlap met in memory and are
  skipped (``max(ATS) <= min(DTS)``).
* **Clean-up**: every in-memory tuple is flushed; what the reactive phase had not joined
  (the rest of its box, the queued boxes, a last round) is joined box by box, each box's
  blocks read once, with the same skip.

Choices (written in the figure configs too): the probe order by selectivity estimates
(LocalJoins) orders index look-ups to stop early; it changes no result and the time model does
not charge look-ups (``c_arrive`` per arrival), so the look-ups are made in chain order and
the estimates are not kept. One join bit per tuple, shared by its indexes (the paper keeps it
per index entry), so one index's clock clears bits the other's reads. After a flush chosen on
one index, the other index's boundaries stay where they were (its areas shrink with the
flushed tuples and may stay empty until that index is flushed from). The first round's only
box has R1 as its outer (DINER starts with the smaller relation). The clean-up reads each box
whole, charging each block one read, and is not held to the memory budget (the paper's
clean-up goes on with ReactiveNL under it): its modeled time is not comparable with DINER's.
Equality joins only (the paper's multi-way experiments). Time model as DINER's: ``c_write`` per
block written, ``c_read`` per block read, ``c_join`` per unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from joins.online.disk_blocks import BlockDisk
from joins.online.kernel import EMPTY_I, expand
from joins.online.programs.diner import clock_sweep
from joins.online.programs.single_site import BlockNestedLoop, SingleSiteState

UP, LW, MD = 0, 1, 2
REGIONS = ("up", "lw", "md")
NEVER = np.iinfo(np.int64).max  # DTS of a tuple still in memory
CHUNK = 2000  # clean-up: outer tuples joined at a time (bounds the combinations in memory)


class JoinTree:
    """The join graph of a MINER query, a tree of equality edges: per input its neighbours
    with the attribute slot on each side. A chain (every edge between inputs i and i + 1: the
    paper's R1 a1 R2 a2 R3 ...) keeps the paper's orders: combinations grow to the right side
    first, and the odometer's fast digits are the right sequence. Any other tree (a star on
    different attributes of a hub relation, a snowflake) grows breadth-first from the anchor,
    and its odometer's slowest digit is the nearest relation, its fastest the last reached
    (a leaf)."""

    def __init__(self, n: int, edges) -> None:
        self.n = n
        self.adj: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
        for a, sa, b, sb in edges:
            self.adj[a].append((b, sa, sb))
            self.adj[b].append((a, sb, sa))
        seen = self._bfs(0) if n else []
        if len(edges) != n - 1 or len(seen) != n:
            raise ValueError("MINER joins a tree of equality edges (a chain R1.a1=R2.a1,"
                             "R2.a2=R3.a2,..., a star or a snowflake): every input connected, "
                             "no cycle, one edge between two inputs")
        self.path = all(abs(a - b) == 1 for a, _, b, _ in edges)
        self.widths = [1 + max(sa for _, sa, _ in nb) if nb else 1 for nb in self.adj]
        # per anchor, computed once: every arrival and reactive unit reads them
        self._steps = [self._grow(a) for a in range(n)]
        self._digits = [self._odometer(a) for a in range(n)]

    def _bfs(self, anchor: int) -> list[int]:
        order, seen = [anchor], {anchor}
        for x in order:
            for y, _, _ in sorted(self.adj[x]):
                if y not in seen:
                    seen.add(y)
                    order.append(y)
        return order

    def _slot(self, a: int, b: int) -> tuple[int, int]:
        return next((sa, sb) for y, sa, sb in self.adj[a] if y == b)

    def steps(self, anchor: int) -> list[tuple[int, int, int, int]]:
        """The joins that grow a combination from the anchor: (from input, its slot, to input,
        its slot); each input's step comes after the step that reached its neighbour."""
        return self._steps[anchor]

    def digits(self, outer: int) -> list[int]:
        """The inner relations of a reactive unit, slowest digit first; the fastest is a leaf
        as seen from the outer, so every other join can be made before its block is read."""
        return self._digits[outer]

    def _grow(self, anchor: int) -> list[tuple[int, int, int, int]]:
        if self.path:
            order = list(range(anchor + 1, self.n)) + list(range(anchor - 1, -1, -1))
            frm = {k: k - 1 if k > anchor else k + 1 for k in order}
        else:
            order, frm = self._bfs(anchor)[1:], {}
            reached = {anchor}
            for k in order:
                frm[k] = next(y for y, _, _ in sorted(self.adj[k]) if y in reached)
                reached.add(k)
        out = []
        for k in order:
            mine, theirs = self._slot(frm[k], k)
            out.append((frm[k], mine, k, theirs))
        return out

    def _odometer(self, outer: int) -> list[int]:
        if self.path:
            return list(range(outer - 1, -1, -1)) + list(range(outer + 1, self.n))
        return self._bfs(outer)[1:]

    def combos(self, sets: list[Tuples], anchor: int,
               anchor_rows: np.ndarray | None = None) -> dict[int, np.ndarray]:
        """Every combination of one tuple per set that matches along the tree, grown from the
        anchor set: per input, the combination's row in its set."""
        rows = np.arange(len(sets[anchor])) if anchor_rows is None else anchor_rows
        combo = {anchor: rows}
        for step in self.steps(anchor):
            if not len(combo[anchor]):
                return {k: EMPTY_I for k in range(len(sets))}
            combo = extend(combo, sets, step)
        return combo


class Tuples:
    """A set of one relation's tuples (memory, a block, a batch) with a sorted index per
    attribute slot, built on demand."""

    def __init__(self, vals, tid, ats, dts=None, index: dict | None = None) -> None:
        self.vals, self.tid, self.ats, self.dts = vals, tid, ats, dts
        self._index = index if index is not None else {}

    def __len__(self) -> int:
        return len(self.tid)

    def index(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        if slot not in self._index:
            order = np.argsort(self.vals[:, slot], kind="stable")
            self._index[slot] = (self.vals[order, slot], order)
        return self._index[slot]

    @classmethod
    def of_rows(cls, rows: np.ndarray, width: int) -> Tuples:
        """Disk rows (BlockDisk's record array) as a set."""
        vals = np.stack([rows["key"]] + [rows[f"key{i}"] for i in range(2, width + 1)], axis=1)
        return cls(vals, rows["tid"], rows["ats"], rows["dts"])


def extend(combo: dict[int, np.ndarray], sets: list[Tuples], step) -> dict[int, np.ndarray]:
    """Every partial combination joined with the matching tuples of one more input."""
    frm, fslot, to, tslot = step
    keys, order = sets[to].index(tslot)
    v = sets[frm].vals[combo[frm], fslot]
    pi, si = expand(np.searchsorted(keys, v, "left"), np.searchsorted(keys, v, "right"))
    out = {k: r[pi] for k, r in combo.items()}
    out[to] = order[si]
    return out


def not_met(sets: list[Tuples], combo: dict[int, np.ndarray]) -> np.ndarray:
    """Which combinations did not meet in memory (their [ATS, DTS] do not all overlap)."""
    n = len(sets)
    latest = np.max([sets[k].ats[combo[k]] for k in range(n)], axis=0)
    earliest = np.min([sets[k].dts[combo[k]] for k in range(n)], axis=0)
    return latest > earliest


class ChainMemory:
    """One relation's in-memory tuples: a table of rows and a key-sorted index per attribute
    (equal keys in arrival order)."""

    def __init__(self, width: int) -> None:
        self.vals = np.zeros((0, width))
        self.tid, self.ats = EMPTY_I, EMPTY_I
        self.bit = np.zeros(0, bool)
        self.keys = [np.zeros(0) for _ in range(width)]
        self.rows = [EMPTY_I for _ in range(width)]

    def __len__(self) -> int:
        return len(self.tid)

    @property
    def width(self) -> int:
        return self.vals.shape[1]

    def tuples(self) -> Tuples:
        return Tuples(self.vals, self.tid, self.ats,
                      index={a: (self.keys[a], self.rows[a]) for a in range(self.width)})

    def insert(self, vals: np.ndarray, tid: int, ats: int, bit: bool) -> None:
        row = len(self.tid)
        self.vals = np.concatenate([self.vals, vals[None, :]])
        self.tid = np.append(self.tid, tid)
        self.ats = np.append(self.ats, ats)
        self.bit = np.append(self.bit, bit)
        for a in range(self.width):
            i = int(np.searchsorted(self.keys[a], vals[a], "right"))
            self.keys[a] = np.insert(self.keys[a], i, vals[a])
            self.rows[a] = np.insert(self.rows[a], i, row)

    def remove(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Take ``rows`` out of the table and every index; returns their vals, tid, ats."""
        out = self.vals[rows], self.tid[rows], self.ats[rows]
        keep = np.ones(len(self.tid), bool)
        keep[rows] = False
        renumber = np.cumsum(keep) - 1
        for a in range(self.width):
            k = keep[self.rows[a]]
            self.keys[a], self.rows[a] = self.keys[a][k], renumber[self.rows[a][k]]
        self.vals, self.tid, self.ats, self.bit = (self.vals[keep], self.tid[keep],
                                                   self.ats[keep], self.bit[keep])
        return out


@dataclass
class Box:
    """Block combinations to join: per relation the block ids in (lo, hi]; ``outer`` is the
    relation read in batches."""

    outer: int
    lo: list[int]
    hi: list[int]

    def empty(self) -> bool:
        return any(h <= lo for lo, h in zip(self.lo, self.hi, strict=True))


@dataclass
class Odometer:
    """The reactive phase's position: the box being joined, its loaded outer batch (block ids
    (batch_lo, batch_hi]) and the next inner block of each inner relation."""

    box: Box | None = None
    queue: list = field(default_factory=list)  # boxes of the current round still to join
    limits: list = field(default_factory=list)  # blocks per relation covered by the rounds
    next_outer: int = 0  # last outer block of the box joined with everything (batch start)
    batch: tuple[int, int] | None = None
    loaded: Tuples | None = None
    pos: dict = field(default_factory=dict)  # inner relation -> current block id
    blocks: dict = field(default_factory=dict)  # inner relation -> (block id, Tuples)
    partial: tuple | None = None  # (slow digits, the batch joined with their blocks, step)


@dataclass
class MinerState(SingleSiteState):
    mem: list = field(default_factory=list)  # ChainMemory per relation
    joins: list = field(default_factory=list)  # per relation: (attributes, 3) Joins counters
    lw: list = field(default_factory=list)  # per relation: LastLwVal per attribute
    up: list = field(default_factory=list)  # per relation: LastUpVal per attribute
    hand: dict = field(default_factory=dict)  # (relation, attribute) -> clock hand (key, ats)
    tree: JoinTree | None = None  # the join graph (a chain, a star, a snowflake)
    odo: Odometer = field(default_factory=Odometer)


class Miner(BlockNestedLoop):
    name = "miner"
    inputs = None
    edges = True
    state = MinerState
    stat_names = ("flushed_up", "flushed_lw", "flushed_md", "index_entries_max")

    # --- set-up ---------------------------------------------------------------------------------

    def _widths(self, cfg) -> list[int]:
        return JoinTree(cfg.inputs, cfg.edges).widths

    def _setup(self, ws, cfg) -> None:
        if ws.mem:
            return
        if getattr(cfg.kernel, "name", "equi") != "equi":
            raise ValueError(f"{self.name} joins on equality only")
        ws.tree = JoinTree(cfg.inputs, cfg.edges)
        widths = ws.tree.widths
        ws.mem = [ChainMemory(w) for w in widths]
        ws.joins = [np.zeros((w, 3)) for w in widths]
        ws.lw = [np.full(w, -np.inf) for w in widths]
        ws.up = [np.full(w, np.inf) for w in widths]
        ws.odo.limits = [0] * len(widths)

    def new_disk(self, cfg, ws, name):
        return BlockDisk(cfg.spill_dir, f"w{ws.wid}-{self.name}-{name}",
                         keys=ws.mem[int(name)].width)

    def deliver(self, ws, d, ctx, c, out):
        self._setup(ws, ctx.config)
        super().deliver(ws, d, ctx, c, out)

    def joins_nothing(self, ws, rel, key):
        return bool(np.isnan(key[:ws.mem[rel].width]).any())

    # --- arriving phase -------------------------------------------------------------------------

    def arrive(self, ws, cfg, c, out, rel, key, tid):
        m = ws.mem[rel]
        vals = np.asarray(key[:m.width], float)
        sets = [x.tuples() for x in ws.mem]
        sets[rel] = Tuples(vals[None, :], np.array([tid]), np.array([ws.events]))
        combo = ws.tree.combos(sets, rel)
        n = len(combo[rel])
        if n:
            for k in range(len(sets)):
                if k != rel:
                    ws.mem[k].bit[combo[k]] = True
            pairs = cfg.want_pairs or cfg.pairs_dir
            out.add(n, *((sets[k].tid[combo[k]] for k in range(len(sets))) if pairs else ()),
                    phase="arriving")
            for k in range(len(sets)):
                self._credit(ws, k, sets[k].vals[combo[k]])
        self._make_room(ws, cfg, 1)
        m.insert(vals, tid, ws.events, n > 0)
        entries = sum(len(x) * x.width for x in ws.mem)
        ws.stats["index_entries_max"] = max(ws.stats["index_entries_max"], entries)

    def _region(self, ws, rel: int, a: int, v: np.ndarray) -> np.ndarray:
        return np.where(v >= ws.up[rel][a], UP, np.where(v <= ws.lw[rel][a], LW, MD))

    def _credit(self, ws, rel: int, vals: np.ndarray) -> None:
        """Each result once to its tuple's area on every index of the relation."""
        for a in range(vals.shape[1]):
            ws.joins[rel][a] += np.bincount(self._region(ws, rel, a, vals[:, a]), minlength=3)

    # --- flushing -------------------------------------------------------------------------------

    def _bounds(self, ws, rel: int, a: int) -> tuple[int, int]:
        k = ws.mem[rel].keys[a]
        return (int(np.searchsorted(k, ws.lw[rel][a], "right")),
                int(np.searchsorted(k, ws.up[rel][a], "left")))

    def _flush(self, ws) -> None:
        """One block of the victim relation's lowest-benefit areas (over all its indexes)."""
        sizes = self.in_memory(ws)
        rel = int(np.argmax(sizes))
        m = ws.mem[rel]
        areas = []
        for a in range(m.width):
            lw_end, up_start = self._bounds(ws, rel, a)
            tups = (len(m) - up_start, lw_end, max(0, up_start - lw_end))
            for r in (UP, LW, MD):
                if tups[r]:
                    areas.append((ws.joins[rel][a][r] / tups[r], r, a))
        first = not np.isfinite(ws.lw[rel]).any() and not np.isfinite(ws.up[rel]).any()
        chosen = EMPTY_I
        flushed: set[tuple[int, int]] = set()
        for _, r, a in sorted(areas):
            need = self.block - len(chosen)
            if need <= 0:
                break
            idx = self._pick(ws, rel, a, r, need, chosen)
            if len(idx):
                chosen = np.concatenate([chosen, idx])
                flushed.add((a, r))
                ws.stats[f"flushed_{REGIONS[r]}"] += len(idx)
        vals, tid, ats = m.remove(np.unique(chosen))
        self._write(ws, rel, vals, tid, ats)
        ws.joins[rel][:] = 0
        for a in range(m.width):
            self._set_bounds(ws, rel, a, {UP, LW} if first else
                             {r for aa, r in flushed if aa == a})

    def _write(self, ws, rel: int, vals, tid, ats) -> None:
        ws.disk[rel].append(vals[:, 0], tid, ats, np.full(len(tid), ws.events),
                            more=vals[:, 1:])
        ws.stats["blocks_written"] += 1
        ws.clock += self.c_write

    def _pick(self, ws, rel: int, a: int, region: int, need: int,
              taken: np.ndarray) -> np.ndarray:
        """Up to ``need`` rows of an area not ``taken`` yet: the largest (Up) or smallest (Lw)
        keys of index ``a``, or DINER's clock over the middle area's join bits."""
        m = ws.mem[rel]
        lw_end, up_start = self._bounds(ws, rel, a)
        rows = m.rows[a]
        if region == UP:
            cand = rows[up_start:][::-1]
            return cand[~np.isin(cand, taken)][:need]
        if region == LW:
            cand = rows[:lw_end]
            return cand[~np.isin(cand, taken)][:need]
        span = rows[lw_end:up_start]
        hand = ws.hand.get((rel, a))
        if hand is None:  # the first clock run starts at a random middle tuple
            start = int(np.random.default_rng([ws.seed, rel, a]).integers(len(span)))
        else:
            hk, ha = hand
            keys = m.keys[a]
            lo, hi = np.searchsorted(keys, hk, "left"), np.searchsorted(keys, hk, "right")
            pos = int(lo + np.searchsorted(m.ats[rows[lo:hi]], ha, "left"))
            start = int(np.clip(pos - lw_end, 0, len(span))) % len(span)
        visit = np.roll(span, -start)
        visit = visit[~np.isin(visit, taken)]
        if not len(visit):
            return EMPTY_I
        chosen, nxt = clock_sweep(m.bit, visit, need)
        ws.hand[(rel, a)] = None if nxt is None else (float(m.vals[nxt, a]), int(m.ats[nxt]))
        return chosen

    def _set_bounds(self, ws, rel: int, a: int, which: set[int]) -> None:
        """DINER's boundaries (2.5) on index ``a``: a block's worth left in Up (Lw)."""
        k = ws.mem[rel].keys[a]
        if len(k) < 2 * self.block:
            ws.lw[rel][a], ws.up[rel][a] = -np.inf, np.inf
            return
        if UP in which:
            ws.up[rel][a] = float(k[len(k) - self.block])
        if LW in which:
            ws.lw[rel][a] = float(k[self.block - 1])
        if ws.lw[rel][a] >= ws.up[rel][a]:
            below = k[k < ws.up[rel][a]]
            ws.lw[rel][a] = float(below[-1]) if len(below) else -np.inf

    # --- reactive phase -------------------------------------------------------------------------

    def _round(self, ws) -> list[Box]:
        """Boxes covering every block combination not covered by the earlier rounds."""
        odo, n = ws.odo, len(ws.disk)
        have = [len(d) for d in ws.disk]
        old = odo.limits
        boxes = []
        for j in range(n):
            if have[j] > old[j]:
                lo = [0] * n
                hi = [old[i] if i < j else have[i] for i in range(n)]
                lo[j] = old[j]
                box = Box(j, lo, hi)
                if not box.empty():
                    boxes.append(box)
        odo.limits = have
        return boxes

    def _digits(self, ws, box: Box) -> list[int]:
        """Inner relations, slow digit first (a chain: the left sequence, then the right,
        which has priority)."""
        return ws.tree.digits(box.outer)

    def _next_box(self, ws) -> bool:
        odo = ws.odo
        while odo.box is None:
            if not odo.queue:
                if not all(len(d) for d in ws.disk) or \
                        all(len(d) <= lim for d, lim in zip(ws.disk, odo.limits, strict=True)):
                    return False
                odo.queue = self._round(ws)
                continue
            odo.box = odo.queue.pop(0)
            odo.next_outer, odo.batch, odo.loaded = odo.box.lo[odo.box.outer], None, None
        return True

    def work_left(self, ws):
        odo = ws.odo
        if odo.box is not None or odo.queue:
            return True
        return bool(ws.disk) and all(len(d) for d in ws.disk) and \
            any(len(d) > lim for d, lim in zip(ws.disk, odo.limits, strict=True))

    def _batch_cap(self, ws, cfg) -> int:
        cap = self.max_outer_mem
        if cfg.budget_tuples is not None:
            cap = min(cap, max(1, cfg.budget_tuples // self.block - (len(ws.disk) - 1)))
        return cap

    def hand_over(self, ws, cfg, buffered):
        """More than MaxNewArr arrivals wait, or no memory for a unit (after the last arrival
        the engine's loop hands over: the disk join left is the clean-up's)."""
        return buffered > self.max_new_arr or not self._room_for_a_unit(ws, cfg)

    def on_hand_over(self, ws):
        ws.odo.loaded, ws.odo.blocks, ws.odo.partial = None, {}, None  # memory; position stays

    def _room_for_a_unit(self, ws, cfg) -> bool:
        if cfg.budget_tuples is None:
            return True
        odo = ws.odo
        batch = self.block * (odo.batch[1] - odo.batch[0] if odo.batch is not None else
                              self._batch_cap(ws, cfg))
        need = batch + self.block * (len(ws.disk) - 1)
        if self.buffered(ws) + need > cfg.budget_tuples:
            return False  # not even an empty memory holds a unit: flush nothing for it
        self._make_room(ws, cfg, need)
        if sum(self.in_memory(ws)) + self.buffered(ws) + need > cfg.budget_tuples:
            return False
        self.used(ws, need)
        return True

    def _read(self, ws, cfg, rel: int, first: int, count: int) -> Tuples:
        ws.stats["blocks_read"] += count
        ws.clock += count * self.c_read
        return Tuples.of_rows(ws.disk[rel].read(first, count), ws.mem[rel].width)

    def reactive_unit(self, ws, cfg, c, out, phase):
        """One unit: the outer batch with the current block of every inner relation."""
        odo = ws.odo
        if not self._next_box(ws):
            return False
        box = odo.box
        o = box.outer
        digits = self._digits(ws, box)
        if odo.batch is None:
            if odo.next_outer >= box.hi[o]:
                odo.box = None
                return True
            size = min(self._batch_cap(ws, cfg), box.hi[o] - odo.next_outer)
            odo.batch = (odo.next_outer, odo.next_outer + size)
            odo.pos = {k: box.lo[k] + 1 for k in digits}
            odo.loaded, odo.blocks, odo.partial = None, {}, None
        if odo.loaded is None:  # a new batch, or the batch again after a handover
            size = odo.batch[1] - odo.batch[0]
            self._make_room(ws, cfg, (size + len(digits)) * self.block)
            odo.loaded = self._read(ws, cfg, o, odo.batch[0] + 1, size)
        sets: list = [None] * len(box.lo)
        sets[o] = odo.loaded
        *slow, fast = digits
        for k in slow:
            self._inner_block(ws, cfg, k)
            sets[k] = odo.blocks[k][1]
        key = tuple(odo.pos[k] for k in slow)
        if odo.partial is None or odo.partial[0] != key:  # the slow digits moved
            steps = ws.tree.steps(o)
            last = next(st for st in steps if st[2] == fast)
            combo = {o: np.arange(len(odo.loaded))}
            for st in steps:
                if st is not last and len(combo[o]):
                    combo = extend(combo, sets, st)
            odo.partial = (key, combo if len(combo[o]) else None, last)
        _, partial, last = odo.partial
        if partial is None:  # nothing to extend: the fast digit's units join nothing
            done = self._empty_units(ws, cfg, box, fast)
            odo.pos[fast] += done - 1
        else:
            self._inner_block(ws, cfg, fast)
            sets[fast] = odo.blocks[fast][1]
            ws.clock += self.c_join  # (the memory it uses was counted by _room_for_a_unit)
            c["probes"] += len(sets[fast])
            self._emit(cfg, out, sets, extend(partial, sets, last), phase)
        for k in reversed(digits):  # the odometer: the fastest digit first
            odo.pos[k] += 1
            if odo.pos[k] <= box.hi[k]:
                break
            odo.pos[k] = box.lo[k] + 1
        else:  # every inner combination done: the next outer batch
            odo.next_outer = odo.batch[1]
            odo.batch, odo.loaded, odo.partial = None, None, None
        return True

    def _inner_block(self, ws, cfg, k: int) -> None:
        """The current block of inner relation k in memory: read (and charged) when the digit
        moved; read uncharged when it stayed but was only modelled (by _empty_units)."""
        odo = ws.odo
        have = odo.blocks.get(k)
        if have is None or have[0] != odo.pos[k]:
            odo.blocks[k] = (odo.pos[k], self._read(ws, cfg, k, odo.pos[k], 1))
        elif have[1] is None:
            odo.blocks[k] = (odo.pos[k], Tuples.of_rows(ws.disk[k].read(odo.pos[k]),
                                                          ws.mem[k].width))

    def _empty_units(self, ws, cfg, box: Box, fast: int) -> int:
        """Units whose partial combination is empty, charged as one at a time would be (a
        block read, a join) for as many consecutive fast-digit positions as the hand-over
        rule would let run (the input buffer and memory checked at the same clock values);
        returns how many. Their blocks are not read from the file: their tuples cannot join."""
        odo = ws.odo
        stop = ws.horizon
        thresh = self.max_new_arr
        if cfg.budget_tuples is not None:
            need = self.block * (odo.batch[1] - odo.batch[0] + len(ws.disk) - 1)
            thresh = min(thresh, cfg.budget_tuples - sum(self.in_memory(ws)) - need)
        if thresh < 0:
            stop = -np.inf
        elif len(ws.pend_t) > thresh:
            stop = min(stop, float(ws.pend_t[thresh]))  # the buffer passes thresh from here
        left = box.hi[fast] - odo.pos[fast] + 1
        done = 0
        while True:
            have = odo.blocks.get(fast)
            if have is None or have[0] != odo.pos[fast] + done:
                odo.blocks[fast] = (odo.pos[fast] + done, None)
                ws.stats["blocks_read"] += 1
                ws.clock += self.c_read
            ws.clock += self.c_join
            done += 1
            if done == left or ws.clock >= stop:
                return done

    def _emit(self, cfg, out, sets, combo, phase) -> None:
        if not len(combo[0]):
            return
        keep = not_met(sets, combo)
        count = int(keep.sum())
        if not count:
            return
        pairs = cfg.want_pairs or cfg.pairs_dir
        out.add(count, *((sets[k].tid[combo[k][keep]] for k in range(len(sets)))
                         if pairs else ()), phase=phase)

    # --- clean-up -------------------------------------------------------------------------------

    def _rest(self, ws) -> list[Box]:
        """What the interrupted box still has to join, as boxes."""
        odo, box = ws.odo, ws.odo.box
        if box is None:
            return []
        o, rest = box.outer, []
        if odo.batch is not None:
            digits = self._digits(ws, box)
            for i, d in enumerate(digits + [None]):  # the odometer's remaining positions
                lo, hi = list(box.lo), list(box.hi)
                lo[o], hi[o] = odo.batch
                for k in digits[:i]:
                    lo[k], hi[k] = odo.pos[k] - 1, odo.pos[k]
                if d is not None:
                    lo[d] = odo.pos[d]
                rest.append(Box(o, lo, hi))
            start = odo.batch[1]
        else:
            start = odo.next_outer
        lo = list(box.lo)
        lo[o] = start
        rest.append(Box(o, lo, list(box.hi)))
        return [b for b in rest if not b.empty()]

    def finish(self, ws, cfg, c, out):
        if not ws.disk or not ws.mem:
            return
        for rel, m in enumerate(ws.mem):  # every in-memory tuple to disk, DTS = the end
            while len(m):
                vals, tid, ats = m.remove(np.arange(min(self.block, len(m))))
                self._write(ws, rel, vals, tid, ats)
        boxes = self._rest(ws) + ws.odo.queue
        ws.odo.box, ws.odo.queue = None, []
        boxes += self._round(ws) if all(len(d) for d in ws.disk) else []
        for box in boxes:
            sets = []
            for k in range(len(box.lo)):
                ids = list(range(box.lo[k] + 1, box.hi[k] + 1))
                ws.stats["blocks_read"] += len(ids)
                ws.clock += len(ids) * self.c_read
                sets.append(Tuples.of_rows(ws.disk[k].read_many(ids), ws.mem[k].width))
            for start in range(0, len(sets[box.outer]), CHUNK):
                rows = np.arange(start, min(start + CHUNK, len(sets[box.outer])))
                c["probes"] += len(rows)
                self._emit(cfg, out, sets, ws.tree.combos(sets, box.outer, rows), None)
            ws.clock += self.c_join


class MJoinCoordinated(Miner):
    """MJoin (Viglas et al.) under a memory budget, the paper's Fig 22 baseline: one hash
    table per input on the star's one attribute, ``n_part`` buckets (key modulo n_part); when
    the memory is full, the bucket holding the most tuples over all inputs is evicted from
    every input (coordinated flushing) to disk blocks. No reactive phase (MJoin has none); the
    clean-up joins what was missed, with MINER's clean-up."""

    name = "mjoin_flush"
    stat_names = (*Miner.stat_names, "buckets_flushed")

    def __init__(self, n_part: int = 100, tups_per_block: int = 50, wait_thresh: float = 25.0,
                 c_read: float = 0.2, c_write: float = 0.2, c_join: float = 0.05,
                 c_arrive: float = 0.0, seed: int = 0) -> None:
        super().__init__(tups_per_block=tups_per_block, wait_thresh=wait_thresh, c_read=c_read,
                         c_write=c_write, c_join=c_join, c_arrive=c_arrive, seed=seed)
        if n_part < 1:
            raise ValueError("n_part must be >= 1")
        self.n_part = n_part

    def _setup(self, ws, cfg) -> None:
        if ws.mem:
            return
        star = "MJoin's coordinated flushing needs one shared join attribute: on=a, or the " \
            "star's edges on one attribute (R1.a=R2.a,R2.a=R3.a,...)"
        try:
            widths = self._widths(cfg)
        except ValueError as e:
            raise ValueError(star) from e
        if any(w != 1 for w in widths):
            raise ValueError(star)
        super()._setup(ws, cfg)

    def work_left(self, ws):
        return False

    def _flush(self, ws) -> None:
        buckets = [np.mod(np.floor(m.vals[:, 0]), self.n_part).astype(np.int64)
                   for m in ws.mem]
        sizes = sum(np.bincount(b, minlength=self.n_part) for b in buckets)
        victim = int(np.argmax(sizes))
        ws.stats["buckets_flushed"] += 1
        for rel, (m, b) in enumerate(zip(ws.mem, buckets, strict=True)):
            rows = np.flatnonzero(b == victim)
            if not len(rows):
                continue
            vals, tid, ats = m.remove(rows)
            for s in range(0, len(tid), self.block):
                part = slice(s, s + self.block)
                self._write(ws, rel, vals[part], tid[part], ats[part])
