"""DINER (Bornea et al., TKDE; paper ``diner``): a single-site join under a memory budget that
maximises the results produced while the inputs arrive, as a worker program.

One worker holds the operator: both relations' in-memory tuples (sorted on the key: the
paper's index), the six counters per relation of Alg 3, the disk partitions
(:class:`~joins.online.disk_blocks.BlockDisk`, real files) and a virtual clock. Arrivals carry
their event time (``time=``; without one, the arrival number). The program processes them in
time order, one at a time, as the paper's operator does:

* **Arriving phase** (Alg 1): probe the other relation's in-memory tuples (results now, phase
  ``arriving``), set the join bits, update the statistics, flush blocks while the memory (the
  in-memory tuples plus the input buffer: arrivals whose time has come but that wait) would
  pass the budget, then index the tuple.
* **Flushing policy** (Algs 2-3): the victim relation is the one with more tuples in memory;
  its region (Up, Lw, Md) with the smallest benefit (joins per tuple since the last flush)
  gives a block of ``tups_per_block`` tuples, Up and Lw from the key ends, Md by a clock over
  the join bits; a region that cannot fill the block hands over to the next-lowest benefit.
* **Reactive phase** (Alg 4, ReactiveNL): when no tuple arrives for ``wait_thresh`` time
  units, join disk blocks with disk blocks (outer batches of up to ``max_outer_mem`` blocks
  against a frozen prefix of the inner), one inner block at a time, returning to the arrivals
  once more than ``max_new_arr`` tuples wait. Pairs whose [ATS, DTS] intervals overlap met in
  memory and are skipped. Results: phase ``reactive``.
* **Clean-up** (2.7): after the last arrival, every in-memory tuple is flushed and ReactiveNL
  runs to completion with all the memory but one block for the outer batch (the engine's
  phase ``cleanup``).

Time model: a block write costs ``c_write``, a block read ``c_read``, an inner block's join
with the loaded outer batch ``c_join``, an arrival ``c_arrive`` (all in the arrival times'
unit; fixed in the config, never fitted to a result). Choices where the paper is garbled or
silent (each written in the figure config that uses it):

* memory: ``mem + buffered + 1 > budget`` flushes before an arrival is indexed (Alg 1 line 13
  with indexOverhead one tuple); the reactive phase's outer batch and inner block take memory
  too: tuples are flushed to make room (Alg 4 line 13), and the batch is capped to fit;
* Alg 3's garbled last lines: the opposite relation's Joins counters are credited per matched
  tuple, in the matched tuple's own region (equal for an equi-join);
* Alg 4 line 14 reads ``CurrInner <= JoinedInner`` (the text's ``<`` would never complete a
  batch), line 24 sets ``CurrInner = 1``, and the role switch swaps JoinedOuter and JoinedInner;
* ATS and DTS are one event counter (the arrival number): a tuple flushed while arrival n is
  processed has DTS = n and was probed by it; two tuples met in memory iff
  ``max(ATS) <= min(DTS)``;
* a null key joins nothing: the tuple is counted as an arrival and never stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from joins.online.disk_blocks import BlockDisk
from joins.online.kernel import EMPTY_I, expand
from joins.online.pair_counts import NotMet
from joins.online.programs.single_site import BlockNestedLoop, SingleSiteState, pairs_of

UP, LW, MD = 0, 1, 2
REGIONS = ("up", "lw", "md")
NEVER = np.iinfo(np.int64).max  # DTS of a tuple still in memory


def clock_sweep(bit: np.ndarray, visit: np.ndarray, need: int) -> tuple[np.ndarray, int | None]:
    """The middle region's clock (Alg 2): over positions ``visit`` of ``bit`` in hand order,
    evict up to ``need`` tuples whose join bit is clear, clearing the bits it passes; when too
    few are clear, a second pass evicts in order. Returns the evicted positions (sorted) and
    the position the hand stops at (None: past the end)."""
    bits = bit[visit]
    zero = np.flatnonzero(~bits)
    if len(zero) >= need:  # one pass: clear the bits passed over, evict the zeros
        stop = zero[need - 1] + 1
        bit[visit[:stop]] = False
        chosen = visit[zero[:need]]
    else:  # every bit cleared on the first pass; the second evicts in order
        bit[visit] = False
        second = np.flatnonzero(bits)[:need - len(zero)]
        chosen = np.concatenate([visit[zero], visit[second]])
        stop = int(second[-1]) + 1 if len(second) else len(visit)
    nxt = int(visit[stop]) if stop < len(visit) else None
    return np.sort(chosen), nxt


class Memory:
    """One relation's in-memory tuples, sorted on the key (ties in arrival order): columns
    with room to grow, of which ``key``, ``tid``, ``ats`` and ``bit`` are views of the first
    ``n`` rows (an insert moves the rows after it in place, with no copy of the rest; a view
    changes with the memory, so keep a copy of what must stay)."""

    def __init__(self) -> None:
        self.n = 0
        self._cols = (np.zeros(16), np.zeros(16, np.int64), np.zeros(16, np.int64),
                      np.zeros(16, bool))

    def __len__(self) -> int:
        return self.n

    @property
    def key(self) -> np.ndarray:
        return self._cols[0][:self.n]

    @property
    def tid(self) -> np.ndarray:
        return self._cols[1][:self.n]

    @property
    def ats(self) -> np.ndarray:
        return self._cols[2][:self.n]

    @property
    def bit(self) -> np.ndarray:
        return self._cols[3][:self.n]

    def insert(self, key: float, tid: int, ats: int, bit: bool) -> None:
        n = self.n
        if n == len(self._cols[0]):  # full: twice the room
            self._cols = tuple(np.concatenate([col, np.zeros_like(col)]) for col in self._cols)
        cols = self._cols
        i = int(cols[0][:n].searchsorted(key, "right"))
        for col, value in zip(cols, (key, tid, ats, bit), strict=True):
            if i < n:
                col[i + 1:n + 1] = col[i:n]
            col[i] = value
        self.n = n + 1

    def take(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Remove the tuples at ``idx``; returns their key, tid, ats."""
        out = self.key[idx], self.tid[idx], self.ats[idx]
        keep = np.ones(self.n, bool)
        keep[idx] = False
        left = int(keep.sum())
        for col in self._cols:
            col[:left] = col[:self.n][keep]
        self.n = left
        return out

    def matches(self, key: float, width: float) -> tuple[int, int]:
        k = self._cols[0][:self.n]
        return int(k.searchsorted(key - width, "left")), int(k.searchsorted(key + width, "right"))


