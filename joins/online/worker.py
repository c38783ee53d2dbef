"""Executor side: the joiners' state and one micro-batch step of a Spark partition.

A partition holds several logical workers (joiners), each with its own stored R and S
(:class:`SideStore`), outbox of tuples to migrate and exact counters. One step, in order:

1. receive migrated tuples (mu) sent in the previous step: each joins only the tuples of the
   new epoch stored here (Alg 3 lines 10/17), then is stored;
2. finalise a finished migration (Alg 3 line 22: discarded tuples leave, workers that left the
   layout disappear);
3. the batch's operations in arrival order: deliveries of new tuples (joined, then stored) and
   at most one migration start between them (the batch is split at the trigger tuple);
4. send this step's quota of mu (the driver sets it: twice the rate of new tuples, Thm 4.4);
5. memory budget check (spill charged or written to disk) and the exact per-worker report.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from joins.online.kernel import Predicate, ProbeResult, SideStore, as_predicate, probe
from joins.online.layouts import BOTH, PROBE, STORE, Layout
from joins.online.spill_store import SpillStore


@dataclass
class RunConfig:
    """Constant for a run; shipped with every chunk (small)."""

    band: float | None = None
    # the local kernel's predicate; None: equality, or the band of ``band``
    predicate: Predicate | None = None
    want_pairs: bool = False  # collect pairs in the report (tests, small outputs)
    pairs_dir: str | None = None  # write pairs as Parquet files (idempotent names)
    budget_tuples: int | None = None  # per worker
    spill: str = "charge"  # "charge" | "disk" | "evict" (see _spill)
    spill_dir: str | None = None

    @property
    def kernel(self) -> Predicate:
        return self.predicate if self.predicate is not None else as_predicate(self.band)


@dataclass
class Deliveries:
    """New tuples for the workers of one partition, sorted by worker."""

    worker: np.ndarray
    is_r: np.ndarray
    key: np.ndarray
    tid: np.ndarray
    seq: np.ndarray
    u: np.ndarray
    role: np.ndarray

    def for_worker(self, w: int) -> Deliveries:
        lo, hi = np.searchsorted(self.worker, [w, w + 1])
        return Deliveries(*(a[lo:hi] for a in (self.worker, self.is_r, self.key, self.tid,
                                                 self.seq, self.u, self.role)))

    def side(self, is_r: bool, role_bit: int) -> SideStore:
        mask = (self.is_r == is_r) & ((self.role & role_bit) != 0)
        return SideStore(self.key[mask], self.tid[mask], self.seq[mask], self.u[mask])


@dataclass
class Migrate:
    """Start of a migration at the tuple with sequence number ``start`` (the trigger tuple)."""

    old: Layout
    new: Layout
    start: int


@dataclass
class Migrated:
    """Tuples of one relation sent from one worker to another (the set mu of Alg 3)."""

    dest: int
    is_r: bool
    tuples: SideStore
    start: int  # the epoch start: mu joins only stored tuples with seq >= start


@dataclass
class Chunk:
    """What the driver sends one partition for one micro-batch."""

    batch: int
    config: RunConfig
    ops: list  # Deliveries | Migrate, in arrival order
    quotas: dict[tuple[int, int], tuple[int, int]]  # (src, dest) -> (R, S) tuples to send now
    finalize: Layout | None = None  # the layout in force once the migration finished
    report: tuple[int, ...] = ()  # workers to report on (the active ones of this partition)
    partitions: int = 1
    last_seq: int = -1  # sequence number of the batch's last tuple


@dataclass
class Cleanup:
    """The clean-up phase after the stream (D-CAPE 2.4): produce the results that evicted
    state missed."""


@dataclass
class WorkerState:
    wid: int
    r: SideStore = field(default_factory=SideStore)
    s: SideStore = field(default_factory=SideStore)
    outbox: dict[int, list[SideStore]] = field(default_factory=dict)  # dest -> [R, S]
    pending: int = 0  # discarded tuples still held until the migration finalises
    start: int = -1  # epoch start of the running migration (-1: none)
    disk_resident: int = 0
    spill_files: list[str] = field(default_factory=list)
    last_seq: int = -1  # the last sequence number processed (eviction point)

    def stored(self) -> tuple[int, int]:
        return len(self.r), len(self.s)


def _new_counts() -> dict[str, float]:
    return dict(received=0, probes=0, outputs=0, migrated=0, sent=0, spilled=0, disk_probes=0,
                seconds=0.0)


def _join_new(ws: WorkerState, d: Deliveries, cfg: RunConfig, out: ProbeResult) -> int:
    """Join newly delivered tuples with the worker's state and store them; returns probes.

    Fast path (every delivery stores and probes: grid, hash): R probes the old S, R is stored,
    then S probes all R (old and new), so each new pair is produced once. General path
    (biclique: store-only and probe-only deliveries): a probe sees the old state fully and the
    same batch's stored tuples only if they arrived earlier (the arrival-order rule).
    """
    kernel, pairs = cfg.kernel, cfg.want_pairs or cfg.pairs_dir is not None
    if np.all(d.role == BOTH):
        new_r, new_s = d.side(True, STORE), d.side(False, STORE)
        probe(ws.s, new_r, True, kernel, out, pairs)
        ws.r.insert(new_r)
        probe(ws.r, new_s, False, kernel, out, pairs)
        ws.s.insert(new_s)
        return len(new_r) + len(new_s)
    pr, ps = d.side(True, PROBE), d.side(False, PROBE)
    sr, ss = d.side(True, STORE), d.side(False, STORE)
    probe(ws.s, pr, True, kernel, out, pairs)
    probe(ss, pr, True, kernel, out, pairs, before_probe=True)
    probe(ws.r, ps, False, kernel, out, pairs)
    probe(sr, ps, False, kernel, out, pairs, before_probe=True)
    ws.r.insert(sr)
    ws.s.insert(ss)
    return len(pr) + len(ps)


def _receive(ws: WorkerState, msg: Migrated, cfg: RunConfig, out: ProbeResult) -> None:
    """Alg 3 lines 10/17: a migrated tuple joins the new epoch's stored tuples, then is kept."""
    pairs = cfg.want_pairs or cfg.pairs_dir is not None
    other = ws.s if msg.is_r else ws.r
    probe(other, msg.tuples, msg.is_r, cfg.kernel, out, pairs, stored_seq_min=msg.start)
    (ws.r if msg.is_r else ws.s).insert(msg.tuples)


