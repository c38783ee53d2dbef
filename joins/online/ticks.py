"""The engine's time: the ticks a run is cut into and how a step's operations meet them.

Micro-batches are cut by tuple count (``batch_size``) or by event-time ticks (``tick``; empty
ticks included, so a per-tick series has every tick). A step holds one or more ticks; each
tick ends with a :class:`TickEnd` placed right after its last tuple's delivery.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from joins.online.source import Stream
from joins.online.worker import Migrate, TickEnd


@dataclass
class Tick:
    index: int  # the event-time tick, -1 for a count-cut micro-batch
    a: int  # tuples [a, b)
    b: int
    t0: float = float("nan")
    t1: float = float("nan")
    cut: int = -1  # a count-cut micro-batch's number (its rows' ``batch``)

    @property
    def number(self) -> int:
        """The micro-batch number its rows report: the tick, or the count-cut batch."""
        return self.cut if self.index < 0 else self.index


class Ticks:
    """The run's ticks: count-cut (one per step, cut by the engine) or event-time ticks of
    width ``tick`` from the first tuple's time, empty ones included."""

    def __init__(self, stream: Stream, tick: float | None) -> None:
        self.tick = tick
        self.bounds = None
        if tick is not None:
            if stream.time is None:
                raise ValueError("tick= needs an event-time column (time=)")
            if not tick > 0:
                raise ValueError(f"tick must be > 0, got {tick}")
            if len(stream):
                t = stream.time
                self.origin = float(t[0])
                idx = np.floor((t - self.origin) / tick).astype(np.int64)
                count = int(idx[-1]) + 1
                self.bounds = np.searchsorted(idx, np.arange(count + 1))
            else:
                self.origin, self.bounds = 0.0, np.zeros(1, np.int64)

    @property
    def count(self) -> int:
        """Event-time ticks of the stream (0 for count-cut micro-batches)."""
        return 0 if self.bounds is None else len(self.bounds) - 1

    def get(self, k: int) -> Tick:
        t0 = self.origin + k * self.tick
        return Tick(k, int(self.bounds[k]), int(self.bounds[k + 1]), t0, t0 + self.tick)


def tick_end(stream: Stream, t: Tick) -> TickEnd:
    """A tick's end; the watermark is the event time of its last tuple (arrivals are in time
    order, so no later tuple is earlier)."""
    idx = t.number
    wm = float(stream.time[t.b - 1]) if stream.time is not None and t.b > 0 else float("-inf")
    t0, t1 = t.t0, t.t1
    if t.index < 0 and stream.time is not None and t.b > t.a:  # count-cut: its tuples' range
        t0, t1 = float(stream.time[t.a]), float(stream.time[t.b - 1])
    return TickEnd(idx, t.b - 1, wm, t0, t1)


def interleave(ops: list, ticks: list[Tick], stream: Stream, mark) -> list:
    """Cut the step's segments at tick ends and put each tick's TickEnd where it ends."""
    out: list = []
    pending = list(ticks)

    def flush(upto: int) -> None:
        while pending and pending[0].b <= upto:
            out.append(mark(pending.pop(0)))

    for op in ops:
        if isinstance(op, tuple):
            s0, s1 = op[0], op[1]
            flush(s0)
            while pending and s0 < pending[0].b <= s1:
                b = pending[0].b
                out.append((s0, b, *op[2:]))
                flush(b)
                s0 = b
            if s0 < s1:
                out.append((s0, s1, *op[2:]))
        else:
            if isinstance(op, Migrate):
                flush(op.start)
            out.append(op)
    flush(np.iinfo(np.int64).max)
    return out
