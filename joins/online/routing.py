"""The reshufflers' job on the driver, vectorised: a step's segments of tuples routed to the
partitions' workers, and the quota of moving state released for the step."""

from __future__ import annotations

import numpy as np

from joins.online import migration
from joins.online.layouts import Layout
from joins.online.source import Stream
from joins.online.worker import Deliveries


def deliveries(stream: Stream, layout: Layout, s0: int, s1: int, parts: int,
               moving_from: Layout | None = None
               ) -> tuple[list[Deliveries | None], np.ndarray]:
    """Route tuples [s0, s1) by ``layout``: per-partition deliveries and per-worker counts."""
    if moving_from is not None:
        t, w, role = layout.route_moving(moving_from, stream.is_r[s0:s1], stream.key[s0:s1],
                                         stream.u[s0:s1])
    else:
        t, w, role = layout.route(stream.is_r[s0:s1], stream.key[s0:s1], stream.u[s0:s1])
    t = t + s0
    p = w % parts
    order = np.lexsort((t, w, p))
    t, w, role, p = t[order], w[order], role[order], p[order]
    bounds = np.searchsorted(p, np.arange(parts + 1))
    out: list[Deliveries | None] = []
    for i in range(parts):
        sl = slice(bounds[i], bounds[i + 1])
        tt = t[sl]
        out.append(Deliveries(w[sl], stream.rel[tt], stream.key[tt], stream.tid[tt], tt,
                              stream.u[tt], role[sl],
                              None if stream.time is None else stream.time[tt],
                              None if stream.attrs is None else stream.attrs[tt])
                   if len(tt) else None)
    return out, np.bincount(w, minlength=1)


def route(ops: list, stream: Stream, parts: int) -> tuple[list[list], np.ndarray]:
    """Each partition's operations of the step, in order: its deliveries of every segment
    ``(s0, s1, layout, moving_from)``, and every other operation (moves, tick ends, the
    clean-up) as is; with the new deliveries per worker id (the move's rate follows them)."""
    per_part: list[list] = [[] for _ in range(parts)]
    received = np.zeros(0, dtype=np.int64)
    for op in ops:
        if not isinstance(op, tuple):
            for p in range(parts):
                per_part[p].append(op)
            continue
        dl, cnt = deliveries(stream, op[2], op[0], op[1], parts, op[3])
        size = max(len(received), len(cnt))
        received = np.pad(received, (0, size - len(received))) + \
            np.pad(cnt, (0, size - len(cnt)))
        for p in range(parts):
            if dl[p] is not None:
                per_part[p].append(dl[p])
    return per_part, received


def release_quotas(transfer: migration.Transfer, received: np.ndarray, workers: np.ndarray,
                   rate: float, ended: bool) -> dict:
    """The step's quotas of a running move: each worker takes ``rate`` times what it received
    (at least the mean), so the move keeps pace with the stream; all the rest once the
    stream ended."""
    if ended:
        return transfer.release(None)
    mean = received.mean() if len(received) else 0.0
    cap = {int(w): rate * max(received[w] if w < len(received) else 0, mean) for w in workers}
    return transfer.release(cap)
