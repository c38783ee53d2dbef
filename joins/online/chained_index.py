"""BiStream's chained in-memory index (Lin et al., SIGMOD 2015, §3.3 and Fig 5), as the
bookkeeping over one unit's stored tuples of one relation.

The stored tuples are cut, in arrival order, into subindexes: the active one takes inserts and
is archived once its newest tuple is more than the archive period P after its oldest (the
tuple that crosses P stays in the one archived). A whole archived subindex is discarded when a
tuple of the other relation arrives more than ϖ + D after the subindex's newest tuple
(Theorem 1: no later partner can reach it); tuples are never compared one by one for expiry,
so memory follows the paper's sawtooth, dropping about P worth of tuples at a time.

A subindex is a range of arrival numbers (the engine's ``seq``: a tuple moved between units
keeps its number and falls in the subindex of its arrival). The join's window condition
|r.ts - s.ts| <= ϖ is still applied to every candidate pair by the probe (the paper skips it
for a subindex wholly inside the window: a saving of time, not of results).
"""

from __future__ import annotations

import numpy as np


class Chain:
    """The subindexes of one side at one unit: the newest arrival number and event time of
    each archived subindex, and the active subindex's oldest event time."""

    __slots__ = ("last_seq", "max_ts", "active_min", "active_max", "upto")

    def __init__(self) -> None:
        self.last_seq: list[int] = []  # per archived subindex, oldest first
        self.max_ts: list[float] = []
        self.active_min = np.nan  # the active subindex's oldest event time (NaN: empty)
        self.active_max = np.nan  # and its newest
        self.upto = -1  # the newest arrival number indexed so far

    def __len__(self) -> int:
        """Subindexes held, the active one included when it has tuples."""
        return len(self.last_seq) + (0 if np.isnan(self.active_min) else 1)

    def extend(self, seq: np.ndarray, ts: np.ndarray, period: float) -> None:
        """Index new tuples (``seq`` increasing, beyond ``upto``; ``ts`` non-decreasing)."""
        if not len(seq):
            return
        i = 0
        while i < len(seq):
            if np.isnan(self.active_min):
                self.active_min = float(ts[i])
            # the first tuple more than P after the active subindex's oldest crosses P: it
            # stays in the subindex, which is then archived
            j = int(np.searchsorted(ts, self.active_min + period, "right"))
            j = max(j, i)
            if j >= len(seq):
                break
            self.last_seq.append(int(seq[j]))
            self.max_ts.append(float(ts[j]))
            self.active_min = np.nan
            i = j + 1
        if not np.isnan(self.active_min):
            self.active_max = float(ts[-1])
        self.upto = int(seq[-1])

    def expire(self, latest_other: float, horizon: float) -> int:
        """Discard the archived subindexes whose newest tuple is more than ``horizon`` (ϖ + D)
        before ``latest_other`` (the newest tuple of the other relation seen here); returns
        the arrival number up to which tuples are gone (-1: none)."""
        k = int(np.searchsorted(self.max_ts, latest_other - horizon, "left"))
        if k == len(self.max_ts) and not np.isnan(self.active_min) and \
                self.active_max < latest_other - horizon:
            # the active subindex too (a unit that no longer stores: a retiring unit's state
            # expires whole, and the unit can be released)
            self.last_seq, self.max_ts = [], []
            self.active_min = self.active_max = np.nan
            return self.upto
        if k == 0:
            return -1
        cut = self.last_seq[k - 1]
        del self.last_seq[:k], self.max_ts[:k]
        return cut
