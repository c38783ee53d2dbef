"""Rate-based Progressive Join (Tao, Yiu, Papadias, Hadjieleftheriou, Mamoulis, SIGMOD 2005),
DINER's main baseline (paper ``diner`` 2.9), rebuilt from the two papers' descriptions as a
worker program on the single-site event loop. The DINER paper ran the RPJ authors' C++ code;
this is not that code, and where the descriptions are silent the choice is written here and
in the figure configs.

* **Arriving phase**: as HMJ, ``n_part`` buckets per relation; an arrival probes the other
  relation's bucket in memory, then is stored (probe first, as DINER: a tuple flushed while
  arrival n is processed has DTS = n and met arrival n).
* **Flushing**: when the memory (tuples and input buffer) would pass the budget, RPJ estimates
  p_i[j], the probability that the next arrival belongs to relation i and bucket j, here from
  every arrival so far (the arrivals of (i, j) over all arrivals: a choice, the paper keeps
  arrival statistics without saying which). The smallest p_i[j] sends ``n_flush`` tuples
  (default one block) of bucket j of the *opposite* relation to disk, the oldest first, as one
  sorted segment; when that bucket holds fewer, the next-smallest p gives the rest ("the next
  smallest probability is chosen", read as: the flush goes on there; passing such buckets
  over would, with small buckets, leave no victim), ties to the fuller bucket.
* **Reactive phase** (when the inputs block for ``wait_thresh``): one task per unit, the one
  with the highest expected output per unit of modeled time (the rate RPJ is named for): a
  *memory-disk* pass (bucket j of relation i on disk against bucket j of the other relation in
  memory, XJoin's second stage) or a *disk-disk* merge of the ``fan_in`` (F) oldest segment
  groups of bucket j (HMJ's merge). Expected output = the bucket's selectivity seen in the
  arriving phase (results over candidate pairs probed) times the candidate pairs the task
  has not yet considered (from the operator's own flush and pass bookkeeping); cost = the
  blocks it reads (``c_read + c_join`` each) and writes (``c_write``). The input is checked
  after each task (a merge of F groups is not interruptible: the paper's point about RPJ's
  growing merges).
* **Duplicate avoidance** (XJoin's timestamps): every tuple carries its arrival (ATS) and
  departure (DTS) event numbers and ``last``, the latest memory-disk pass against the other
  relation's disk while it was in memory; two tuples were joined iff their [ATS, DTS] overlap,
  or one's ``last`` is at or after the other's DTS, or an earlier merge put them in one segment
  group (:func:`~joins.online.pair_counts.pairs_not_produced`).
* **Clean-up**: each bucket with segments on disk flushes its memory tuples (DTS after the last
  arrival) as one segment group, and its groups are merged F at a time down to one.

Merges and passes stream blocks and are not charged to the memory budget (as HMJ's).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from joins.online.kernel import expand
from joins.online.pair_counts import pairs_not_produced, pairs_not_produced_ranked
from joins.online.programs.hmj import HashMerge, HmjState
from joins.online.programs.single_site import pairs_of


@dataclass
class RpjState(HmjState):
    order: list = field(default_factory=lambda: [{}, {}])  # bucket -> [keys, tids, ats] deques
    arrivals: np.ndarray = field(default_factory=lambda: np.zeros((2, 0)))  # for p_i[j]
    last_pass: np.ndarray = field(default_factory=lambda: np.zeros((2, 0), np.int64))
    flushed: list = field(default_factory=lambda: [{}, {}])  # bucket -> ([DTS], [cum. tuples])
    probed: np.ndarray = field(default_factory=lambda: np.zeros(0))  # candidate pairs
    matched: np.ndarray = field(default_factory=lambda: np.zeros(0))  # results
    # the task table, kept per bucket: candidate pairs (0: no task) and modeled cost of the
    # tasks pass 0, pass 1 and merge (rows); ``dirty``: buckets changed since it was brought
    # up to date; ``rank``: a bucket's place in ``segments`` (ties go to the earliest)
    cand: np.ndarray = field(default_factory=lambda: np.zeros((3, 0), np.int64))
    cost: np.ndarray = field(default_factory=lambda: np.zeros((3, 0)))
    rank: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dirty: set = field(default_factory=set)


class RateBasedProgressive(HashMerge):
    name = "rpj"
    state = RpjState
    stat_names = ("flushes", "merges", "passes")
    merges = True  # reactive tasks: passes and merges (XJoin: passes only)

    def __init__(self, n_part: int = 100, fan_in: int = 10, n_flush: int | None = None,
                 tups_per_block: int = 50, wait_thresh: float = 25.0, c_read: float = 0.2,
                 c_write: float = 0.2, c_join: float = 0.05, c_arrive: float = 0.0,
                 seed: int = 0) -> None:
        super().__init__(n_part=n_part, fan_in=fan_in, tups_per_block=tups_per_block,
                         wait_thresh=wait_thresh, c_read=c_read, c_write=c_write,
                         c_join=c_join, c_arrive=c_arrive, seed=seed)
        self.n_flush = tups_per_block if n_flush is None else n_flush
        if self.n_flush < 1:
            raise ValueError("n_flush must be >= 1")

    def new_worker(self, wid):
        ws = super().new_worker(wid)
        ws.arrivals = np.zeros((2, self.n_part))
        ws.last_pass = np.full((2, self.n_part), -1, np.int64)
        ws.probed, ws.matched = np.zeros(self.n_part), np.zeros(self.n_part)
        ws.cand = np.zeros((3, self.n_part), np.int64)
        ws.cost = np.zeros((3, self.n_part))
        ws.rank = np.full(self.n_part, -1, np.int64)
        return ws

    # --- arriving phase and flushing ------------------------------------------------------------

    def arrive(self, ws, cfg, c, out, rel, key, tid):
        j = self.bucket(key)
        partners = ws.mem[1 - rel].get(j, {}).get(key)
        n = len(partners) if partners else 0
        ws.probed[j] += ws.count[1 - rel, j]
        ws.matched[j] += n
        if n:
            out.add(n, *pairs_of(cfg, rel, tid, partners),
                    phase="arriving")
        ws.arrivals[rel, j] += 1
        budget = cfg.budget_tuples
        if budget is not None:
            while sum(self.in_memory(ws)) + self.buffered(ws) + 1 > budget and \
                    sum(self.in_memory(ws)):
                self._flush_victim(ws)
        ws.mem[rel].setdefault(j, {}).setdefault(key, deque()).append(tid)
        keys, tids, ats = ws.order[rel].setdefault(j, (deque(), deque(), deque()))
        keys.append(key)
        tids.append(tid)
        ats.append(ws.events)
        ws.count[rel, j] += 1
        ws.held[rel] += 1
        ws.dirty.add(j)

    def _flush_victim(self, ws) -> None:
        """RPJ's policy: the smallest p_i[j] flushes tuples of bucket j of the other relation;
        when that bucket holds fewer than n_flush, the next-smallest p gives the rest, until
        n_flush tuples (or all in memory) are flushed, each bucket's part its own segment."""
        p = ws.arrivals / max(ws.arrivals.sum(), 1.0)  # p[i, j]
        victims = ws.count[::-1]  # row i: the bucket sizes of relation 1 - i
        i, j = np.nonzero(victims)
        need = self.n_flush
        for k in np.lexsort((-victims[i, j], p[i, j])):  # smallest p, then the fuller bucket
            n = min(need, int(victims[i[k], j[k]]))
            self._spill(ws, 1 - int(i[k]), int(j[k]), n, ws.events)
            need -= n
            if not need:
                return

    def _take(self, ws, rel: int, j: int, n: int) -> tuple[np.ndarray, ...]:
        """The ``n`` oldest in-memory tuples of bucket ``j`` of ``rel``, removed."""
        if not n:
            return np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
        order, index = ws.order[rel][j], ws.mem[rel][j]
        keys, tids, ats = ([col.popleft() for _ in range(n)] for col in order)
        for key in keys:  # the oldest of the bucket are the oldest of their key
            index[key].popleft()
            if not index[key]:
                del index[key]
        ws.count[rel, j] -= n
        ws.held[rel] -= n
        return np.array(keys, float), np.array(tids, np.int64), np.array(ats, np.int64)

    def _spill(self, ws, rel: int, j: int, n: int, dts: int) -> int:
        """``n`` tuples of bucket ``j`` of ``rel`` to disk as a segment of its own group."""
        keys, tids, ats = self._take(ws, rel, j, n)
        block = self._write(ws, rel, keys, tids, ats, np.full(n, dts, np.int64),
                            self._last(ws, rel, j, ats))
        if j not in ws.segments:
            ws.rank[j] = len(ws.segments)
        ws.segments.setdefault(j, []).append((block, 0) if rel == 0 else (0, block))
        times, cum = ws.flushed[rel].setdefault(j, ([], [0]))
        times.append(dts)
        cum.append(cum[-1] + n)
        ws.stats["flushes"] += 1
        ws.dirty.add(j)
        return block

    def _last(self, ws, rel: int, j: int, ats: np.ndarray) -> np.ndarray:
        """Each tuple's latest pass against the other relation's disk while in memory."""
        lp = ws.last_pass[1 - rel, j]
        return np.where(ats <= lp, lp, -1).astype(np.int64)

    def _flush(self, ws, j: int) -> None:
        """The clean-up: both sides of bucket ``j`` as one segment group (they met)."""
        ids = [self._spill(ws, rel, j, int(ws.count[rel, j]), ws.events + 1)
               if ws.count[rel, j] else 0 for rel in (0, 1)]
        segs = ws.segments[j]
        del segs[len(segs) - sum(1 for i in ids if i):]
        segs.append(tuple(ids))
        ws.dirty.add(j)

    # --- duplicate avoidance --------------------------------------------------------------------

    def _not_produced(self, a, b):
        return (((b["dts"] > a["last"]) & (b["dts"] < a["ats"])) |
                ((a["dts"] > b["last"]) & (a["dts"] < b["ats"])))

    def _count_new(self, a, oa, b, ob, width=0.0):
        """Pairs not produced, less those within one segment group: those of equal key rank
        and equal (group, key rank)."""
        if not len(a) or not len(b):
            return 0
        _, rank = np.unique(np.concatenate([a["key"], b["key"]]), return_inverse=True)
        rank = rank.reshape(-1).astype(np.int64)
        ra, rb = rank[:len(a)], rank[len(a):]
        span = int(rank.max()) + 1
        times_a, times_b = (a["ats"], a["dts"], a["last"]), (b["ats"], b["dts"], b["last"])
        return (pairs_not_produced_ranked(ra, *times_a, rb, *times_b) -
                pairs_not_produced_ranked(oa * span + ra, *times_a, ob * span + rb, *times_b))

    # --- reactive phase -------------------------------------------------------------------------

    def _blocks(self, ws, rel: int, block_id: int) -> int:
        return -(-self._size(ws, rel, block_id) // self.block)

    def _pass_candidates(self, ws, i: int, j: int) -> int:
        """Pairs of bucket j of relation i on disk and of the other relation in memory that
        no earlier pass considered and that did not meet in memory (disk tuples that left
        after the memory tuple's latest pass and before it arrived)."""
        mem = ws.order[1 - i].get(j)
        hist = ws.flushed[i].get(j)
        if not mem or not mem[2] or not hist:
            return 0
        times, cum = hist  # flush DTS (non-decreasing) and tuples flushed before each
        lp = int(ws.last_pass[i, j])
        ats = mem[2]
        if len(ats) > 64:  # a large bucket: vectorised
            a = np.fromiter(ats, np.int64, len(ats))
            dts, tot = np.array(times, np.int64), np.array(cum, np.int64)
            last = np.where(a <= lp, lp, -1)
            left_before = tot[np.searchsorted(dts, a, "left")]
            passed = tot[np.searchsorted(dts, last, "right")]
            return int(np.maximum(left_before - passed, 0).sum())
        n = 0
        after_pass, no_pass = cum[bisect_right(times, lp)], cum[bisect_right(times, -1)]
        for a in ats:
            d = cum[bisect_left(times, a)] - (after_pass if a <= lp else no_pass)
            if d > 0:
                n += d
        return n

    def _refresh(self, ws) -> None:
        """Bring the task table up to date: the tasks of the buckets changed since the last
        decision (a task reads its bucket's memory, flushes, segments and last pass only)."""
        for j in ws.dirty:
            segs = ws.segments.get(j)
            if not segs:
                ws.cand[:, j] = 0
                continue
            for i in (0, 1):
                n = self._pass_candidates(ws, i, j) if ws.count[1 - i, j] else 0
                ws.cand[i, j] = n
                if n:
                    ws.cost[i, j] = sum(self._blocks(ws, i, ids[i]) for ids in segs) * \
                        (self.c_read + self.c_join)
            n = 0
            if self.merges and len(segs) > 1:
                group = segs[:self.fan_in]
                a = [self._size(ws, 0, g[0]) for g in group]
                b = [self._size(ws, 1, g[1]) for g in group]
                n = sum(a) * sum(b) - sum(x * y for x, y in zip(a, b, strict=True))
                if n:
                    blocks = sum(self._blocks(ws, r, g[r]) for g in group for r in (0, 1))
                    ws.cost[2, j] = blocks * (self.c_read + self.c_join + self.c_write)
            ws.cand[2, j] = n
        ws.dirty.clear()

    def _selectivities(self, ws, j: np.ndarray) -> np.ndarray:
        """Results per candidate pair probed in buckets ``j`` (all buckets' where a bucket
        has none probed; 1 when none is)."""
        probed = ws.probed[j]
        total = ws.probed.sum()
        default = ws.matched.sum() / total if total else 1.0
        sigma = np.full(len(j), default, float)
        np.divide(ws.matched[j], probed, out=sigma, where=probed != 0)
        return sigma

    def _keys(self, ws, kind: np.ndarray, j: np.ndarray, n: np.ndarray) -> tuple:
        """The ranking of the tasks with candidates, most wanted first: (rate, expected
        output, candidates) (XJoin overrides it)."""
        expected = self._selectivities(ws, j) * n
        return expected / np.maximum(ws.cost[kind, j], 1e-12), expected, n

    def _best(self, ws) -> tuple | None:
        """The reactive task to run: the highest key, ties to the task listed first (buckets
        in ``segments`` order; pass 0, pass 1, merge); None when no task has candidates."""
        self._refresh(ws)
        kind, j = np.nonzero(ws.cand)
        if not len(j):
            return None
        n = ws.cand[kind, j]
        keys = self._keys(ws, kind, j, n)
        top = np.arange(len(j))
        for k in keys:  # the lexicographic maximum
            k = k[top]
            top = top[k == k.max()]
            if len(top) == 1:
                break
        b = int(top[np.argmin(ws.rank[j[top]] * 3 + kind[top])])
        return ("merge", int(j[b])) if kind[b] == 2 else ("pass", int(kind[b]), int(j[b]))

    def work_left(self, ws):
        self._refresh(ws)
        return bool(ws.cand.any())

    def reactive_unit(self, ws, cfg, c, out, phase):
        task = self._best(ws)
        if task is None:
            return False
        if task[0] == "pass":
            self._pass(ws, cfg, c, out, task[1], task[2], phase)
        else:
            self._merge(ws, cfg, c, out, task[1], phase)
        return True

    def _merge(self, ws, cfg, c, out, j: int, phase: str | None) -> None:
        """HMJ's merge; the bucket's tasks change."""
        super()._merge(ws, cfg, c, out, j, phase)
        ws.dirty.add(j)

    def _pass(self, ws, cfg, c, out, i: int, j: int, phase: str | None) -> None:
        """Bucket ``j`` of relation ``i`` on disk against the other relation's bucket in
        memory (XJoin's second stage): the pairs not produced yet."""
        disk = self._read_many(ws, i, [ids[i] for ids in ws.segments[j]])
        disk = disk[np.argsort(disk["key"], kind="stable")]
        keys, tids, ats = ws.order[1 - i][j]
        mk = np.fromiter(keys, float, len(keys))
        mt = np.fromiter(tids, np.int64, len(tids))
        ma = np.fromiter(ats, np.int64, len(ats))
        ml = np.where(ma <= ws.last_pass[i, j], ws.last_pass[i, j], -1)
        c["probes"] += len(disk)
        if cfg.want_pairs or cfg.pairs_dir:
            lo = np.searchsorted(disk["key"], mk, "left")
            hi = np.searchsorted(disk["key"], mk, "right")
            pm, pd_ = expand(lo, hi)
            d = disk["dts"][pd_]
            keep = (d > ml[pm]) & (d < ma[pm])
            pm, pd_ = pm[keep], pd_[keep]
            if len(pm):
                mine, theirs = mt[pm], disk["tid"][pd_]
                out.add(len(pm), *((theirs, mine) if i == 0 else (mine, theirs)), phase=phase)
        else:
            never = np.full(len(mk), ws.events + 1, np.int64)  # still in memory
            n = pairs_not_produced(mk, ma, never, ml, disk["key"], disk["ats"], disk["dts"],
                                   disk["last"])
            if n:
                out.add(n, phase=phase)
        ws.last_pass[i, j] = ws.events
        ws.stats["passes"] += 1
        ws.dirty.add(j)
