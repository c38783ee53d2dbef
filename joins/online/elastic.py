"""BiStream's two-phase scaling (2PS, Lin et al., SIGMOD 2015, §5) of a windowed join-biclique.

Requesting phase: every ``check_every`` (event time) the manager reads each side's units' MLV
(stored tuples x their bytes) and computes tau = sum MLV / (k C) over the side's k units:
above ``t_high`` the side is overloaded, below ``t_low`` underloaded. A decision is confirmed
when it is the same ``confirmations`` checks in a row (the false-positive guard); the side then
gets Delta = (tau / psi - 1) k units (Eq. 7; the paper does not round it: up for a scale-out,
down for a scale-in, written so), at least one unit staying.

The first check comes ``warmup`` after the start (a window join's memory grows for one
window before it can be judged: the kind passes window + P).

Scaling phase, windowed join (the paper's Fig 12): no migration. New units take their share of
new tuples at once (random routing spreads the stores over every unit of the side, the
paper's "controls the storage distribution of the new incoming tuples" read as uniform
placement); units that leave stop storing, keep being probed until their window has expired,
and are released once empty (:meth:`BicliqueLayout.drain`). A full-history join would need its
state migrated to rebalance; that is not built (refused).

Each side of random routing is one subgroup; with ContRand each subgroup would be scaled on its
own (not built: ContRand layouts do not resize).
"""

from __future__ import annotations

import math

import numpy as np

from joins.online.controller import Decision, Static
from joins.online.layouts import BicliqueLayout


class TwoPhaseScaling(Static):
    def __init__(self, layout: BicliqueLayout, *, capacity: float,
                 tuple_bytes: tuple[float, float], t_high: float = 0.8, t_low: float = 0.3,
                 psi: float = 0.6, check_every: float = 60.0, confirmations: int = 3,
                 warmup: float = 0.0) -> None:
        super().__init__(layout)
        if type(layout) is not BicliqueLayout:
            raise ValueError("2PS scales a join-biclique with random routing")
        if not 0 < t_low < psi < t_high:
            raise ValueError(f"2PS needs 0 < t_low < psi < t_high, got {t_low}, {psi}, "
                             f"{t_high}")
        if capacity <= 0 or check_every <= 0 or confirmations < 1:
            raise ValueError("2PS needs capacity > 0, check_every > 0, confirmations >= 1")
        self.capacity, self.tuple_bytes = float(capacity), tuple(float(b) for b in tuple_bytes)
        self.t_high, self.t_low, self.psi = t_high, t_low, psi
        self.check_every, self.confirmations = check_every, confirmations
        self.warmup = warmup  # event time before the first check (a window still filling)
        self.next_check: float | None = None
        self.last = {True: 0, False: 0}  # the last decision per side (+1, -1, 0)
        self.streak = {True: 0, False: 0}

    def tau(self, metrics, is_r: bool) -> float:
        """The side's load: its active units' MLV over their capacity."""
        units = self.layout.side(is_r)
        rows = metrics[metrics["worker"].isin(units)].groupby("worker").last()
        mlv = sum(rows.get(f"stored@{k}", 0) * b for k, b in enumerate(self.tuple_bytes))
        return float(np.sum(mlv)) / (len(units) * self.capacity)

    def after_batch(self, metrics, seq_next):
        if metrics.empty or "t1" not in metrics or not np.isfinite(metrics["t1"].max()):
            return None
        now = float(metrics["t1"].max())
        if self.next_check is None:
            self.next_check = now + max(self.check_every, self.warmup)
        if now < self.next_check:
            return None
        while self.next_check <= now:  # the next check time after this one
            self.next_check += self.check_every
        sizes = {True: self.layout.a, False: self.layout.b}
        info: dict = {}
        for side in (True, False):
            tau = self.tau(metrics, side)
            want = 1 if tau > self.t_high else -1 if tau < self.t_low else 0
            self.streak[side] = self.streak[side] + 1 if want and want == self.last[side] \
                else (1 if want else 0)
            self.last[side] = want
            if want and self.streak[side] >= self.confirmations:
                k = sizes[side]
                delta = (tau / self.psi - 1) * k
                step = math.ceil(delta)  # up for a scale-out, |Delta| down for a scale-in
                sizes[side] = max(1, k + step)
                self.streak[side], self.last[side] = 0, 0
                info[f"tau_{'r' if side else 's'}"] = round(tau, 4)
        if sizes[True] == self.layout.a and sizes[False] == self.layout.b:
            return None
        info.update(scaled=True, units_r=sizes[True], units_s=sizes[False],
                    delta=sizes[True] + sizes[False] - self.layout.a - self.layout.b)
        self.layout = self.layout.drain(sizes[True], sizes[False])
        return Decision(seq_next, info, self.layout)