def _begin_migration(ws: WorkerState, mig: Migrate) -> None:
    """Split the state into KEEP (stays indexed), per-destination outboxes (copies to send),
    and DISCARD (counted as held until finalisation, Alg 3 line 22)."""
    old, new, me = mig.old, mig.new, ws.wid
    active_new = new.is_active(me)
    for is_r in (True, False):
        store = ws.r if is_r else ws.s
        if not len(store):
            continue
        for dest in new.workers:
            dest = int(dest)
            if dest == me:
                continue
            near = new.origin(dest)
            if not old.may_send(is_r, me, near):
                continue
            need = new.holds(is_r, store.key, store.u, dest)
            if old.is_active(dest):
                need &= ~old.holds(is_r, store.key, store.u, dest)
            need &= old.source(is_r, store.key, store.u, near) == me
            if need.any():
                box = ws.outbox.setdefault(dest, [SideStore(), SideStore()])
                box[0 if is_r else 1].insert(store.select(need))
        keep = new.holds(is_r, store.key, store.u, me) if active_new else \
            np.zeros(len(store), dtype=bool)
        ws.pending += int(len(store) - keep.sum())
        if is_r:
            ws.r = store.select(keep)
        else:
            ws.s = store.select(keep)
    ws.start = mig.start


def _spill(ws: WorkerState, cfg: RunConfig, batch: int, counts: dict) -> bool:
    """Apply the memory budget; returns whether the worker is over it.

    ``charge``: the tuples beyond the budget are counted as on disk (``spilled`` = newly
    overflowing tuples this batch; every probe at an overflowing worker is a disk probe) and
    the cost model charges them. ``disk``: the same counts, and the overflowing tuples are
    really written to the executor's local disk, into the on-disk B-tree store whose write and
    probe costs ``make calibrate`` measures (:mod:`joins.online.spill_store`, one file per
    worker and batch) as Squall's joiners spilled to BerkeleyDB; the in-memory index keeps its
    copy, so the result is unchanged and only the writes are real. ``evict``: D-CAPE's disk adaptation - the oldest
    tuples beyond the budget leave memory for a file (they no longer join new tuples) and
    :func:`_cleanup` produces the missed results after the stream; a pair is missed exactly
    when its later tuple arrived after its earlier tuple was evicted.
    """
    if cfg.budget_tuples is None:
        return False
    if cfg.spill == "evict":
        return _evict(ws, cfg, batch, counts)
    held = len(ws.r) + len(ws.s) + ws.pending
    over = max(0, held - cfg.budget_tuples)
    new = max(0, over - ws.disk_resident)
    counts["spilled"] += new
    if over:
        counts["disk_probes"] += counts["probes"]
    if new and cfg.spill == "disk":
        path = os.path.join(cfg.spill_dir or "/tmp", f"w{ws.wid:05d}-b{batch:06d}.sqlite")
        if os.path.exists(path):
            os.remove(path)  # a recomputed task rewrites its batch's file, never appends twice
        tail = ws.s if len(ws.s) >= new else ws.r
        store = SpillStore(path)
        store.append(tail.key[-new:], tail.tid[-new:], tail.seq[-new:])
        store.close()
        ws.spill_files.append(path)
    ws.disk_resident = over
    return over > 0


