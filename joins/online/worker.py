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


@dataclass
class _StepRun:
    """One partition's step in progress: the workers' counts and outputs since the last tick
    end, and the report rows and pairs so far."""

    pid: int
    state: PartitionState
    chunk: Chunk
    prog: Program
    ctx: Context
    counts: dict[int, dict] = field(default_factory=dict)
    outs: dict[int, ProbeResult] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    pairs: dict[str, list] = field(default_factory=dict)
    phase: str = "normal"

    @property
    def want(self) -> bool:
        """Pairs are kept: for the report, or for files."""
        cfg = self.chunk.config
        return cfg.want_pairs or cfg.pairs_dir is not None

    def acc(self, w: int) -> tuple[dict, ProbeResult]:
        """Worker ``w``'s counts and outputs of the current tick."""
        if w not in self.counts:
            self.counts[w] = _new_counts(self.chunk.config.inputs, self.prog.counters)
            self.outs[w] = ProbeResult()
        return self.counts[w], self.outs[w]


def step(pid: int, records, report) -> PartitionState:
    """One Spark step of one partition. ``records`` are this partition's state (absent in the
    first step), its chunk and the pieces addressed to it; ``report`` receives the exact
    per-worker counts (an idempotent accumulator keyed by step and partition)."""
    state, chunk, inbox = _split_records(pid, records)
    prog = chunk.config.program or default_program()
    state = state or PartitionState(pid, prog)
    state.program = prog
    run = _StepRun(pid, state, chunk, prog, Context(chunk.config))
    _receive(run, inbox)
    if chunk.finalize is not None:
        _finalize(state, chunk.finalize, prog)
    state.outgoing = []
    _run_ops(run)
    report.add({(chunk.batch, pid): _payload(run)})
    return state


def _split_records(pid: int, records) -> tuple[PartitionState | None, Chunk, list[Piece]]:
    """The partition's state (None in the first step), its chunk and its inbox."""
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
    return state, chunk, inbox


def _receive(run: _StepRun, inbox: list[Piece]) -> None:
    """The pieces sent to this partition in the last step, in a fixed order: moved state is
    received, the clean-up's pieces wait for it."""
    inbox.sort(key=lambda p: (p.dest, p.rel, p.start < 0,
                              int(p.tuples.seq[0]) if p.evicted_after is None and
                              len(p.tuples) else 0))
    for p in inbox:
        if p.evicted_after is not None:
            run.state.gathered.append(p)
            continue
        c, o = run.acc(p.dest)
        t0 = _clock()
        c["migrated"] += run.prog.receive(run.state.worker(p.dest), p, run.ctx, c, o)
        _charge(c, t0)


def _finalize(state: PartitionState, layout: Layout, prog: Program) -> None:
    """A finished move: outboxes are empty, workers that left ``layout`` go (unless they hold
    evicted state or logs for the clean-up)."""
    for wid in list(state.workers):
        ws = state.workers[wid]
        if any(sum(v) for v in prog.outbox_sizes(ws).values()):
            raise RuntimeError(f"worker {wid} finalised with unsent state")
        ws.outbox.clear()
        ws.pending, ws.start, ws.handoff = 0, -1, False
        if not layout.is_active(wid):
            if sum(prog.stored(ws)):
                raise RuntimeError(f"worker {wid} left the layout holding tuples")
            if not prog.on_disk(ws):  # evicted state and logs stay for the clean-up
                del state.workers[wid]


def _run_ops(run: _StepRun) -> None:
    """The chunk's operations in order, each seeing the tick it belongs to; this step's
    quota of moving state is sent before the last tick ends."""
    ops, ctx = run.chunk.ops, run.ctx
    ends = [i for i, op in enumerate(ops) if isinstance(op, TickEnd)]
    tick_of = {}  # op index -> the tick it belongs to (the next tick end's)
    for i in reversed(range(len(ops))):
        op = ops[i]
        tick_of[i] = op.tick if isinstance(op, TickEnd) else tick_of.get(i + 1, ctx.batch)
    for i, op in enumerate(ops):
        ctx.batch = tick_of[i]  # deliveries see the tick they belong to
        if isinstance(op, TickEnd):
            if i == ends[-1]:
                _send(run.state, run.chunk, run.prog, run.acc)
            _end_tick(run, op)
        elif isinstance(op, CleanupGather):
            _gather(run, op.layout)
        elif isinstance(op, Cleanup):
            _cleanup(run)
        elif isinstance(op, Migrate):
            _begin_move(run, op)
        else:
            _deliver(run, op)


