"""A windowed nested-loop join of no paper: the worked example of an operator that is one
module (README, Extending). One site; every new tuple is compared with every stored tuple of
the other input (equality, or a band with ``band=``), the pairs within the event-time window
are produced by their later tuple, and state older than the window expires. Its program counts
the comparisons in a counter of its own, ``comparisons`` (0 on every tick it did not compare).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from joins.online.controller import Static
from joins.online.kernel import EMPTY_F, EMPTY_I
from joins.online.layouts import OneSiteLayout
from joins.online.operator_spec import Operator, Param, Run
from joins.online.programs.base import Program, WorkerBase


@dataclass
class Stored:
    """One input's stored tuples, in arrival order."""

    key: np.ndarray = field(default_factory=lambda: EMPTY_F)
    tid: np.ndarray = field(default_factory=lambda: EMPTY_I)
    seq: np.ndarray = field(default_factory=lambda: EMPTY_I)
    ts: np.ndarray | None = None

    def append(self, key, tid, seq, ts) -> None:
        self.key, self.tid = np.concatenate([self.key, key]), np.concatenate([self.tid, tid])
        self.seq = np.concatenate([self.seq, seq])
        self.ts = None if ts is None else ts if self.ts is None else np.concatenate([self.ts, ts])

    def keep(self, mask: np.ndarray) -> None:
        self.key, self.tid, self.seq = self.key[mask], self.tid[mask], self.seq[mask]
        self.ts = None if self.ts is None else self.ts[mask]


@dataclass
class NestedLoopState(WorkerBase):
    sides: tuple[Stored, Stored] = field(default_factory=lambda: (Stored(), Stored()))


class NestedLoop(Program):
    """Two inputs, one site, no index: the simplest correct program, and the slowest."""

    name = "nested_loop"
    moves = ()  # one site: state never moves
    counters = ("comparisons",)

    def __init__(self, cells: int = 1_000_000) -> None:
        if cells < 1:
            raise ValueError(f"cells must be >= 1, got {cells}")
        self.cells = cells

    def new_worker(self, wid: int) -> NestedLoopState:
        return NestedLoopState(wid)

    def deliver(self, ws, d, ctx, c, out) -> None:
        cfg = ctx.config
        band = getattr(cfg.kernel, "width", 0.0) if cfg.kernel.name == "band" else None
        if cfg.kernel.name not in ("equi", "band"):
            raise ValueError("nested_loop compares keys by equality or a band only")
        new = []
        for i in (0, 1):
            m = d.rel == i
            side = ws.sides[i]
            new.append(np.arange(len(side.key), len(side.key) + int(m.sum())))
            side.append(d.key[m], d.tid[m], d.seq[m], None if d.ts is None else d.ts[m])
        for i, rows in enumerate(new):
            mine, other = ws.sides[i], ws.sides[1 - i]
            block = max(1, self.cells // max(1, len(other.key)))  # rows compared at once
            for lo in range(0, len(rows), block):
                part = rows[lo:lo + block]
                diff = mine.key[part][:, None] - other.key[None, :]
                hit = diff == 0 if band is None else np.abs(diff) <= band  # NaN: never
                hit &= other.seq[None, :] < mine.seq[part][:, None]  # the later tuple emits
                if cfg.window is not None and mine.ts is not None:
                    hit &= other.ts[None, :] >= mine.ts[part][:, None] - cfg.window
                c["comparisons"] += diff.size
                c["probes"] += len(part)
                a, b = np.nonzero(hit)
                tids = (mine.tid[part][a], other.tid[b])
                out.add(len(a), *(tids if i == 0 else tids[::-1]))

    def end_tick(self, ws, ctx, c) -> bool:
        cfg = ctx.config
        if cfg.window is not None and np.isfinite(ctx.watermark):
            for side in ws.sides:
                if side.ts is not None:
                    old = side.ts < ctx.watermark - cfg.window
                    c["expired"] += int(old.sum())
                    side.keep(~old)
        return cfg.budget_tuples is not None and sum(self.stored(ws)) > cfg.budget_tuples

    def stored(self, ws) -> tuple[int, int]:
        return len(ws.sides[0].key), len(ws.sides[1].key)

    def outbox_sizes(self, ws) -> dict:
        return {}


def _nested_loop(run: Run, *, cells: int) -> Static:
    if run.joiners != 1:
        raise ValueError("nested_loop runs on one site: joiners=1")
    return Static(OneSiteLayout(), program=NestedLoop, program_params={"cells": cells})


nested_loop = Operator(
    "nested_loop", None,
    "Windowed nested-loop join: one site, every new tuple compared with every stored tuple "
    "of the other input (equality or band), its own comparisons counter", _nested_loop,
    params={"cells": Param(1_000_000, "comparisons computed at once (new tuples x stored "
                                      "ones; about 10 bytes of memory each)")})
