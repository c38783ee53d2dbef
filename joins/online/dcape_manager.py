"""D-CAPE's distribution manager (catalogue 003 sections 2.5-2.7): global adaptation decisions
from the machines' statistics, one per statistics tick at most.

* Relocation (section 5.1): when the least used machine's memory M_l is below ``theta_d`` of
  the most used machine's M_m, move (M_m - M_l)/2 of state from the most to the least used
  machine in whole partition groups, the most productive first (smallest P_s/P_o, section 6),
  never a group with state on disk, taking each next group that still fits. At least
  ``min_span`` of event time between two adaptations, one at a time (the engine starts no
  decision while a move is in flight).
* Active-disk (section 6): when memory is balanced (no relocation due) but the machines'
  average output rates (results of the last tick / groups held) differ by more than
  ``theta_f`` (Max_Rate/Min_Rate), the slowest machine is ordered to push ``push_percent`` of
  its state (its least productive groups), the pushes ordered in total capped at M_q - M_c:
  the query's memory (every arrival is state in a join without windows: all tuples) minus the
  cluster's (machines x budget). The paper's text orders pushes whenever rates differ (the
  default); ``active_from`` > 0 is the other reading, pushes only once the most used machine
  holds that share of its budget (memory pressure).

The statistics the machines report (memory, outputs, the groups a move may take) are exact
per tick. The 8-step protocol's latency is modeled (``modeled_seconds`` of each decision):
8 control messages of ``msg_seconds`` plus the moved bytes over ``bandwidth``; the engine moves
the state at the tick boundary, so its outputs are not delayed by it (the paper's buffered
tuples are those of the moving groups that arrive within that latency, processed once after
the move).
"""

from __future__ import annotations

import numpy as np

from joins.online.controller import Decision, Static
from joins.online.layouts import HashLayout

RELOCATING = ("relocate", "lazy_disk", "active_disk")


