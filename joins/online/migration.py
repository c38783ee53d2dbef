"""Migration planning on the driver: exact tuple counts of every (sender, receiver) transfer.

The executors decide *which* tuples to send from their own state (worker._begin_migration);
the driver computes the *same* sets' sizes from the tuples it routed (relation, key, u), with
the same layout functions, so it can schedule the transfer rate without seeing state. At the
end each outbox must be empty and the totals must agree (checked, not assumed).

Locality (catalogue 2.8): a receiver d needs the tuples it stores under the new layout and did
not store under the old one; it gets each from the old holder ``old.source(t, near=d)``. For
grid steps (n,m) -> (n/2,2m) this is the paper's pairwise exchange: partners swap R, nobody
sends S, each worker sends |R|/n tuples.
"""

from __future__ import annotations

import numpy as np

from joins.online.layouts import Layout


def plan(old: Layout, new: Layout, is_r: np.ndarray, key: np.ndarray, u: np.ndarray
         ) -> dict[tuple[int, int], list[int]]:
    """{(sender, receiver): [R tuples, S tuples]} for all stored tuples (given by arrays)."""
    out: dict[tuple[int, int], list[int]] = {}
    for rel, side in ((True, 0), (False, 1)):
        mask = is_r if rel else ~is_r
        k, uu = key[mask], u[mask]
        if not len(k):
            continue
        for dest in new.workers:
            dest = int(dest)
            need = new.holds(rel, k, uu, dest)
            if old.is_active(dest):
                need &= ~old.holds(rel, k, uu, dest)
            if not need.any():
                continue
            src = old.source(rel, k[need], uu[need], new.origin(dest))
            for s, c in zip(*np.unique(src, return_counts=True), strict=True):
                if int(s) == dest:
                    continue
                out.setdefault((int(s), dest), [0, 0])[side] += int(c)
    return out


class Transfer:
    """A running move: what is left to send, released at a rate per receiver.

    The executors own the truth: after every step they report what is left in their outboxes
    (:meth:`sync`), which may be less than planned (tuples expired or were evicted meanwhile).
    ``remaining=None``: nothing is planned on the driver (the executors' first report says).
    ``mode``: the layout's move mode; ``drain``: send everything in one step (boundary moves).
    """

    def __init__(self, remaining: dict[tuple[int, int], list[int]] | None,
                 mode: str = "rejoin") -> None:
        self.known = remaining is not None
        self.remaining = {k: list(v) for k, v in (remaining or {}).items() if sum(v)}
        self.total = sum(sum(v) for v in self.remaining.values())
        self.mode = mode
        self.sent = 0

    def sync(self, outboxes: dict[tuple[int, int], tuple[int, ...]], sent: int) -> None:
        """The executors' outboxes after a step (the truth) and the tuples sent in it."""
        self.remaining = {k: list(v) for k, v in outboxes.items() if sum(v)}
        self.known = True
        self.sent += sent

    @property
    def done(self) -> bool:
        return not self.remaining

    def release(self, capacity: dict[int, float] | None) -> dict[tuple[int, int], tuple[int, int]]:
        """Quotas for one micro-batch: each receiver takes up to ``capacity[dest]`` tuples
        (R before S, senders in id order); None releases everything (drain)."""
        quotas: dict[tuple[int, int], tuple[int, int]] = {}
        if not self.known:
            return quotas  # the executors have not reported their outboxes yet
        left = dict(capacity) if capacity is not None else None
        for (src, dest), rem in sorted(self.remaining.items()):
            take = [0] * len(rem)
            for i in range(len(rem)):
                room = rem[i] if left is None else min(rem[i], int(left.get(dest, 0)))
                take[i] = room
                rem[i] -= room
                if left is not None:
                    left[dest] = left.get(dest, 0) - room
            if sum(take):
                quotas[(src, dest)] = tuple(take)
        self.remaining = {k: v for k, v in self.remaining.items() if sum(v)}
        return quotas