def _end_tick(run: _StepRun, op: TickEnd) -> None:
    """A tick's end: each worker's expiry and memory budget, then its report row (every
    active worker reports, also with nothing received)."""
    ctx, prog, cfg = run.ctx, run.prog, run.chunk.config
    ctx.batch, ctx.watermark, ctx.last_seq = op.tick, op.watermark, op.last_seq
    for w in sorted(set(run.chunk.report) | set(run.counts)):
        ws = run.state.worker(w)
        c, o = run.acc(w)
        c["outputs"] = o.count
        t0 = _clock()  # expiry and the memory budget are the worker's time
        over = prog.end_tick(ws, ctx, c)
        if cfg.cleanup_log and run.phase == "normal" and o.rows:
            _log_output(ws, cfg, op.tick, o.pairs(cfg.inputs))
        _charge(c, t0)
        stored = prog.stored(ws)
        row = dict(tick=op.tick, worker=w, phase=run.phase, t0=op.t0, t1=op.t1,
                   overflow=over, **prog.report(ws), **c)
        for k, v in enumerate(stored):
            row[f"stored@{k}"] = v
        for ph, n in o.by_phase.items():  # outputs of the program's own phases
            row[f"outputs_{ph}"] = n
        run.rows.append(row)
        if run.want:
            for ph, arrays in o.pairs_by_phase(cfg.inputs, run.phase, op.t1).items():
                unit = np.full(len(arrays[0]), w, dtype=np.int64)  # who produced it
                run.pairs.setdefault(ph, []).append((*arrays, unit))
    run.counts.clear()
    run.outs.clear()


def _gather(run: _StepRun, layout: Layout) -> None:
    """Before the clean-up: evicted state leaves for where its partners are under ``layout``."""
    for ws in list(run.state.workers.values()):
        for piece in run.prog.cleanup_pieces(ws, layout, run.ctx):
            run.state.outgoing.append((piece.dest % run.chunk.partitions, piece))


def _cleanup(run: _StepRun) -> None:
    """The clean-up: each worker with the pieces gathered for it."""
    run.phase = "cleanup"
    mine: dict[int, list] = {}
    for p in run.state.gathered:
        mine.setdefault(p.dest, []).append(p)
    run.state.gathered = []
    for ws in list(run.state.workers.values()):
        c, o = run.acc(ws.wid)
        t0 = _clock()
        run.prog.cleanup(ws, mine.get(ws.wid, []), run.ctx, c, o)
        _charge(c, t0)


def _begin_move(run: _StepRun, op: Migrate) -> None:
    """A move starts: the new layout's workers of this partition exist, every worker begins."""
    state = run.state
    for w in op.new.workers:
        if int(w) % run.chunk.partitions == run.pid:
            state.worker(int(w))
    for ws in list(state.workers.values()):
        t0 = _clock()
        run.prog.begin_move(ws, op.old, op.new, op.start, op.mode)
        _charge(run.acc(ws.wid)[0], t0)


def _deliver(run: _StepRun, op: Deliveries) -> None:
    """New tuples, worker by worker, counted by purpose (store, probe) and input."""
    for w in np.unique(op.worker):
        d = op.for_worker(int(w))
        c, o = run.acc(int(w))
        t0 = _clock()
        run.prog.deliver(run.state.worker(int(w)), d, run.ctx, c, o)
        c["received"] += len(d.worker)
        st, pr = (d.role & STORE) != 0, (d.role & PROBE) != 0
        c["store_received"] += int(st.sum())
        c["probe_received"] += int(pr.sum())
        for k in range(run.chunk.config.inputs):
            mine_k = d.rel == k
            c[f"store_received@{k}"] += int((st & mine_k).sum())
            c[f"received@{k}"] += int(mine_k.sum())
            c[f"probe_received@{k}"] += int((pr & mine_k).sum())
        _charge(c, t0)


def _payload(run: _StepRun) -> dict:
    """The step's report: rows, the outboxes left, the pieces sent, and pairs if asked for
    (written as files with ``pairs_dir``)."""
    state, prog, cfg = run.state, run.prog, run.chunk.config
    outboxes = {(wid, dest): sizes for wid, ws in state.workers.items()
                for dest, sizes in prog.outbox_sizes(ws).items()}
    payload = {"rows": run.rows, "outboxes": outboxes, "outgoing": len(state.outgoing)}
    if not run.want:
        return payload
    tids = {ph: [np.concatenate([p[k] for p in lst]) if lst else np.zeros(0, np.int64)
                 for k in range(cfg.inputs + 2)] for ph, lst in run.pairs.items()}  # + at, unit
    if cfg.pairs_dir is not None:
        _write_pairs(cfg, run.chunk.batch, run.pid, tids)
    if cfg.want_pairs:
        payload["pairs"] = tids
    return payload


def _write_pairs(cfg: RunConfig, batch: int, pid: int, tids: dict) -> None:
    """One Parquet file per task and phase (a retried task rewrites it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_in = cfg.inputs
    for ph, cols in tids.items():
        if not len(cols[0]):
            continue
        path = os.path.join(cfg.pairs_dir, f"b{batch:06d}-p{pid:04d}-{ph}.parquet")
        table = pa.table({**{f"tid_{k}": cols[k] for k in range(n_in)},
                          "phase": [ph] * len(cols[0]),
                          "produced_at": cols[n_in].astype(float)})
        commit_file(path, partial(pq.write_table, table))  # one file per task


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
