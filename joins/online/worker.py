"""Executor side of the engine: one micro-batch step of a Spark partition.

A partition holds several logical workers; each worker's state and step belong to its worker
program (:mod:`joins.online.programs`). The step is the engine's part, the same for every
program, in order:

1. receive the pieces of state sent to this partition in the previous step (moves, clean-up);
2. finalise a finished move (discarded tuples leave, workers that left the layout disappear);
3. per tick (event-time ticks, or one count-cut micro-batch): the tick's operations in arrival
   order - deliveries of new tuples, at most one move start between them, the clean-up - then
   the tick's end (expiry, memory budget) and one exact report row per worker;
4. before the last tick ends, send this step's quota of moving state (the driver sets it).

Counts the engine keeps for every program: deliveries by purpose and input
(``store_received``, ``probe_received``), moved tuples (``migrated`` received, ``sent``),
outputs, and the measured seconds, elapsed and CPU (every program call of the step: receive, begin move,
deliver, tick end with expiry and the memory budget, clean-up); a program adds its own fields.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from joins.online.kernel import Predicate, ProbeResult, SideStore, as_predicate
from joins.online.layouts import PROBE, STORE, Layout
from joins.online.programs.base import Context, Piece, Program, commit_file


@dataclass
class RunConfig:
    """Constant for a run; shipped with every chunk (small)."""

    band: float | None = None
    # the local kernel's predicate; None: equality, or the band of ``band``
    predicate: Predicate | None = None
    want_pairs: bool = False  # collect pairs in the report (tests, small outputs)
    pairs_dir: str | None = None  # write pairs as Parquet files (idempotent names)
    budget_tuples: int | None = None  # per worker
    spill: str = "charge"  # "charge" | "disk" | "evict" (see programs.joiner)
    spill_dir: str | None = None
    window: float | None = None  # sliding window on event time (None: unbounded)
    archive: float | None = None  # BiStream's chained index: subindex archive period P
    delay: float = 0.0  # the maximum network delay D a subindex is kept for beyond the window
    program: Program | None = None  # the worker program (None: Squall's joiner)
    inputs: int = 2  # number of inputs
    edges: tuple = ()  # n-way join graph: (input, slot, input, slot) equality/band edges
    # evict mode where a pair's partners may meet at different workers over the run: each
    # worker logs the pairs it produced (files), and the clean-up subtracts them
    cleanup_log: bool = False

    @property
    def kernel(self) -> Predicate:
        return self.predicate if self.predicate is not None else as_predicate(self.band)


@dataclass
class Deliveries:
    """New tuples for the workers of one partition, sorted by worker."""

    worker: np.ndarray
    rel: np.ndarray  # input id (0 = R, 1 = S for two inputs)
    key: np.ndarray
    tid: np.ndarray
    seq: np.ndarray
    u: np.ndarray
    role: np.ndarray
    ts: np.ndarray | None = None  # event time (event-time runs)
    attrs: np.ndarray | None = None  # all join attributes (n-way joins on several attributes)

    def for_worker(self, w: int) -> Deliveries:
        lo, hi = np.searchsorted(self.worker, [w, w + 1])
        return Deliveries(*(None if a is None else a[lo:hi] for a in (
            self.worker, self.rel, self.key, self.tid, self.seq, self.u, self.role, self.ts,
            self.attrs)))

    def side(self, rel: int, role_bit: int) -> SideStore:
        mask = (self.rel == rel) & ((self.role & role_bit) != 0)
        return SideStore(self.key[mask], self.tid[mask], self.seq[mask], self.u[mask],
                         ts=None if self.ts is None else self.ts[mask])


@dataclass
class Migrate:
    """Start of a move from ``old`` to ``new`` at the tuple with sequence number ``start``."""

    old: Layout
    new: Layout
    start: int
    mode: str = "rejoin"


@dataclass
class TickEnd:
    """The end of a tick: expiry and budget, then one report row per worker."""

    tick: int
    last_seq: int
    watermark: float = float("-inf")
    t0: float = float("nan")  # the tick's event-time range [t0, t1)
    t1: float = float("nan")


@dataclass
class Chunk:
    """What the driver sends one partition for one Spark step."""

    batch: int  # the step
    config: RunConfig
    ops: list  # Deliveries | Migrate | Cleanup | CleanupGather | TickEnd, in order
    quotas: dict[tuple[int, int], tuple[int, ...]]  # (src, dest) -> per-input tuples to send
    finalize: Layout | None = None  # the layout in force once the move finished
    report: tuple[int, ...] = ()  # workers to report on (the active ones of this partition)
    partitions: int = 1
    last_seq: int = -1  # sequence number of the step's last tuple
    drain: bool = False  # send every outbox whole at the end of this step (boundary moves)


@dataclass
class Cleanup:
    """The clean-up phase after the stream (D-CAPE 2.4): produce the results that evicted
    state missed."""


@dataclass
class CleanupGather:
    """Before the clean-up: evicted state goes to where its partners are under ``layout``."""

    layout: Layout


@dataclass
class PartitionState:
    pid: int
    program: Program | None = None
    workers: dict[int, object] = field(default_factory=dict)
    outgoing: list = field(default_factory=list)  # (dest partition, Piece) of the last step
    gathered: list = field(default_factory=list)  # clean-up pieces received

    def worker(self, wid: int):
        ws = self.workers.get(wid)
        if ws is None:
            ws = self.workers[wid] = self.program.new_worker(wid)
        return ws


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def _charge(c: dict, t0: tuple[float, float]) -> None:
    """Add the time since ``t0`` to a worker's counts: ``seconds`` (elapsed) and
    ``cpu_seconds`` (this thread's CPU time: what a loaded machine's other jobs do not
    inflate; the per-count calibration reads both)."""
    c["seconds"] += time.perf_counter() - t0[0]
    c["cpu_seconds"] += time.thread_time() - t0[1]


def _new_counts(inputs: int, own: tuple[str, ...] = ()) -> dict[str, float]:
    c = dict(received=0, probes=0, outputs=0, migrated=0, sent=0, spilled=0, disk_probes=0,
             expired=0, store_received=0, probe_received=0, seconds=0.0, cpu_seconds=0.0)
    for i in range(inputs):
        c[f"store_received@{i}"] = 0
        c[f"received@{i}"] = 0  # messages of input i (a BOTH delivery is one message)
        c[f"probe_received@{i}"] = 0
    c.update(dict.fromkeys(own, 0))  # the program's declared counters (Program.counters)
    return c


def default_program() -> Program:
    from joins.online.programs.joiner import Joiner

    return Joiner()


def step(pid: int, records, report) -> PartitionState:
    """One Spark step of one partition. ``records`` are this partition's state (absent in the
    first step), its chunk and the pieces addressed to it; ``report`` receives the exact
    per-worker counts (an idempotent accumulator keyed by step and partition)."""
    state, chunk, inbox = None, None, []
    for _, payload in records:
        if isinstance(payload, PartitionState):
            state = payload
        elif isinstance(payload, Chunk):
            chunk = payload
        elif isinstance(payload, Piece):
            inbox.append(payload)
        elif payload is not None:
            raise TypeError(f"unexpected record {type(payload).__name__}")
    if chunk is None:
        raise RuntimeError(f"partition {pid} got no chunk")
    cfg = chunk.config
    prog = cfg.program or default_program()
    state = state or PartitionState(pid, prog)
    state.program = prog
    n_in = cfg.inputs
    want = cfg.want_pairs or cfg.pairs_dir is not None
    counts: dict[int, dict] = {}
    outs: dict[int, ProbeResult] = {}
    rows: list[dict] = []
    pairs: dict[str, list] = {}
    ctx = Context(cfg)
    phase = "normal"

    def acc(w: int) -> tuple[dict, ProbeResult]:
        if w not in counts:
            counts[w], outs[w] = _new_counts(n_in, prog.counters), ProbeResult()
        return counts[w], outs[w]

    inbox.sort(key=lambda p: (p.dest, p.rel, p.start < 0,
                              int(p.tuples.seq[0]) if p.evicted_after is None and
                              len(p.tuples) else 0))
    for p in inbox:
        if p.evicted_after is not None:
            state.gathered.append(p)
            continue
        c, o = acc(p.dest)
        t0 = _clock()
        c["migrated"] += prog.receive(state.worker(p.dest), p, ctx, c, o)
        _charge(c, t0)
    if chunk.finalize is not None:
        for wid in list(state.workers):
            ws = state.workers[wid]
            if any(sum(v) for v in prog.outbox_sizes(ws).values()):
                raise RuntimeError(f"worker {wid} finalised with unsent state")
            ws.outbox.clear()
            ws.pending, ws.start, ws.handoff = 0, -1, False
            if not chunk.finalize.is_active(wid):
                if sum(prog.stored(ws)):
                    raise RuntimeError(f"worker {wid} left the layout holding tuples")
                if not prog.on_disk(ws):  # evicted state and logs stay for the clean-up
                    del state.workers[wid]
    state.outgoing = []
    ticks = [i for i, op in enumerate(chunk.ops) if isinstance(op, TickEnd)]
    tick_of = {}  # op index -> the tick it belongs to (the next tick end's)
    for i in reversed(range(len(chunk.ops))):
        op = chunk.ops[i]
        tick_of[i] = op.tick if isinstance(op, TickEnd) else tick_of.get(i + 1, ctx.batch)
    for i, op in enumerate(chunk.ops):
        ctx.batch = tick_of[i]  # deliveries see the tick they belong to
        if isinstance(op, TickEnd):
            if i == ticks[-1]:
                _send(state, chunk, prog, acc)
            ctx.batch, ctx.watermark, ctx.last_seq = op.tick, op.watermark, op.last_seq
            for w in sorted(set(chunk.report) | set(counts)):
                ws = state.worker(w)  # every active worker reports, also with nothing received
                c, o = acc(w)
                c["outputs"] = o.count
                t0 = _clock()  # expiry and the memory budget are the worker's time
                over = prog.end_tick(ws, ctx, c)
                if cfg.cleanup_log and phase == "normal" and o.rows:
                    _log_output(ws, cfg, op.tick, o.pairs(n_in))
                _charge(c, t0)
                stored = prog.stored(ws)
                row = dict(tick=op.tick, worker=w, phase=phase, t0=op.t0, t1=op.t1,
                           overflow=over, **prog.report(ws), **c)
                for k, v in enumerate(stored):
                    row[f"stored@{k}"] = v
                for ph, n in o.by_phase.items():  # outputs of the program's own phases
                    row[f"outputs_{ph}"] = n
                rows.append(row)
                if want:
                    for ph, arrays in o.pairs_by_phase(n_in, phase, op.t1).items():
                        unit = np.full(len(arrays[0]), w, dtype=np.int64)  # who produced it
                        pairs.setdefault(ph, []).append((*arrays, unit))
            counts.clear()
            outs.clear()
            continue
        if isinstance(op, CleanupGather):
            for ws in list(state.workers.values()):
                for piece in prog.cleanup_pieces(ws, op.layout, ctx):
                    state.outgoing.append((piece.dest % chunk.partitions, piece))
            continue
        if isinstance(op, Cleanup):
            phase = "cleanup"
            mine: dict[int, list] = {}
            for p in state.gathered:
                mine.setdefault(p.dest, []).append(p)
            state.gathered = []
            for ws in list(state.workers.values()):
                c, o = acc(ws.wid)
                t0 = _clock()
                prog.cleanup(ws, mine.get(ws.wid, []), ctx, c, o)
                _charge(c, t0)
            continue
        if isinstance(op, Migrate):
            for w in op.new.workers:
                if int(w) % chunk.partitions == pid:
                    state.worker(int(w))
            for ws in list(state.workers.values()):
                t0 = _clock()
                prog.begin_move(ws, op.old, op.new, op.start, op.mode)
                _charge(acc(ws.wid)[0], t0)
            continue
        for w in np.unique(op.worker):
            d = op.for_worker(int(w))
            c, o = acc(int(w))
            t0 = _clock()
            prog.deliver(state.worker(int(w)), d, ctx, c, o)
            c["received"] += len(d.worker)
            st, pr = (d.role & STORE) != 0, (d.role & PROBE) != 0
            c["store_received"] += int(st.sum())
            c["probe_received"] += int(pr.sum())
            for k in range(n_in):
                mine_k = d.rel == k
                c[f"store_received@{k}"] += int((st & mine_k).sum())
                c[f"received@{k}"] += int(mine_k.sum())
                c[f"probe_received@{k}"] += int((pr & mine_k).sum())
            _charge(c, t0)
    outboxes = {(wid, dest): sizes for wid, ws in state.workers.items()
                for dest, sizes in prog.outbox_sizes(ws).items()}
    payload = {"rows": rows, "outboxes": outboxes, "outgoing": len(state.outgoing)}
    if want:
        tids = {ph: [np.concatenate([p[k] for p in lst]) if lst else np.zeros(0, np.int64)
                     for k in range(n_in + 2)] for ph, lst in pairs.items()}  # + at, unit
        if cfg.pairs_dir is not None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            for ph, cols in tids.items():
                if not len(cols[0]):
                    continue
                path = os.path.join(cfg.pairs_dir, f"b{chunk.batch:06d}-p{pid:04d}-{ph}.parquet")
                table = pa.table({**{f"tid_{k}": cols[k] for k in range(n_in)},
                                  "phase": [ph] * len(cols[0]),
                                  "produced_at": cols[n_in].astype(float)})
                commit_file(path, partial(pq.write_table, table))  # one file per task
        if cfg.want_pairs:
            payload["pairs"] = tids
    report.add({(chunk.batch, pid): payload})
    return state


def _log_output(ws, cfg: RunConfig, tick: int, tids: tuple[np.ndarray, ...]) -> None:
    """Append a tick's produced pairs to the worker's output log (one file per worker and
    tick: a retried task rewrites it)."""
    path = os.path.join(cfg.spill_dir or "/tmp", f"w{ws.wid:05d}-b{tick:06d}-out.npz")

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, *tids)

    commit_file(path, write)
    ws.output_log.append(path)  # a tick ends once per worker in a state's lineage


def _send(state: PartitionState, chunk: Chunk, prog: Program, acc) -> None:
    """This step's quota of moving state: at most what the driver released, fewer when less is
    left (expired or evicted meanwhile); the outboxes reported back are the truth."""
    quotas = chunk.quotas
    if chunk.drain:
        big = np.iinfo(np.int64).max
        quotas = {(wid, dest): (big,) * len(sizes) for wid, ws in state.workers.items()
                  for dest, sizes in prog.outbox_sizes(ws).items()}
    for (src, dest), quota in sorted(quotas.items()):
        ws = state.workers.get(src)
        if ws is None or src % chunk.partitions != state.pid:
            continue
        c, _ = acc(src)
        for rel, k in enumerate(quota):
            if k <= 0:
                continue
            sent = prog.take(ws, dest, rel, k)
            if sent is None or not len(sent):
                continue
            start = ws.start if not ws.handoff else -1
            state.outgoing.append((dest % chunk.partitions, Piece(dest, rel, sent, start)))
            c["sent"] += len(sent)
