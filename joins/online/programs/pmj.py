"""Progressive Merge Join (Dittrich, Seeger, Taylor, Widmayer, VLDB 2002), the DINER paper's
baseline for band joins (2.9, Fig 13), as a worker program on HMJ's machinery
(:mod:`joins.online.programs.hmj`: segment pairs, F-way merges across segments).

* **Arriving**: memory holds one partition per relation; an arrival is stored, never probed
  (PMJ is blocking between loads).
* **Memory full** (the tuples and the input buffer would pass the budget): both partitions are
  sorted and joined in memory (results now, phase ``arriving``: while the inputs arrive), then
  written to disk as one sorted run pair.
* **Merging phase** (after the last arrival, the engine's clean-up): the last, partly filled
  load is joined in memory (phase ``cleanup``: the end of the input is not a memory-full
  moment, so these results are not online; a choice the paper leaves open), then the run pairs
  are merged F/2 at a time (F = ``fan_in`` runs, as the paper's "F/2 groups of sorted
  partition pairs") into one; a tuple meets the other relation's tuples of
  different run pairs only (those of its own pair met in memory).
* Band joins (``band=``): every join above matches ``|a - b| <= width``.

No reactive phase (the paper runs PMJ's merging after complete arrival). F is not given for
Fig 13: 10, as HMJ's and RPJ's (a config value).
"""

from __future__ import annotations

import numpy as np

from joins.online.kernel import expand
from joins.online.programs.hmj import HashMerge


class ProgressiveMerge(HashMerge):
    name = "pmj"
    stat_names = ("flushes", "merges", "loads")

    def __init__(self, fan_in: int = 10, tups_per_block: int = 50, wait_thresh: float = 25.0,
                 c_read: float = 0.2, c_write: float = 0.2, c_join: float = 0.05,
                 c_arrive: float = 0.0, seed: int = 0) -> None:
        if fan_in < 4:
            raise ValueError("pmj's fan_in (runs merged at once) must be >= 4: F/2 run pairs")
        # F is the merge's fan-in in runs; a run pair is two runs, so F/2 pairs merge at once
        super().__init__(n_part=1, fan_in=fan_in // 2, tups_per_block=tups_per_block,
                         wait_thresh=wait_thresh, c_read=c_read, c_write=c_write,
                         c_join=c_join, c_arrive=c_arrive, seed=seed)

    def bucket(self, key: float) -> int:
        return 0  # one partition per relation

    def arrive(self, ws, cfg, c, out, rel, key, tid):
        budget = cfg.budget_tuples
        if budget is not None and sum(self.in_memory(ws)) and \
                sum(self.in_memory(ws)) + self.buffered(ws) + 1 > budget:
            self._join_load(ws, cfg, c, out, "arriving")
            self._flush(ws, 0)
        ws.mem[rel].setdefault(0, {}).setdefault(key, []).append(tid)
        ws.count[rel, 0] += 1
        ws.held[rel] += 1

    def work_left(self, ws):
        return False  # merging only after the last arrival

    def _join_load(self, ws, cfg, c, out, phase: str | None) -> None:
        """The two in-memory partitions sorted and joined."""
        sides = []
        for rel in (0, 1):
            held = ws.mem[rel].get(0, {})
            keys = np.array([k for k, tids in held.items() for _ in tids], float)
            tids = np.array([t for ts in held.values() for t in ts], np.int64)
            order = np.argsort(keys, kind="stable")
            sides.append((keys[order], tids[order]))
        (ka, ta), (kb, tb) = sides
        width = float(getattr(cfg.kernel, "width", 0.0) or 0.0)
        c["probes"] += len(ka)
        lo = np.searchsorted(kb, ka - width, "left")
        hi = np.searchsorted(kb, ka + width, "right")
        ws.stats["loads"] += 1
        if cfg.want_pairs or cfg.pairs_dir:
            pa, pb = expand(lo, hi)
            if len(pa):
                out.add(len(pa), ta[pa], tb[pb], phase=phase)
        elif (n := int((hi - lo).sum())):
            out.add(n, phase=phase)

    def finish(self, ws, cfg, c, out):
        if not ws.disk:
            return
        if ws.count[:, 0].sum():
            self._join_load(ws, cfg, c, out, None)  # the last load: in the clean-up
            if ws.segments.get(0):
                self._flush(ws, 0)
        while len(ws.segments.get(0, [])) > 1:
            self._merge(ws, cfg, c, out, 0, None)
