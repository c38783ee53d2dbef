"""MJoin (Viglas et al.): an n-way symmetric hash join as a worker program.

Each input's stored tuples are one table (tid, arrival number, routing coordinate, event time,
join attributes) with a key-sorted index per join attribute. A micro-batch's new tuples are
stored first; then each new tuple probes the other inputs' state and every result combination
is produced by its latest tuple only (all its partners arrived earlier), so each result is
produced once whatever the batching. The probe order is greedy: from the inputs already bound,
the next input is the unbound neighbour holding the fewest tuples (the paper orders by
selectivity; the stored count is the estimate this program has), its first edge is probed,
and the remaining edges of a cyclic graph are checked on the complete combination. Windows:
a combination counts only if all its event times lie within the window of the newest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from joins.online.kernel import EMPTY_I, expand
from joins.online.programs.base import Program, WorkerBase


class Rows:
    """Stored tuples of one input at one worker, in arrival order."""

    __slots__ = ("tid", "seq", "u", "ts", "vals")

    def __init__(self, tid=EMPTY_I, seq=EMPTY_I, u=None, ts=None, vals=None, slots: int = 1):
        self.tid = np.asarray(tid, np.int64)
        self.seq = np.asarray(seq, np.int64)
        self.u = np.zeros(0, np.uint32) if u is None else np.asarray(u, np.uint32)
        self.ts = None if ts is None else np.asarray(ts, np.float64)
        self.vals = np.zeros((0, slots)) if vals is None else np.asarray(vals, np.float64)

    def __len__(self) -> int:
        return len(self.tid)

    def select(self, mask) -> Rows:
        return Rows(self.tid[mask], self.seq[mask], self.u[mask],
                    None if self.ts is None else self.ts[mask], self.vals[mask],
                    self.vals.shape[1])

    def append(self, other: Rows) -> Rows:
        if not len(self):
            return other
        ts = None if self.ts is None else np.concatenate([self.ts, other.ts])
        return Rows(np.concatenate([self.tid, other.tid]), np.concatenate([self.seq, other.seq]),
                    np.concatenate([self.u, other.u]), ts,
                    np.concatenate([self.vals, other.vals]), self.vals.shape[1])


@dataclass
class MJoinState(WorkerBase):
    tables: dict[int, Rows] = field(default_factory=dict)
    disk_resident: int = 0
    index: dict = field(default_factory=dict)  # (input, slot) -> (order, sorted keys, nvalid)

    def __getstate__(self) -> dict:
        """The sorted indexes are a cache rebuilt on demand: not carried between micro-batches
        (they were a third of the pickled state, measured by the benchmark)."""
        return {**self.__dict__, "index": {}}


def _slots(cfg, i: int) -> int:
    """How many join attributes input i has (its slots in the edges)."""
    used = [sa for a, sa, _, _ in cfg.edges if a == i] + [sb for _, _, b, sb in cfg.edges
                                                          if b == i]
    return 1 + max(used, default=0)


class MJoin(Program):
    name = "mjoin"
    inputs = None
    edges = True
    moves = ("handoff", "boundary")
    spill_modes = ("charge",)
    counters = ("nway_probes",)  # probes extending a partial combination (n > 2 inputs)

    def new_worker(self, wid):
        return MJoinState(wid)

    def _table(self, ws, cfg, i: int) -> Rows:
        if i not in ws.tables:
            ws.tables[i] = Rows(slots=_slots(cfg, i))
        return ws.tables[i]

    def _set(self, ws, i: int, rows: Rows) -> None:
        ws.tables[i] = rows
        for key in [k for k in ws.index if k[0] == i]:
            del ws.index[key]

    def _index(self, ws, i: int, slot: int):
        key = (i, slot)
        if key not in ws.index:
            v = ws.tables[i].vals[:, slot]
            order = np.argsort(v, kind="stable")  # NaN (null) last
            ws.index[key] = (order, v[order], int(np.count_nonzero(~np.isnan(v))))
        return ws.index[key]

    def deliver(self, ws, d, ctx, c, out):
        cfg = ctx.config
        n_in = cfg.inputs
        fresh: dict[int, np.ndarray] = {}
        for i in np.unique(d.rel):
            i = int(i)
            m = d.rel == i
            slots = _slots(cfg, i)
            vals = d.attrs[m][:, :slots] if d.attrs is not None else d.key[m][:, None]
            rows = Rows(d.tid[m], d.seq[m], d.u[m], None if d.ts is None else d.ts[m], vals,
                        slots)
            old = self._table(ws, cfg, i)
            fresh[i] = np.arange(len(old), len(old) + len(rows))
            self._set(ws, i, old.append(rows))
        for i in range(n_in):
            self._table(ws, cfg, i)
        pairs = cfg.want_pairs or cfg.pairs_dir is not None
        for i, rows_i in fresh.items():
            combo = self._probe_from(ws, cfg, i, rows_i, c)
            if combo is None:
                continue
            count = len(combo[i])
            self._produced(ws, cfg, i, combo)
            if pairs and count:
                out.add(count, *(ws.tables[k].tid[combo[k]] for k in range(n_in)))
            else:
                out.add(count)

    def _produced(self, ws, cfg, i: int, combo: dict[int, np.ndarray]) -> None:
        """Hook: the result combinations (rows per input) new tuples of input i produced."""

    def _probe_from(self, ws, cfg, i: int, rows_i: np.ndarray, c: dict):
        """Every combination whose latest tuple is one of ``rows_i`` (rows of input i)."""
        n_in, edges, kernel, win = cfg.inputs, cfg.edges, cfg.kernel, cfg.window
        anchor_seq = ws.tables[i].seq[rows_i]
        anchor_ts = None if ws.tables[i].ts is None else ws.tables[i].ts[rows_i]
        combo: dict[int, np.ndarray] = {i: rows_i}
        anchor = np.arange(len(rows_i))  # which anchor each partial combination extends
        used = set()
        # the first probe of a new tuple is the two-input joiner's probe (per_probe); each
        # later one extends a partial combination (an n-way probe, measured apart)
        count = "probes"
        while len(combo) < n_in:
            if not len(anchor):
                return None
            cand = [(len(ws.tables[y]), y, e) for e, (a, sa, b, sb) in enumerate(edges)
                    for x, y in ((a, b), (b, a)) if x in combo and y not in combo]
            _, y, e = min(cand)
            a, sa, b, sb = edges[e]
            (x, sx, sy) = (a, sa, sb) if y == b else (b, sb, sa)
            used.add(e)
            order, keys, nvalid = self._index(ws, y, sy)
            probe_keys = ws.tables[x].vals[combo[x], sx]
            lo, hi = kernel.ranges(keys[:nvalid], probe_keys, x < y)
            null = np.isnan(probe_keys)
            lo, hi = np.where(null, 0, lo), np.where(null, 0, hi)
            c[count] += len(probe_keys)
            count = "nway_probes"
            pi, si = expand(lo, hi)
            rows_y = order[si]
            keep = ws.tables[y].seq[rows_y] < anchor_seq[anchor[pi]]
            if win is not None and len(rows_y):
                keep &= ws.tables[y].ts[rows_y] >= anchor_ts[anchor[pi]] - win
            pi, rows_y = pi[keep], rows_y[keep]
            combo = {k: v[pi] for k, v in combo.items()}
            combo[y] = rows_y
            anchor = anchor[pi]
        for e, (a, sa, b, sb) in enumerate(edges):  # edges closing a cycle
            if e in used or not len(anchor):
                continue
            va = ws.tables[a].vals[combo[a], sa]
            vb = ws.tables[b].vals[combo[b], sb]
            width = getattr(kernel, "width", 0.0)
            ok = np.abs(va - vb) <= width if kernel.name == "band" else va == vb
            combo = {k: v[ok] for k, v in combo.items()}
            anchor = anchor[ok]
        return combo

    def receive(self, ws, piece, ctx, c, out):
        if piece.start >= 0:
            raise RuntimeError("mjoin moves state by handoff or at batch boundaries only")
        t = self._table(ws, ctx.config, piece.rel)
        self._set(ws, piece.rel, t.append(piece.tuples))
        return len(piece.tuples)

    def begin_move(self, ws, old, new, start, mode):
        if mode == "rejoin":
            raise RuntimeError("mjoin moves state by handoff or at batch boundaries only")
        for i, t in ws.tables.items():
            if not len(t):
                continue
            _, sends = old.moves(new, i == 0, t.vals[:, 0], t.u, ws.wid)
            for dest, mask in sends:
                box = ws.outbox.setdefault(dest, {})
                box[i] = box[i].append(t.select(mask)) if i in box else t.select(mask)
        ws.handoff = True

    def take(self, ws, dest, rel, k):
        box = ws.outbox.get(dest, {})
        rows = box.get(rel)
        if rows is None or not len(rows):
            return None
        k = min(k, len(rows))
        first = np.arange(len(rows)) < k
        sent, box[rel] = rows.select(first), rows.select(~first)
        t = ws.tables[rel]
        self._set(ws, rel, t.select(~np.isin(t.seq, sent.seq)))
        return sent

    def outbox_sizes(self, ws):
        out = {}
        for dest, box in ws.outbox.items():
            n = 1 + max(box) if box else 0
            sizes = tuple(len(box[i]) if i in box else 0 for i in range(n))
            if sum(sizes):
                out[dest] = sizes
        return out

    def end_tick(self, ws, ctx, c):
        cfg = ctx.config
        if cfg.window is not None and np.isfinite(ctx.watermark):
            cut = ctx.watermark - cfg.window
            for i, t in list(ws.tables.items()):
                if t.ts is None:
                    continue
                old = t.ts < cut
                if old.any():
                    c["expired"] += int(old.sum())
                    self._set(ws, i, t.select(~old))
            for box in ws.outbox.values():
                for i, rows in list(box.items()):
                    if rows.ts is not None:
                        box[i] = rows.select(rows.ts >= cut)
        if cfg.budget_tuples is None:
            return False
        over = max(0, sum(len(t) for t in ws.tables.values()) - cfg.budget_tuples)
        c["spilled"] += max(0, over - ws.disk_resident)
        if over:
            c["disk_probes"] += c["probes"] + c["nway_probes"]
        ws.disk_resident = over
        return over > 0

    def stored(self, ws):
        n = 1 + max(ws.tables) if ws.tables else 0
        return tuple(len(ws.tables[i]) if i in ws.tables else 0 for i in range(n))

    def report(self, ws):
        return dict(pending=0, outbox=sum(len(r) for box in ws.outbox.values()
                                          for r in box.values()))