class DCapeManager(Static):
    def __init__(self, layout: HashLayout, program_params: dict, *, adapt: str,
                 theta_d: float, min_span: float, theta_f: float, push_percent: float,
                 total_tuples: int, msg_seconds: float, bandwidth: float,
                 tuple_bytes: float, active_from: float = 0.0) -> None:
        super().__init__(layout, program="dcape", program_params=program_params)
        self.adapt, self.theta_d, self.min_span, self.theta_f = adapt, theta_d, min_span, theta_f
        self.share = push_percent / 100.0
        self.total_tuples = total_tuples
        self.msg_seconds, self.bandwidth, self.tuple_bytes = msg_seconds, bandwidth, tuple_bytes
        self.active_from = active_from
        self.last = -np.inf  # event time of the last adaptation
        self.forced = 0.0  # tuples ordered to disk so far (active-disk)
        # the last step's statistics: (layout, workers, memory, push threshold or None)
        self._seen: tuple | None = None
        self._routed_memo: tuple | None = None  # (slice start, length, per-machine counts)

    def quiet_through(self, t1: float, arrived: np.ndarray | None = None) -> bool:
        if t1 - self.last < self.min_span:  # after_batch's own first test
            return True
        return arrived is not None and self._balanced_with(arrived)

    def _balanced_with(self, arrived: np.ndarray) -> bool:
        """No relocation can be due after ``arrived`` (keys routed since the last statistics):
        memory then only grows, by the arrivals routed to each machine, as long as none can
        pass its push threshold, so M_l is at least the last M_l and M_m at most the last
        plus what was routed: M_l/M_m stays >= theta_d if that bound does. Not for
        active-disk, whose forced pushes follow output rates."""
        seen = self._seen
        if self.adapt == "active_disk" or seen is None or seen[0] is not self.layout:
            return False
        _, workers, mem, limit = seen
        high = mem + self._routed(arrived, max(workers) + 1)[workers]
        if limit is not None and (high > limit).any():
            return False
        return high.max() <= 0 or mem.min() / high.max() >= self.theta_d

    def _routed(self, arrived: np.ndarray, size: int) -> np.ndarray:
        """Tuples of ``arrived`` routed to each machine. Within a step the engine asks about
        growing prefixes of one slice of the stream (the keys since the statistics, one tick
        more each time): only the new tail is counted, not the whole prefix again."""
        start = arrived.__array_interface__["data"][0]
        memo = self._routed_memo
        if memo is not None and memo[0] == start and memo[1] <= len(arrived) and \
                len(memo[2]) == size:
            done, counts = memo[1], memo[2]
        else:
            done, counts = 0, np.zeros(size, np.int64)
        owner = self.layout.owner[self.layout.group(arrived[done:])]
        counts = counts + np.bincount(owner, minlength=size)
        self._routed_memo = (start, len(arrived), counts)
        return counts

    def after_batch(self, metrics, seq_next):
        self._seen = None
        self._routed_memo = None
        if metrics.empty:
            return None
        now = float(metrics["t1"].max())
        # each worker's last tick (a worker's rows come in tick order); what groupby().last()
        # gives, without aggregating every column (a tenth of a step's time)
        m = metrics.drop_duplicates("worker", keep="last").set_index("worker")
        workers = [int(w) for w in self.layout.workers if int(w) in m.index]
        if len(workers) < 2:
            return None
        stored = [c for c in m.columns if c.startswith("stored@")]
        mem = m.loc[workers, stored].sum(axis=1).to_numpy(np.float64)
        budget = float(m["budget"].max()) if "budget" in m.columns else -1.0
        spills = budget >= 0 and self.adapt != "relocate"
        limit = self.program_params.get("theta_m", 1.0) * budget if spills else None
        self._seen = (self.layout, workers, mem, limit)
        if self.quiet_through(now):
            return None
        hi, lo = int(np.argmax(mem)), int(np.argmin(mem))
        if mem[hi] > 0 and mem[lo] / mem[hi] < self.theta_d:
            return self._relocate(m, workers[hi], workers[lo], (mem[hi] - mem[lo]) / 2,
                                  seq_next, now)
        if self.adapt == "active_disk":
            return self._force_push(m, workers, mem, seq_next, now)
        return None

    def _relocate(self, m, src: int, dest: int, goal: float, seq_next: int, now: float):
        groups, sizes = m.at[src, "_movable"]
        chosen, moved = [], 0
        for g, size in zip(groups, sizes, strict=True):
            if self.layout.owner[g] == src and moved + size <= goal:
                chosen.append(int(g))
                moved += int(size)
        if not chosen:
            return None
        self.last = now
        self.layout = self.layout.relocate(np.array(chosen), dest)
        seconds = 8 * self.msg_seconds + moved * self.tuple_bytes / self.bandwidth
        return Decision(seq_next, dict(action="relocate", src=src, dest=dest,
                                       groups=len(chosen), tuples=moved, time=now,
                                       modeled_seconds=seconds), self.layout)

    def _force_push(self, m, workers: list[int], mem: np.ndarray, seq_next: int, now: float):
        held = np.bincount(self.layout.owner, minlength=max(workers) + 1)[workers]
        rate = m.loc[workers, "outputs"].to_numpy(np.float64) / np.maximum(held, 1)
        if rate.max() <= 0:
            return None
        slow = int(np.argmin(rate))
        if rate[slow] > 0 and rate.max() / rate[slow] <= self.theta_f:
            return None
        budget = m["budget"].max()
        if mem.max() < self.active_from * budget:  # the other reading: only under pressure
            return None
        room = self.total_tuples - len(workers) * budget - self.forced  # M_q - M_c - done
        if not budget > 0 or room <= 0 or mem[slow] <= 0:
            return None
        share = min(self.share, room / mem[slow])
        self.forced += share * mem[slow]
        self.last = now
        w = workers[slow]
        self.layout = self.layout.ordering({w: share})
        return Decision(seq_next, dict(action="forced_push", src=w, share=float(share),
                                       tuples=int(share * mem[slow]), time=now,
                                       rate_ratio=float(rate.max() / max(rate[slow], 1e-300))),
                        self.layout)
