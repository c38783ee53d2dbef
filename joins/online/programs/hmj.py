"""Hash-Merge Join (Mokbel et al., ICDE 2004), DINER's baseline (paper ``diner`` 2.9), as a
worker program on the single-site event loop (:mod:`joins.online.programs.single_site`).

* **Hashing phase**: each relation has ``n_part`` buckets (a hash of the key); an arrival
  probes the other relation's bucket in memory (results: phase ``arriving``), then is stored.
  Room for it is made before it probes (see :meth:`HashMerge.arrive`).
* **Flushing**: when the memory (tuples and input buffer) would pass the budget, the pair of
  corresponding buckets holding the most tuples together is flushed, both sides, as one sorted
  disk *segment* pair of that bucket. The paper's heuristic "free as much space as possible
  while keeping the memory balanced" is read as: the largest pair (both sides go, so the
  balance is kept); written in the figure configs.
* **Merging phase** (reactive, when the inputs block for ``wait_thresh``, and the clean-up):
  the ``fan_in`` (F) oldest segments of the bucket with the most segments are merged into one,
  producing the pairs of tuples of different segments (two tuples of one segment met in
  memory). The unit is one merge: the input is checked after it (the paper's granularity), so
  the handover delay grows with the segments.
* **Clean-up**: every bucket's in-memory tuples become a last segment (when it has segments
  on disk), then each bucket's segments are merged down to one. When results are counted,
  not listed, the merges are charged as they would run and their pairs counted once per
  bucket (:meth:`HashMerge._merge_counted`: the same counts and charges).

Choices (the paper leaves them open; config values): ``n_part``, ``fan_in`` (the paper's
F = 10), the bucket choice above, merges not charged to the memory budget (they stream
blocks), the same block costs as DINER (``c_read``, ``c_write`` per block, ``c_join`` per
block read in a merge).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from joins.online.kernel import expand
from joins.online.pair_counts import pairs_across_groups
from joins.online.programs.single_site import SingleSite, SingleSiteState, pairs_of


@dataclass
class HmjState(SingleSiteState):
    mem: list = field(default_factory=lambda: [{}, {}])  # bucket -> {key: [tid, ...]}
    count: np.ndarray = field(default_factory=lambda: np.zeros((2, 0), np.int64))
    held: list = field(default_factory=lambda: [0, 0])  # count's row sums, kept per arrival
    segments: dict = field(default_factory=dict)  # bucket -> [(A block id, B block id)]
    unwritten: int = 0  # tuples of the counted clean-up's merges (HashMerge._merge_counted)


class HashMerge(SingleSite):
    name = "hmj"
    state = HmjState
    stat_names = ("flushes", "merges")

    def __init__(self, n_part: int = 100, fan_in: int = 10, tups_per_block: int = 50,
                 wait_thresh: float = 25.0, c_read: float = 0.2, c_write: float = 0.2,
                 c_join: float = 0.05, c_arrive: float = 0.0, seed: int = 0) -> None:
        super().__init__(tups_per_block=tups_per_block, wait_thresh=wait_thresh,
                         c_read=c_read, c_write=c_write, c_join=c_join, c_arrive=c_arrive,
                         seed=seed)
        if n_part < 1 or fan_in < 2:
            raise ValueError("n_part must be >= 1 and fan_in >= 2")
        self.n_part, self.fan_in = n_part, fan_in

    def bucket(self, key: float) -> int:
        return hash(key) % self.n_part  # a float's hash is the same in every process

    def in_memory(self, ws):
        return ws.held[0], ws.held[1]

    def disk_tuples(self, ws) -> int:
        return super().disk_tuples(ws) + ws.unwritten

    def new_worker(self, wid):
        ws = super().new_worker(wid)
        ws.count = np.zeros((2, self.n_part), np.int64)
        return ws

    def arrive(self, ws, cfg, c, out, rel, key, tid):
        """Room first, then probe and store: a bucket flushed for this tuple is on disk when
        it probes (the merge produces those pairs), so no pair is produced twice."""
        budget = cfg.budget_tuples
        if budget is not None:
            while sum(self.in_memory(ws)) + self.buffered(ws) + 1 > budget and \
                    sum(self.in_memory(ws)):
                self._flush(ws, int(np.argmax(ws.count[0] + ws.count[1])))
        j = self.bucket(key)
        partners = ws.mem[1 - rel].get(j, {}).get(key)
        if partners:
            out.add(len(partners), *pairs_of(cfg, rel, tid, partners),
                    phase="arriving")
        ws.mem[rel].setdefault(j, {}).setdefault(key, []).append(tid)
        ws.count[rel, j] += 1
        ws.held[rel] += 1

    def _flush(self, ws, j: int) -> None:
        """Both sides of bucket ``j`` to disk as one segment pair."""
        ids = []
        for rel in (0, 1):
            held = ws.mem[rel].pop(j, {})
            keys = np.array([k for k, tids in held.items() for _ in tids], float)
            tids = np.array([t for ts in held.values() for t in ts], np.int64)
            ids.append(self._write(ws, rel, keys, tids))
            ws.held[rel] -= int(ws.count[rel, j])
            ws.count[rel, j] = 0
        ws.segments.setdefault(j, []).append(tuple(ids))
        ws.stats["flushes"] += 1

    def _write(self, ws, rel: int, keys: np.ndarray, tids: np.ndarray,
               ats: np.ndarray | None = None, dts: np.ndarray | None = None,
               last: np.ndarray | None = None) -> int:
        """One sorted segment of ``rel`` (timestamps only where the subclass checks them)."""
        if not len(keys):
            return 0  # an empty side: no block
        zeros = np.zeros(len(keys), np.int64)
        self._charge_write(ws, len(keys))
        return ws.disk[rel].append(keys, tids, zeros if ats is None else ats,
                                   zeros if dts is None else dts, last)

    def _read_many(self, ws, rel: int, ids: list[int]) -> np.ndarray:
        """Segments ``ids`` of ``rel`` (0: an empty side), concatenated; each segment's blocks
        charged a read and a join."""
        rows = ws.disk[rel].read_many(ids)
        for i in ids:  # one charge per segment, in order (the clock's float sums as before)
            if i:
                self._charge_read(ws, self._size(ws, rel, i))
        return rows

    def _size(self, ws, rel: int, block_id: int) -> int:
        """Tuples of segment ``block_id`` of ``rel`` (0: an empty side)."""
        return ws.disk[rel].sizes[block_id - 1] if block_id else 0

    def _charge_read(self, ws, tuples: int) -> None:
        """A segment of ``tuples`` read and joined: its blocks on the clock."""
        blocks = -(-tuples // self.block)
        ws.stats["blocks_read"] += blocks
        ws.clock += blocks * (self.c_read + self.c_join)

    def _charge_write(self, ws, tuples: int) -> None:
        blocks = -(-tuples // self.block)
        ws.stats["blocks_written"] += blocks
        ws.clock += blocks * self.c_write

    def _sorted_sides(self, ws, segs: list, read) -> list[tuple[np.ndarray, np.ndarray]]:
        """Both relations' tuples of segments ``segs`` (``read``: how they are read), each
        sorted on the key with the index of the segment it came from."""
        sides = []
        for rel in (0, 1):
            ids = [pair[rel] for pair in segs]
            rows = read(ws, rel, ids)
            origin = np.repeat(np.arange(len(segs)), [self._size(ws, rel, i) for i in ids])
            order = np.argsort(rows["key"], kind="stable")
            sides.append((rows[order], origin[order]))
        return sides

    def work_left(self, ws):
        return any(len(s) > 1 for s in ws.segments.values())

    def reactive_unit(self, ws, cfg, c, out, phase):
        if not self.work_left(ws):
            return False
        j = max(ws.segments, key=lambda b: (len(ws.segments[b]), -b))
        self._merge(ws, cfg, c, out, j, phase)
        return True

    def _merge(self, ws, cfg, c, out, j: int, phase: str | None) -> None:
        """The F oldest segments of bucket ``j`` into one: pairs across segments."""
        segs = ws.segments[j]
        group, rest = segs[:self.fan_in], segs[self.fan_in:]
        sides = self._sorted_sides(ws, group, self._read_many)
        (a, oa), (b, ob) = sides
        c["probes"] += len(a)
        width = float(getattr(cfg.kernel, "width", 0.0) or 0.0)  # PMJ's band joins
        if cfg.want_pairs or cfg.pairs_dir:
            lo = np.searchsorted(b["key"], a["key"] - width, "left")
            hi = np.searchsorted(b["key"], a["key"] + width, "right")
            pa, pb = expand(lo, hi)
            keep = (oa[pa] != ob[pb]) & self._not_produced(a[pa], b[pb])
            pa, pb = pa[keep], pb[keep]
            if len(pa):
                out.add(len(pa), a["tid"][pa], b["tid"][pb], phase=phase)
        else:  # counted, never listed (billions of pairs at high skew)
            n = self._count_new(a, oa, b, ob, width)
            if n:
                out.add(n, phase=phase)
        merged = tuple(self._write(ws, rel, side["key"], side["tid"], side["ats"], side["dts"],
                                   side["last"])
                       for rel, (side, _) in enumerate(sides))
        ws.segments[j] = [merged, *rest]
        ws.stats["merges"] += 1

    def _not_produced(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | bool:
        """Which listed pairs of tuples from different segments are new: all of them (one
        segment pair's tuples met in memory, tuples of different ones never did)."""
        return True

    def _count_new(self, a: np.ndarray, oa: np.ndarray, b: np.ndarray, ob: np.ndarray,
                   width: float = 0.0) -> int:
        """The new pairs of a merge, counted: matching keys from different segments."""
        return pairs_across_groups(a["key"], oa, b["key"], ob, width)

    def finish(self, ws, cfg, c, out):
        if not ws.disk:
            return
        for j in range(self.n_part):  # a bucket with segments meets its memory tuples
            if ws.segments.get(j) and ws.count[:, j].sum():
                self._flush(ws, j)
        listing = cfg.want_pairs or cfg.pairs_dir
        for j in list(ws.segments):
            if not listing:
                self._merge_counted(ws, cfg, c, out, j)
            while len(ws.segments[j]) > 1:
                self._merge(ws, cfg, c, out, j, None)

    def _merge_counted(self, ws, cfg, c, out, j: int) -> None:
        """The clean-up of bucket ``j`` when results are counted: its merges, F oldest
        segments at a time down to one, charged as they run (blocks read and written, the
        clock, in :meth:`_merge`'s order), and their new pairs counted once over the bucket.

        The same count as merge by merge: a pair of tuples from two of the bucket's segments
        is counted by the one merge that first puts their segments together, if
        :meth:`_count_new`'s condition holds, which depends on the two tuples alone. The
        merged segments are not written (nothing reads them after the clean-up);
        ``ws.unwritten`` keeps the worker's disk tuples as if they had been."""
        segs = ws.segments[j]
        if len(segs) < 2:
            return
        (a, oa), (b, ob) = self._sorted_sides(
            ws, segs, lambda ws, rel, ids: ws.disk[rel].read_many(ids))  # charged below
        new = self._count_new(a, oa, b, ob, float(getattr(cfg.kernel, "width", 0.0) or 0.0))
        sizes = [[self._size(ws, rel, pair[rel]) for rel in (0, 1)] for pair in segs]
        while len(sizes) > 1:  # the merges' charges, in _merge's order
            group, rest = sizes[:self.fan_in], sizes[self.fan_in:]
            for rel in (0, 1):
                for g in group:
                    if g[rel]:
                        self._charge_read(ws, g[rel])
            c["probes"] += sum(g[0] for g in group)
            merged = [sum(g[rel] for g in group) for rel in (0, 1)]
            for size in merged:  # an empty side writes no block
                if size:
                    self._charge_write(ws, size)
                    ws.unwritten += size
            ws.stats["merges"] += 1
            sizes = [merged, *rest]
        ws.segments[j] = []
        if new:
            out.add(new)