def _evict(ws: WorkerState, cfg: RunConfig, batch: int, counts: dict) -> bool:
    held = len(ws.r) + len(ws.s) + ws.pending
    over = held - cfg.budget_tuples
    if over <= 0:
        return ws.disk_resident > 0
    seqs = np.concatenate([ws.r.seq, ws.s.seq])
    cut = np.sort(seqs)[over - 1]  # the oldest `over` tuples (ties: seq is unique)
    parts = {}
    for name, store in (("r", ws.r), ("s", ws.s)):
        old = store.seq <= cut
        gone = store.select(old)
        parts[name] = gone
        if name == "r":
            ws.r = store.select(~old)
        else:
            ws.s = store.select(~old)
    path = os.path.join(cfg.spill_dir or "/tmp", f"w{ws.wid:05d}-b{batch:06d}.npz")
    np.savez(path, **{f"{n}_{a}": getattr(parts[n], a) for n in ("r", "s")
                      for a in ("key", "tid", "seq", "u")},
             evicted_after=np.array([ws.last_seq]))
    ws.spill_files.append(path)
    ws.disk_resident += over
    counts["spilled"] += over
    return True


def _cleanup(ws: WorkerState, cfg: RunConfig, out: ProbeResult) -> None:
    """Join everything the worker ever held (memory + evicted files) and emit exactly the
    pairs the run missed: later tuple's seq > the eviction point of the earlier tuple."""
    if not ws.spill_files:
        return
    big = np.iinfo(np.int64).max
    sides = {"r": [(ws.r, big)], "s": [(ws.s, big)]}
    for path in ws.spill_files:
        with np.load(path) as z:
            ev = int(z["evicted_after"][0])
            for n in ("r", "s"):
                sides[n].append((SideStore(z[f"{n}_key"], z[f"{n}_tid"], z[f"{n}_seq"],
                                           z[f"{n}_u"]), ev))
    merged = {}
    for n, lst in sides.items():
        st = SideStore(np.concatenate([x.key for x, _ in lst]),
                       np.concatenate([x.tid for x, _ in lst]),
                       np.concatenate([x.seq for x, _ in lst]),
                       np.concatenate([x.u for x, _ in lst]))
        ev = np.concatenate([np.full(len(x), e, np.int64) for x, e in lst])
        order = np.argsort(np.concatenate([x.key for x, _ in lst]), kind="stable")
        merged[n] = (st, ev[order])
    (rs, rev), (ss, sev) = merged["r"], merged["s"]
    lo, hi = ss.ranges(rs.key, cfg.kernel, True)
    from joins.online.kernel import expand

    pi, si = expand(lo, hi)
    r_first = rs.seq[pi] < ss.seq[si]
    later = np.where(r_first, ss.seq[si], rs.seq[pi])
    evict_first = np.where(r_first, rev[pi], sev[si])
    missed = later > evict_first
    pairs = cfg.want_pairs or cfg.pairs_dir is not None
    if pairs:
        out.add(int(missed.sum()), rs.tid[pi[missed]], ss.tid[si[missed]])
    else:
        out.add(int(missed.sum()))


@dataclass
class PartitionState:
    pid: int
    workers: dict[int, WorkerState] = field(default_factory=dict)
    outgoing: list = field(default_factory=list)  # (dest partition, Migrated) of the last step

    def worker(self, wid: int) -> WorkerState:
        ws = self.workers.get(wid)
        if ws is None:
            ws = self.workers[wid] = WorkerState(wid)
        return ws