class BatchIndex:
    """An outer batch's pair-count index (:class:`~joins.online.pair_counts.NotMet`) and its
    counts against inner blocks ``first``, ``first + 1``, ..."""

    def __init__(self, outer: np.ndarray) -> None:
        self.outer = outer
        self.not_met = NotMet(outer["key"], outer["ats"], outer["dts"])
        self.first, self.counts = 0, EMPTY_I


@dataclass
class Reactive:
    """ReactiveNL's state (Alg 4): three counters, the outer batch size and the roles."""

    started: bool = False
    outer: int = 0  # which relation is the outer
    joined_outer: int = 0
    joined_inner: int = 0
    curr_inner: int = 1
    outer_mem: int = 0
    loaded: np.ndarray | None = None  # the outer batch in memory (rows of the disk blocks)
    index: BatchIndex | None = None  # the loaded batch's pair counts


@dataclass
class DinerState(SingleSiteState):
    mem: list = field(default_factory=lambda: [Memory(), Memory()])
    joins: np.ndarray = field(default_factory=lambda: np.zeros((2, 3)))  # {Up,Lw,Md}Joins_i
    lw: list = field(default_factory=lambda: [-np.inf, -np.inf])  # LastLwVal_i
    up: list = field(default_factory=lambda: [np.inf, np.inf])  # LastUpVal_i
    hand: list = field(default_factory=lambda: [None, None])  # clock hand: (key, ats)
    rnl: Reactive = field(default_factory=Reactive)
    outer_cap: int = 0  # the clean-up's outer batch (0: max_outer_mem)


