"""BiStream's two-phase scaling (2PS, Lin et al., SIGMOD 2015, §5) of a join-biclique.

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
and are released once empty (:meth:`BicliqueLayout.drain`).

Scaling phase, full-history join: the state migrates to rebalance (the paper's §5.2). Every
unit of the resized side keeps the tuples the new layout places on it and hands the others
over (:meth:`BicliqueLayout.resize` with ``rebalance``; the engine's handoff keeps a moving
tuple probed at its sender until its receiver holds it), so the side is even again; units that
leave hand over everything.

Each side of random routing is one subgroup; with ContRand every subgroup is checked and
scaled on its own (tau, the confirmations and Delta per subgroup, k its units; the paper's
"per subgroup"), its keys staying in it (:meth:`ContRandLayout.regroup`).

``scope``: which units k of Eq. 7 counts. ``subgroup`` (the default, the reading above: §3.3
defines subgroups inside one relation, "G_R is logically divided into d disjoint subgroups",
and d = e = 1 is "only one group in each relation"). ``cluster``, the other reading of
Fig 12's "the MLV" (one number for the system): one tau over every storing unit of both
sides, one counter, one Delta over all k units, whose units are then placed one at a time:
a new unit to the subgroup with the highest MLV per unit, a removed one from the subgroup
whose MLV per unit stays lowest without it (each subgroup keeps one unit); the paper does not
say where a cluster-wide Delta goes, this spreads the load as evenly as whole units can.
"""

from __future__ import annotations

import math

import numpy as np

from joins.online.controller import Decision, Static
from joins.online.layouts import BicliqueLayout, ContRandLayout

SCOPES = ("subgroup", "cluster")


def place(delta: int, mlv: list[float], k: list[int]) -> list[int]:
    """A cluster-wide Delta over subgroups of ``k`` units holding ``mlv``: each new unit goes
    to the subgroup with the highest MLV per unit, each removed one comes from the subgroup
    whose MLV per unit stays lowest without it (every subgroup keeps one unit); ties go to
    the first subgroup. The new sizes."""
    k = list(k)
    for _ in range(abs(delta)):
        if delta > 0:
            g = max(range(len(k)), key=lambda i: (mlv[i] / k[i], -i))
            k[g] += 1
        else:
            can = [i for i in range(len(k)) if k[i] > 1]
            if not can:
                break
            g = min(can, key=lambda i: (mlv[i] / (k[i] - 1), i))
            k[g] -= 1
    return k