def step(pid: int, records, report) -> PartitionState:
    """One micro-batch of one partition. ``records`` are this partition's state (absent in the
    first batch), its chunk and the migrated tuples addressed to it; ``report`` receives the
    exact per-worker counts (an idempotent accumulator keyed by batch and partition)."""
    state, chunk, inbox = None, None, []
    for _, payload in records:
        if isinstance(payload, PartitionState):
            state = payload
        elif isinstance(payload, Chunk):
            chunk = payload
        elif isinstance(payload, Migrated):
            inbox.append(payload)
        elif payload is not None:
            raise TypeError(f"unexpected record {type(payload).__name__}")
    if chunk is None:
        raise RuntimeError(f"partition {pid} got no chunk")
    state = state or PartitionState(pid)
    cfg = chunk.config
    counts: dict[int, dict] = {}
    outs: dict[int, ProbeResult] = {}

    def acc(w: int) -> tuple[dict, ProbeResult]:
        if w not in counts:
            counts[w], outs[w] = _new_counts(), ProbeResult()
        return counts[w], outs[w]

    inbox.sort(key=lambda m: (m.dest, not m.is_r, int(m.tuples.seq[0]) if len(m.tuples) else 0))
    for msg in inbox:
        c, o = acc(msg.dest)
        t0 = time.perf_counter()
        _receive(state.worker(msg.dest), msg, cfg, o)
        c["migrated"] += len(msg.tuples)
        c["probes"] += len(msg.tuples)
        c["seconds"] += time.perf_counter() - t0
    if chunk.finalize is not None:
        for wid in list(state.workers):
            ws = state.workers[wid]
            if any(len(b) for box in ws.outbox.values() for b in box):
                raise RuntimeError(f"worker {wid} finalised with unsent migration tuples")
            ws.outbox.clear()
            ws.pending, ws.start = 0, -1
            if not chunk.finalize.is_active(wid):
                if len(ws.r) or len(ws.s):
                    raise RuntimeError(f"worker {wid} left the layout holding tuples")
                del state.workers[wid]
    for op in chunk.ops:
        if isinstance(op, Cleanup):
            for ws in list(state.workers.values()):
                c, o = acc(ws.wid)
                t0 = time.perf_counter()
                _cleanup(ws, cfg, o)
                c["seconds"] += time.perf_counter() - t0
            continue
        if isinstance(op, Migrate):
            for w in op.new.workers:
                if int(w) % chunk.partitions == pid:
                    state.worker(int(w))
            for ws in list(state.workers.values()):
                t0 = time.perf_counter()
                _begin_migration(ws, op)
                acc(ws.wid)[0]["seconds"] += time.perf_counter() - t0
            continue
        for w in np.unique(op.worker):
            d = op.for_worker(int(w))
            c, o = acc(int(w))
            t0 = time.perf_counter()
            c["probes"] += _join_new(state.worker(int(w)), d, cfg, o)
            c["received"] += len(d.worker)
            c["seconds"] += time.perf_counter() - t0
    state.outgoing = []
    for (src, dest), (nr, ns) in sorted(chunk.quotas.items()):
        ws = state.workers.get(src)
        if ws is None or src % chunk.partitions != pid:
            continue
        box = ws.outbox.get(dest)
        c, _ = acc(src)
        for i, (k, is_r) in enumerate(((nr, True), (ns, False))):
            if k <= 0:
                continue
            if box is None or len(box[i]) < k:
                raise RuntimeError(f"worker {src} has fewer than {k} tuples for {dest}")
            sent, box[i] = box[i].head(k)
            state.outgoing.append((dest % chunk.partitions, Migrated(dest, is_r, sent, ws.start)))
            c["sent"] += k
    rows = []
    pairs_r, pairs_s = [], []
    for w in sorted(set(chunk.report) | set(counts)):
        ws = state.worker(w)  # every active worker reports, also with nothing received
        c, o = acc(w)
        c["outputs"] = o.count
        ws.last_seq = chunk.last_seq
        over = _spill(ws, cfg, chunk.batch, c)
        r_st, s_st = ws.stored()
        rows.append(dict(worker=w, r_stored=r_st, s_stored=s_st, pending=ws.pending,
                         outbox=sum(len(b) for box in ws.outbox.values() for b in box),
                         overflow=over, **c))
        pr, ps = o.pairs()
        pairs_r.append(pr)
        pairs_s.append(ps)
    r_tid = np.concatenate(pairs_r) if pairs_r else np.zeros(0, np.int64)
    s_tid = np.concatenate(pairs_s) if pairs_s else np.zeros(0, np.int64)
    if cfg.pairs_dir is not None and len(r_tid):
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = os.path.join(cfg.pairs_dir, f"b{chunk.batch:06d}-p{pid:04d}.parquet")
        pq.write_table(pa.table({"r_tid": r_tid, "s_tid": s_tid}), path + ".tmp")
        os.replace(path + ".tmp", path)  # idempotent: a recomputed task rewrites the same file
    payload = {"rows": rows}
    if cfg.want_pairs:
        payload["pairs"] = (r_tid, s_tid)
    report.add({(chunk.batch, pid): payload})
    return state