class Diner(BlockNestedLoop):
    name = "diner"
    state = DinerState
    stat_names = ("flushed_up", "flushed_lw", "flushed_md")
    COUNT_AHEAD = 32  # inner blocks counted (and read) at once against an outer batch

    def in_memory(self, ws):
        return ws.mem[0].n, ws.mem[1].n

    def hand_over(self, ws, cfg, buffered):
        return buffered > self.max_new_arr or not self._room_for_a_unit(ws, cfg)

    def on_hand_over(self, ws):
        ws.rnl.loaded = ws.rnl.index = None  # the outer batch leaves memory

    def reactive_unit(self, ws, cfg, c, out, phase):
        return self._reactive_step(ws, cfg, c, out, phase)

    def work_left(self, ws):
        return self._work_left(ws)

    def finish(self, ws, cfg, c, out):
        if not ws.disk:
            return
        # every in-memory tuple that may have partners on the other relation's disk goes to
        # disk, DTS = after the last arrival (two in-memory tuples met: their pair is done)
        partners = [len(ws.disk[1]) > 0, len(ws.disk[0]) > 0]
        for rel in (0, 1):
            m = ws.mem[rel]
            while len(m) and partners[rel]:
                k, t, a = m.take(np.arange(min(self.block, len(m))))
                ws.disk[rel].append(k, t, a, np.full(len(k), ws.events))
                ws.stats["blocks_written"] += 1
                ws.clock += self.c_write
        budget = cfg.budget_tuples or self.block * (self.max_outer_mem + 1)
        ws.outer_cap = max(1, budget // self.block - 1)  # all memory but the inner block
        ws.rnl.loaded = None
        while self._reactive_step(ws, cfg, c, out, phase=None):
            pass

    def arrive(self, ws, cfg, c, out, rel, key, tid):
        """Alg 1 for one arrival."""
        other = ws.mem[1 - rel]
        width = float(getattr(cfg.kernel, "width", 0.0) or 0.0)
        lo, hi = other.matches(key, width)
        n = hi - lo
        if n:
            other.bit[lo:hi] = True
            out.add(n, *pairs_of(cfg, rel, tid, other.tid[lo:hi].copy()), phase="arriving")
        self._statistics(ws, rel, key, n, other.key[lo:hi])
        self._make_room(ws, cfg, 1)  # Alg 1 line 13: room for the tuple
        ws.mem[rel].insert(key, tid, ws.events, n > 0)

    def _region(self, ws, rel: int, keys: np.ndarray) -> np.ndarray:
        return np.where(keys >= ws.up[rel], UP, np.where(keys <= ws.lw[rel], LW, MD))

    def _region_of(self, ws, rel: int, key: float) -> int:
        """:meth:`_region` of one key."""
        return UP if key >= ws.up[rel] else LW if key <= ws.lw[rel] else MD

    def _statistics(self, ws, rel: int, key: float, n: int, matched: np.ndarray) -> None:
        """Alg 3: the arriving tuple's region of its own relation; the matched tuples' own
        regions of the other (the garbled lines, read per matched tuple)."""
        ws.joins[rel, self._region_of(ws, rel, key)] += n
        if n and matched[0] == matched[-1]:  # one key (an equi-join): one region
            ws.joins[1 - rel, self._region_of(ws, 1 - rel, float(matched[0]))] += n
        elif n:
            ws.joins[1 - rel] += np.bincount(self._region(ws, 1 - rel, matched), minlength=3)

    def _tups(self, ws, rel: int) -> np.ndarray:
        k = ws.mem[rel].key
        lw_end = int(np.searchsorted(k, ws.lw[rel], "right"))
        up_start = int(np.searchsorted(k, ws.up[rel], "left"))
        return np.array([len(k) - up_start, lw_end, max(0, up_start - lw_end)])

    def _flush(self, ws) -> None:
        """Alg 2: one block of the victim relation's lowest-benefit region(s) to disk."""
        rel = 0 if len(ws.mem[0]) >= len(ws.mem[1]) else 1
        m = ws.mem[rel]
        tups = self._tups(ws, rel)
        with np.errstate(divide="ignore", invalid="ignore"):
            benefit = np.where(tups > 0, ws.joins[rel] / np.maximum(tups, 1), np.inf)
        first = not np.isfinite(ws.lw[rel]) and not np.isfinite(ws.up[rel])
        taken: list[np.ndarray] = []
        order: list[int] = []
        need = self.block
        for region in sorted((UP, LW, MD), key=lambda r: (benefit[r], r)):
            if need == 0 or tups[region] == 0:
                continue
            idx = self._pick(ws, rel, region, need)
            taken.append(idx)
            order.append(region)
            need -= len(idx)
            ws.stats[f"flushed_{REGIONS[region]}"] += len(idx)
        idx = np.unique(np.concatenate(taken)) if taken else EMPTY_I
        k, t, a = m.take(idx)
        ws.disk[rel].append(k, t, a, np.full(len(k), ws.events))
        ws.stats["blocks_written"] += 1
        ws.clock += self.c_write
        ws.joins[rel] = 0
        flushed = {r for r, i in zip(order, taken, strict=False) if len(i)}
        self._set_bounds(ws, rel, {UP, LW} if first else flushed)

    def _pick(self, ws, rel: int, region: int, need: int) -> np.ndarray:
        """Up to ``need`` tuple positions of a region: the largest (Up) or smallest (Lw) keys,
        or the clock over the middle region's join bits."""
        m = ws.mem[rel]
        lw_end = int(np.searchsorted(m.key, ws.lw[rel], "right"))
        up_start = int(np.searchsorted(m.key, ws.up[rel], "left"))
        if region == UP:
            return np.arange(max(up_start, len(m) - need), len(m))
        if region == LW:
            return np.arange(0, min(lw_end, need))
        span = np.arange(lw_end, up_start)
        if ws.hand[rel] is None:  # the first clock run starts at a random middle tuple
            start = int(np.random.default_rng(ws.seed + rel).integers(len(span)))
        else:
            hk, ha = ws.hand[rel]
            lo, hi = np.searchsorted(m.key, hk, "left"), np.searchsorted(m.key, hk, "right")
            pos = int(lo + np.searchsorted(m.ats[lo:hi], ha, "left"))
            start = int(np.clip(pos - lw_end, 0, len(span))) % len(span)
        chosen, nxt = clock_sweep(m.bit, np.roll(span, -start), need)
        ws.hand[rel] = None if nxt is None else (float(m.key[nxt]), int(m.ats[nxt]))
        return chosen

    def _set_bounds(self, ws, rel: int, which: set[int]) -> None:
        """After a flush of Up (Lw), the largest LastUpVal (smallest LastLwVal) that leaves a
        block's worth in the region (2.5); after the first flush both. Lw stays below Up."""
        k = ws.mem[rel].key
        if len(k) < 2 * self.block:
            ws.lw[rel], ws.up[rel] = -np.inf, np.inf  # too few: everything is the middle
            return
        if UP in which:
            ws.up[rel] = float(k[len(k) - self.block])
        if LW in which:
            ws.lw[rel] = float(k[self.block - 1])
        if ws.lw[rel] >= ws.up[rel]:  # one key fills both ends (extreme skew)
            below = k[k < ws.up[rel]]
            ws.lw[rel] = float(below[-1]) if len(below) else -np.inf

    # --- ReactiveNL -----------------------------------------------------------------------------

    def _work_left(self, ws) -> bool:
        r, disk = ws.rnl, ws.disk
        if not disk or not len(disk[0]) or not len(disk[1]):
            return False
        if not r.started:
            return True
        return not (r.joined_outer == len(disk[r.outer]) and
                    r.joined_inner == len(disk[1 - r.outer]))

    def _reactive_step(self, ws, cfg, c, out, phase: str | None) -> bool:
        """One unit of ReactiveNL: one inner block against the outer batch. False when every
        pair of disk blocks has been joined."""
        r, disk = ws.rnl, ws.disk
        if not self._work_left(ws):
            return False
        if not r.started:
            r.started = True
            r.outer = 0 if len(disk[0]) <= len(disk[1]) else 1  # the smaller is the outer
            r.joined_inner, r.joined_outer, r.curr_inner = len(disk[1 - r.outer]), 0, 1
        while True:
            outer, inner = disk[r.outer], disk[1 - r.outer]
            if r.joined_outer < len(outer):
                if r.curr_inner == 1 and r.loaded is None:
                    cap = ws.outer_cap or self.max_outer_mem
                    if cfg.budget_tuples is not None:
                        cap = min(cap, max(1, cfg.budget_tuples // self.block - 1))
                    r.outer_mem = min(cap, len(outer) - r.joined_outer)
                if r.curr_inner <= r.joined_inner:
                    if r.loaded is None:
                        self._make_room(ws, cfg, (r.outer_mem + 1) * self.block)
                        r.loaded = outer.read(r.joined_outer + 1, r.outer_mem)
                        self.used(ws, len(r.loaded) + self.block)
                        ws.stats["blocks_read"] += r.outer_mem
                        ws.clock += r.outer_mem * self.c_read
                    ws.stats["blocks_read"] += 1
                    ws.clock += self.c_read + self.c_join
                    self._join_inner(ws, cfg, c, out, inner, r.curr_inner, phase)
                    r.curr_inner += 1
                    if r.curr_inner > r.joined_inner:
                        r.joined_outer += r.outer_mem
                        r.curr_inner, r.loaded = 1, None
                    return True
                r.joined_outer += r.outer_mem  # an empty inner prefix: nothing to join
                r.curr_inner, r.loaded = 1, None
                continue
            if r.joined_inner < len(inner):  # the outer is exhausted: the roles change
                r.outer = 1 - r.outer
                r.joined_outer, r.joined_inner = r.joined_inner, r.joined_outer
                r.curr_inner, r.loaded = 1, None
                continue
            return False

    def _room_for_a_unit(self, ws, cfg) -> bool:
        """Memory for the next inner block and the outer batch beside the tuples and the
        buffer, flushing tuples to make it; without it the reactive phase hands over (the
        arrivals then flush as they need): the budget holds at every decision point."""
        if cfg.budget_tuples is None:
            return True
        r = ws.rnl
        batch = len(r.loaded) if r.loaded is not None else \
            self.block * max(1, min(ws.outer_cap or self.max_outer_mem,
                                    cfg.budget_tuples // self.block - 1))
        need = batch + self.block
        buffered = self.buffered(ws)
        if buffered + need > cfg.budget_tuples:
            return False  # not even an empty memory holds a unit: flush nothing for it
        if sum(self.in_memory(ws)) + buffered + need > cfg.budget_tuples:
            self._make_room(ws, cfg, need)  # (a flush moves the clock: the buffer grows)
            if sum(self.in_memory(ws)) + self.buffered(ws) + need > cfg.budget_tuples:
                return False
        self.used(ws, need)
        return True

    def _join_inner(self, ws, cfg, c, out, inner: BlockDisk, block_id: int,
                    phase: str | None) -> None:
        """A unit's join: inner block ``block_id`` against the loaded outer batch, pairs
        listed (:meth:`_join_blocks`) or, for an equi-join whose rows are not collected,
        counted (:meth:`_count_not_met`)."""
        r = ws.rnl
        if cfg.want_pairs or cfg.pairs_dir or float(getattr(cfg.kernel, "width", 0.0) or 0.0):
            self._join_blocks(ws, cfg, c, out, r.loaded, inner.read(block_id), r.outer, phase)
            return
        c["probes"] += inner.sizes[block_id - 1]
        n = self._count_not_met(ws, inner, block_id)
        if n:  # counted, never listed (billions of pairs at high skew)
            out.add(n, phase=phase)

    def _count_not_met(self, ws, inner: BlockDisk, block_id: int) -> int:
        """Equal-key pairs of inner block ``block_id`` and the loaded outer batch that did not
        meet in memory (:func:`~joins.online.pair_counts.pairs_not_met`), from the batch's
        index, for up to ``COUNT_AHEAD`` inner blocks of its prefix at a time (one read)."""
        r = ws.rnl
        index = r.index
        if index is None or index.outer is not r.loaded:
            index = r.index = BatchIndex(r.loaded)
        k = block_id - index.first
        if not 0 <= k < len(index.counts):
            ids = list(range(block_id, min(block_id + self.COUNT_AHEAD, r.joined_inner + 1)))
            rows = inner.read_many(ids)
            each = np.concatenate([[0], np.cumsum(index.not_met.each(
                rows["key"], rows["ats"], rows["dts"]))])
            ends = np.cumsum([0] + [inner.sizes[i - 1] for i in ids])
            index.first, index.counts, k = block_id, np.diff(each[ends]), 0
        return int(index.counts[k])

    def _join_blocks(self, ws, cfg, c, out, outer: np.ndarray, inner: np.ndarray,
                     outer_rel: int, phase: str | None) -> None:
        """Sort-merge of key-sorted blocks; pairs that met in memory (overlapping [ATS, DTS])
        are skipped."""
        width = float(getattr(cfg.kernel, "width", 0.0) or 0.0)
        ok, ik = outer["key"], inner["key"]
        c["probes"] += len(ik)
        lo = np.searchsorted(ok, ik - width, "left")
        hi = np.searchsorted(ok, ik + width, "right")
        pi, po = expand(lo, hi)
        if not len(pi):
            return
        met = np.maximum(inner["ats"][pi], outer["ats"][po]) <= \
            np.minimum(inner["dts"][pi], outer["dts"][po])
        pi, po = pi[~met], po[~met]
        if not len(pi):
            return
        it, ot = inner["tid"][pi], outer["tid"][po]
        pair = (ot, it) if outer_rel == 0 else (it, ot)
        out.add(len(pi), *(pair if cfg.want_pairs or cfg.pairs_dir else ()), phase=phase)