class TwoPhaseScaling(Static):
    def __init__(self, layout: BicliqueLayout, *, capacity: float,
                 tuple_bytes: tuple[float, float], t_high: float = 0.8, t_low: float = 0.3,
                 psi: float = 0.6, check_every: float = 60.0, confirmations: int = 3,
                 warmup: float = 0.0, migrate: bool = False,
                 scope: str = "subgroup") -> None:
        super().__init__(layout)
        if scope not in SCOPES:
            raise ValueError(f"2PS scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        if not isinstance(layout, BicliqueLayout):
            raise ValueError("2PS scales a join-biclique")
        if not 0 < t_low < psi < t_high:
            raise ValueError(f"2PS needs 0 < t_low < psi < t_high, got {t_low}, {psi}, "
                             f"{t_high}")
        if capacity <= 0 or check_every <= 0 or confirmations < 1:
            raise ValueError("2PS needs capacity > 0, check_every > 0, confirmations >= 1")
        self.capacity, self.tuple_bytes = float(capacity), tuple(float(b) for b in tuple_bytes)
        self.t_high, self.t_low, self.psi = t_high, t_low, psi
        self.check_every, self.confirmations = check_every, confirmations
        self.warmup = warmup  # event time before the first check (a window still filling)
        self.migrate = migrate  # full history: rebalance by moving state, not by draining
        self.scope = scope  # k of Eq. 7: a subgroup's units, or the cluster's
        self.next_check: float | None = None
        self.last: dict = {}  # the last decision per subgroup (side, g), or "cluster"
        self.streak: dict = {}

    def adopt(self, layout: BicliqueLayout) -> None:
        """The engine released drained units: the next decision builds on that layout."""
        self.layout = layout

    def subgroups(self, is_r: bool) -> list[np.ndarray]:
        """The storing units of each subgroup of a side (random routing: the side, one)."""
        if isinstance(self.layout, ContRandLayout):
            return self.layout.groups(is_r)
        return [self.layout.side(is_r)]

    def mlv(self, metrics, units: np.ndarray) -> float:
        """The summed MLV of ``units``."""
        rows = metrics[metrics["worker"].isin(units)].groupby("worker").last()
        mlv = sum(rows.get(f"stored@{k}", 0) * b for k, b in enumerate(self.tuple_bytes))
        return float(np.sum(mlv))

    def tau(self, metrics, units: np.ndarray) -> float:
        """A subgroup's load: its units' MLV over their capacity."""
        return self.mlv(metrics, units) / (len(units) * self.capacity)

    def decide(self, key, tau: float, k: int) -> int | None:
        """One load check of ``k`` units at ``tau`` (the counter kept under ``key``): the new
        unit count once a decision is confirmed, else None."""
        want = 1 if tau > self.t_high else -1 if tau < self.t_low else 0
        last = self.last.get(key, 0)
        self.streak[key] = self.streak.get(key, 0) + 1 if want and want == last \
            else (1 if want else 0)
        self.last[key] = want
        if not (want and self.streak[key] >= self.confirmations):
            return None
        step = math.ceil((tau / self.psi - 1) * k)  # Eq. 7, up; |Delta| down
        self.streak[key], self.last[key] = 0, 0
        return max(1, k + step)

    def subgroup_sizes(self, metrics, info: dict) -> dict[bool, list[int]]:
        """``scope=subgroup``: every subgroup checked, confirmed and resized on its own."""
        sizes: dict[bool, list[int]] = {}
        for side in (True, False):
            sizes[side] = []
            for g, units in enumerate(self.subgroups(side)):
                tau = self.tau(metrics, units)
                k = self.decide((side, g), tau, len(units))
                if k is not None:
                    info[f"tau_{'r' if side else 's'}{g}"] = round(tau, 4)
                sizes[side].append(len(units) if k is None else k)
        return sizes

    def cluster_sizes(self, metrics, info: dict) -> dict[bool, list[int]]:
        """``scope=cluster``: one tau and one Delta over every storing unit, placed over the
        subgroups by :func:`place`."""
        groups = [(side, units) for side in (True, False) for units in self.subgroups(side)]
        mlv = [self.mlv(metrics, units) for _, units in groups]
        k = [len(units) for _, units in groups]
        tau = sum(mlv) / (sum(k) * self.capacity)
        total = self.decide("cluster", tau, sum(k))
        new = k if total is None else place(total - sum(k), mlv, k)
        if total is not None:
            info["tau_all"] = round(tau, 4)
        sizes: dict[bool, list[int]] = {True: [], False: []}
        for (side, _), n in zip(groups, new, strict=True):
            sizes[side].append(n)
        return sizes

    def quiet_through(self, t1: float, arrived=None) -> bool:
        return self.next_check is not None and t1 < self.next_check  # no check due

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
        info: dict = {}
        sizes = self.cluster_sizes(metrics, info) if self.scope == "cluster" \
            else self.subgroup_sizes(metrics, info)
        before = {side: [len(u) for u in self.subgroups(side)] for side in (True, False)}
        if sizes == before:
            return None
        change = [a - b for side in (True, False)
                  for a, b in zip(sizes[side], before[side], strict=True)]
        info.update(scaled=True, units_r=sum(sizes[True]), units_s=sum(sizes[False]),
                    delta=sum(change), delta_out=sum(d for d in change if d > 0),
                    delta_in=sum(d for d in change if d < 0))
        if isinstance(self.layout, ContRandLayout):
            self.layout = self.layout.regroup(sizes[True], sizes[False],
                                              drain=not self.migrate, rebalance=self.migrate)
        elif self.migrate:
            self.layout = self.layout.resize(sum(sizes[True]), sum(sizes[False]),
                                             rebalance=True)
        else:
            self.layout = self.layout.drain(sum(sizes[True]), sum(sizes[False]))
        return Decision(seq_next, info, self.layout)
