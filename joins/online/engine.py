"""The driver loop of the online join engine on Spark.

Per micro-batch: the controller (a :class:`Policy`) scans the batch's arrivals and may fire at
an exact tuple, splitting the batch into two epochs; the driver routes the tuples (the
reshufflers' job, vectorised), builds one chunk per partition and one Spark step runs:

    state_{b-1} (persisted, partitioned by partition id)
        UNION partitionBy(chunks_b + migrated tuples sent in step b-1)   (same partitioner)
        -> mapPartitions(worker.step)  = state_b

The union of two RDDs with the same partitioner is a narrow, partition-aligned union, so the
state side is never shuffled; only new tuples and migrated tuples move. Each partition holds
several logical workers. The per-worker reports come back through an accumulator keyed by
(batch, partition) (idempotent under task retries), so the driver never deserialises state.
Lineage is cut every few micro-batches by ``localCheckpoint`` (kept on the executors: lost
with an executor) or, with ``checkpoint_dir``, by a reliable checkpoint on a shared folder,
from which Spark recomputes what a lost executor held.

Time: micro-batches are cut by tuple count (``batch_size``) or by event-time ticks (``tick``;
empty ticks included, so a per-tick series has every tick). Several ticks, or a static
policy's count-cut micro-batches, share one Spark step when no controller decision can fall
between them, up to ``step_tuples`` (else ``batch_size``) tuples: the step still reports per
tick.

Faults: a retried task starts again from the persisted state of the previous step (a cached
block is deserialised afresh by every reader), so a failed attempt's changes are not carried
over; files written by tasks have one name per (step, partition) and are committed by an
atomic rename. A report of another step (a recomputed older task after an executor loss) is
ignored; each partition counts once. A step that fails for good (its task's retries spent,
or state lost with an executor since the last local checkpoint) stops the run with one
:class:`StreamFailure` naming the cause.
"""

from __future__ import annotations

import contextlib
import pickle
import re
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd

from joins.online import migration
from joins.online.controller import Decision, Policy, Static
from joins.online.layouts import Layout
from joins.online.source import Stream
from joins.online.worker import (
    Chunk,
    Cleanup,
    CleanupGather,
    Deliveries,
    Migrate,
    RunConfig,
    TickEnd,
    step,
)

# a step's chunks up to this size (pickled, all partitions) go inside its tasks, not as
# broadcasts (transport="broadcast"); larger ones are broadcast, each partition reading its own
INLINE_CHUNK_BYTES = 256 * 1024


def _pid_of(k: int) -> int:
    """The partitioner of every engine RDD (one function object: equal JVM partitioners)."""
    return k


def _outgoing(kv):
    return kv[1].outgoing


def _run_partition(report, pid, records):
    yield pid, step(pid, records, report)


def _run_partition_bc(report, chunks, pid, records):
    """Like :func:`_run_partition`, the chunk (pickled once on the driver) read from this
    partition's broadcast."""
    yield pid, step(pid, _chain(records, (pid, pickle.loads(chunks[pid].value))), report)


def _run_partition_inline(report, blobs, pid, records):
    """Like :func:`_run_partition_bc`, the pickled chunk carried in the task itself."""
    yield pid, step(pid, _chain(records, (pid, pickle.loads(blobs[pid]))), report)


def _chain(records, extra):
    yield from records
    yield extra


def _empty_state(p):
    return p, None


class StreamFailure(RuntimeError):
    """A micro-batch step failed for good on Spark; the message says why in one line."""


def _step_failure(b: int, err: Exception) -> StreamFailure:
    java = getattr(err, "java_exception", None)  # a Py4JJavaError: the Java message only
    text = str(java.getMessage()) if java is not None else str(err)
    if re.search(r"Checkpoint block \S+ not found", text):
        return StreamFailure(
            f"micro-batch {b}: an executor was lost, and with it state saved by the last local "
            "checkpoint (localCheckpoint keeps it on the executors), so Spark cannot recompute "
            "it; the run stops rather than continue without it. Rerun with checkpoint_dir= on "
            "a folder every executor can reach to recover from executor loss")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    cause = lines[0].strip() if lines else type(err).__name__
    tb = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln]
    if tb:  # a Python exception: its line ends the last traceback (frames are indented)
        cause = next((ln for ln in lines[tb[-1] + 1:] if not ln[0].isspace()), cause)
    return StreamFailure(f"micro-batch {b} failed on Spark: {cause}"[:600])


def remove_checkpoint(spark, path: str | None) -> None:
    """Delete a reliable checkpoint's folder (any Hadoop file system: shared folder, HDFS)."""
    if not path:
        return
    sc = spark.sparkContext
    p = sc._jvm.org.apache.hadoop.fs.Path(path)
    p.getFileSystem(sc._jsc.hadoopConfiguration()).delete(p, True)


class _ReportParam:
    """Accumulator of per-(batch, partition) reports; merging by key makes retries harmless."""

    def zero(self, value):
        return {}

    def addInPlace(self, a, b):  # noqa: N802 (Spark's name)
        a.update(b)
        return a


class _LocalReport:
    def __init__(self) -> None:
        self.value: dict = {}

    def add(self, d: dict) -> None:
        self.value.update(d)


@dataclass
class EngineResult:
    metrics: pd.DataFrame
    epochs: pd.DataFrame
    decisions: pd.DataFrame
    pairs: tuple[np.ndarray, np.ndarray] | None
    wall_seconds: float
    partitions: int
    batch_of_tuple: np.ndarray = field(repr=False, default=None)
    epoch_starts: list = field(default_factory=list)
    phases: list = field(default_factory=list)  # phase of each pairs array (want_pairs)
    produced_at: np.ndarray | None = None  # the virtual time each result row was produced at
    produced_by: np.ndarray | None = None  # the unit (worker) that produced each result row
    checkpoints: list = field(default_factory=list)  # (step, folder) of reliable checkpoints


def _deliveries(stream: Stream, layout: Layout, s0: int, s1: int, parts: int,
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


@dataclass
class _Tick:
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

    def get(self, k: int) -> _Tick:
        t0 = self.origin + k * self.tick
        return _Tick(k, int(self.bounds[k]), int(self.bounds[k + 1]), t0, t0 + self.tick)


def _tick_end(stream: Stream, t: _Tick) -> TickEnd:
    """A tick's end; the watermark is the event time of its last tuple (arrivals are in time
    order, so no later tuple is earlier)."""
    idx = t.number
    wm = float(stream.time[t.b - 1]) if stream.time is not None and t.b > 0 else float("-inf")
    t0, t1 = t.t0, t.t1
    if t.index < 0 and stream.time is not None and t.b > t.a:  # count-cut: its tuples' range
        t0, t1 = float(stream.time[t.a]), float(stream.time[t.b - 1])
    return TickEnd(idx, t.b - 1, wm, t0, t1)


def _interleave(ops: list, ticks: list[_Tick], stream: Stream, mark) -> list:
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


class Engine:
    def __init__(self, spark, stream: Stream, policy: Policy, *, batch_size: int,
                 partitions: int, config: RunConfig, migration_rate: float = 2.0,
                 checkpoint_every: int = 10, progress: bool = True,
                 backend: str = "spark", transport: str = "broadcast",
                 tick: float | None = None, checkpoint_dir: str | None = None,
                 step_tuples: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if step_tuples is not None and step_tuples < 1:
            raise ValueError(f"step_tuples must be >= 1, got {step_tuples}")
        if backend not in ("spark", "local"):
            raise ValueError(f"backend must be spark or local, got {backend!r}")
        if transport not in ("broadcast", "shuffle"):
            raise ValueError(f"transport must be broadcast or shuffle, got {transport!r}")
        if config.window is not None and stream.time is None:
            raise ValueError("window= needs an event-time column (time=)")
        self.backend, self.transport = backend, transport
        self._broadcasts: list = []
        self._old_broadcasts: list = []
        self._local: dict[int, object] = {}
        self.spark, self.stream, self.policy = spark, stream, policy
        self.bs, self.P, self.cfg = batch_size, partitions, config
        # the most tuples micro-batches (or ticks) sharing one step may hold: a step's fixed
        # cost (about 0.15 s here) is paid once for them all
        self.step_cap = max(batch_size, step_tuples or 0)
        self._cut = 0  # count-cut micro-batches cut so far
        self.rate, self.ckpt_every, self.progress = migration_rate, checkpoint_every, progress
        self.ckpt_dir = checkpoint_dir  # reliable checkpoints on this shared folder (else local)
        self.checkpoints: list[tuple[int, str]] = []
        self.ticks = Ticks(stream, tick)
        self._aligned = False  # the first union of state and moved tuples was checked
        self._jlevel = None  # the persisted state's Java storage level, made once
    def _spark_step(self, prev, chunks, prev_sent: bool, acc):
        if self.transport == "broadcast":
            return self._spark_step_bc(prev, chunks, prev_sent, acc)
        sc = self.spark.sparkContext
        inp = sc.parallelize([(p, c) for p, c in enumerate(chunks)], self.P)
        if prev is not None and prev_sent:
            inp = inp.union(prev.flatMap(_outgoing))
        inp = inp.partitionBy(self.P, _pid_of)
        src = inp if prev is None else prev.union(inp)
        if src.getNumPartitions() != self.P:
            raise RuntimeError("state and batch are not co-partitioned (union not aligned)")
        return src.mapPartitionsWithIndex(partial(_run_partition, acc), preservesPartitioning=True)

    def _spark_step_bc(self, prev, chunks, prev_sent: bool, acc):
        """One stage per micro-batch: each partition reads its chunk from its own broadcast
        (loaded lazily by the Python worker), so no shuffle is needed unless tuples migrate.
        On a cluster every executor fetches every partition's broadcast (P x the batch bytes
        instead of 1 x with ``transport="shuffle"``)."""
        sc = self.spark.sparkContext
        if prev is None:
            prev = sc.parallelize(range(self.P), self.P).map(_empty_state) \
                .partitionBy(self.P, _pid_of)
        src = prev
        if prev_sent:
            src = prev.union(prev.flatMap(_outgoing).partitionBy(self.P, _pid_of))
        if prev_sent and not self._aligned:  # checked once: the partitioner is the same
            if src.getNumPartitions() != self.P:
                raise RuntimeError("state and migrated tuples are not co-partitioned")
            self._aligned = True
        blobs = [pickle.dumps(c, protocol=pickle.HIGHEST_PROTOCOL) for c in chunks]
        if sum(len(b) for b in blobs) <= INLINE_CHUNK_BYTES:
            # small chunks travel in the task itself: P broadcasts (a file and JVM calls each,
            # then their clean-up) cost more than these bytes in every task
            return src.mapPartitionsWithIndex(partial(_run_partition_inline, acc, blobs),
                                              preservesPartitioning=True)
        bcs = [sc.broadcast(b) for b in blobs]  # the bytes already made: not pickled twice
        self._broadcasts.extend(bcs)
        return src.mapPartitionsWithIndex(partial(_run_partition_bc, acc, bcs),
                                          preservesPartitioning=True)

    def _local_step(self, chunks, report, prev_sent: bool) -> None:
        """The same step without Spark, for fast property tests: every partition's state is
        pickled and unpickled between micro-batches, as a Spark block would be, and the last
        step's outgoing pieces arrive only when the driver would union them on Spark."""
        import pickle

        mail: dict[int, list] = {p: [] for p in range(self.P)}
        for st in self._local.values():
            for dest, msg in (st.outgoing if prev_sent else ()):
                mail[dest].append((dest, msg))
        for p, chunk in enumerate(chunks):
            recs = ([(p, self._local[p])] if p in self._local else []) + [(p, chunk)] + mail[p]
            new = step(p, recs, report)
            self._local[p] = pickle.loads(pickle.dumps(new, protocol=pickle.HIGHEST_PROTOCOL))
            if self.fail_local is not None:
                self.fail_local(chunk.batch, p, recs, report)

    fail_local = None  # tests: called after each local partition step (fault injection)

    def _persist(self, rdd) -> None:
        """``rdd.persist(MEMORY_AND_DISK)`` with the Java storage level made once per run (it
        costs JVM calls at every step otherwise)."""
        from pyspark import StorageLevel

        if self._jlevel is None:
            self._jlevel = self.spark.sparkContext._getJavaStorageLevel(
                StorageLevel.MEMORY_AND_DISK)
        rdd.is_cached = True
        rdd._jrdd.persist(self._jlevel)

    def _drop_checkpoint(self, path: str) -> None:
        remove_checkpoint(self.spark, path)

    def _static(self) -> bool:
        """No controller decision can fall inside a step: ticks may share one."""
        pol = self.policy
        return type(pol).scan is Policy.scan and type(pol).after_batch is Policy.after_batch

    def _shares_step(self, tick: _Tick, settled: bool, a0: int) -> bool:
        """May the next tick share ``tick``'s step: no controller decision can fall at its
        end. Always for a static policy; for one that decides from the statistics after a
        step, when it says it would not decide there (:meth:`Policy.quiet_through`, told the
        keys routed since ``a0`` where state only grows) and ``settled``: no move is running
        or due, no unit is left to drain (it retires at a step's end) and the last step's
        statistics reached the policy."""
        if self._static():
            return True
        pol = self.policy
        if not settled or type(pol).scan is not Policy.scan:
            return False
        grows = self.cfg.window is None
        return pol.quiet_through(tick.t1, self.stream.key[a0:tick.b] if grows else None)

    def _plan_ticks(self, tick_next: int, pos: int,
                    settled: bool = False) -> tuple[list[_Tick], int]:
        """The ticks of the next step and its end tuple. Count-cut micro-batches share a step
        only under a static policy (no decision can cut one); event-time ticks also where the
        policy is quiet (:meth:`_shares_step`). A step holds at most ``step_cap`` tuples."""
        n = len(self.stream)
        if self.ticks.tick is None:
            z = min(n, pos + self.bs)
            group = [_Tick(-1, pos, z, cut=self._cut)]
            static = self._static()
            while static and z < n and min(n, z + self.bs) - pos <= self.step_cap:
                group.append(_Tick(-1, z, min(n, z + self.bs), cut=self._cut + len(group)))
                z = group[-1].b
            return group, z
        group = [self.ticks.get(tick_next)]
        while tick_next + len(group) < self.ticks.count and \
                group[-1].b - group[0].a < self.step_cap and \
                self.ticks.bounds[tick_next + len(group) + 1] - group[0].a <= self.step_cap and \
                self._shares_step(group[-1], settled, group[0].a):
            group.append(self.ticks.get(tick_next + len(group)))
        return group, group[-1].b

    def run(self) -> EngineResult:

        st, pol, P = self.stream, self.policy, self.P
        if self.backend == "spark":
            acc = self.spark.sparkContext.accumulator({}, _ReportParam())
            if self.ckpt_dir is not None:  # a fresh subfolder of it, deleted after the run
                self.spark.sparkContext.setCheckpointDir(self.ckpt_dir)
                self._ckpt_root = self.spark.sparkContext.getCheckpointDir()
        else:
            acc = _LocalReport()
        n = len(st)
        n_in = self.cfg.inputs
        cum = np.zeros((n_in, n + 1), np.int64)
        for i in range(n_in):
            cum[i, 1:] = np.cumsum(st.rel == i)
        layout = pol.layout
        old_layout: Layout | None = None  # while a handoff move runs: the layout moved from
        epoch, pos, b, tick_next = 0, 0, 0, 0
        transfer: migration.Transfer | None = None
        finalize_next = False
        boundary: Decision | None = None
        epochs = [dict(epoch=0, start_tuple=0, start_batch=0, n=layout.mapping[0],
                       m=layout.mapping[1], joiners=layout.joiners, migration_tuples=0,
                       migration_end_batch=0)]
        decisions: list[dict] = []
        rows: list[dict] = []
        pairs: list[tuple] = []
        phases: list[str] = []
        prev, prev_sent, last_ckpt = None, False, None
        t_start = time.perf_counter()
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=n, unit="tuple", desc="stream", leave=False)

        def start_migration(old: Layout, new: Layout, at: int, info: dict, ops: list) -> None:
            nonlocal transfer, epoch, old_layout
            mode = new.move_mode
            if self.cfg.program is not None and mode not in self.cfg.program.moves:
                raise ValueError(f"the {self.cfg.program.name} program cannot move state by "
                                 f"{mode} (its moves: {', '.join(self.cfg.program.moves)})")
            ops.append(Migrate(old, new, at, mode))
            if mode == "rejoin":
                planned = migration.plan(old, new, st.is_r[:at], st.key[:at], st.u[:at])
                transfer = migration.Transfer(planned, mode)
            else:
                transfer = migration.Transfer(None, mode)  # the executors report what moves
                old_layout = old if mode == "handoff" else None
            epoch += 1
            epochs.append(dict(epoch=epoch, start_tuple=at, start_batch=b, n=new.mapping[0],
                               m=new.mapping[1], joiners=new.joiners,
                               migration_tuples=transfer.total, migration_end_batch=-1, **info))

        evict = self.cfg.spill == "evict"
        # a clean-up phase after the stream: evicted state, or a program's own (DINER's)
        cleanup = evict or (self.cfg.program is not None and self.cfg.program.cleans_up)
        # The clean-up finds the missed pairs by eviction points where a pair's partners meet
        # at one worker for the whole run (a static grid or hash layout, or moves at batch
        # boundaries). Where they may not (moves in flight, a join-biclique storing R and S
        # apart), the workers log the pairs they produce and the clean-up joins everything
        # they held, on disk and in memory, minus the log.
        self.cfg.cleanup_log = evict and (
            pol.layout.kind == "biclique" or
            not (isinstance(pol, Static) or pol.layout.move_mode == "boundary"))
        gather = False
        fresh = False  # the policy saw the last step's statistics (after_batch)
        while pos < n or transfer is not None or boundary is not None or cleanup or \
                tick_next < self.ticks.count:
            t0 = time.perf_counter()
            if pos < n or tick_next < self.ticks.count:
                settled = fresh and transfer is None and boundary is None and \
                    not finalize_next and not layout.drains
                ticks, z = self._plan_ticks(tick_next, pos, settled)
            else:  # after the stream (moves draining, clean-up): a tick of its own
                extra = -1 if self.ticks.tick is None else max(self.ticks.count, tick_next)
                ticks, z = [_Tick(extra, pos, pos, cut=self._cut)], pos
                if self.ticks.tick is not None:
                    tick_next = extra + 1
            ops: list = []
            tail: list = []  # a boundary move: after the step's deliveries
            drain = False
            if pos >= n and transfer is None and boundary is None and \
                    tick_next >= self.ticks.count:
                if gather or (len(epochs) == 1 and not self.cfg.cleanup_log):
                    ops.append(Cleanup())  # the stream ended: the clean-up of evicted state
                    cleanup = False
                else:
                    ops.append(CleanupGather(layout))  # evicted state meets its partners
                    gather = True
            finalize = None
            if finalize_next:
                finalize, transfer, finalize_next = layout, None, False
                old_layout = None
                epochs[-1]["migration_end_batch"] = b
            seg0 = pos
            if boundary is not None and transfer is None:
                if boundary.layout.move_mode == "boundary":
                    # D-CAPE's protocol: the step routes by the old layout; the move follows
                    # its deliveries, whole, so nothing arrives while state is in flight
                    start_migration(layout, boundary.layout, z, boundary.info, tail)
                    drain = True
                else:
                    start_migration(layout, boundary.layout, pos, boundary.info, ops)
                decisions.append(dict(at=pos, migrated=True, **boundary.info))
                new_layout, boundary = boundary.layout, None
                if not drain:
                    layout = new_layout
            else:
                new_layout = None
            a = pos
            while a < z and transfer is None:
                f = pol.scan(st.is_r[a:z], a)
                if f is None:
                    a = z
                    break
                dec = pol.decide(a + f)
                decisions.append(dict(at=a + f, migrated=dec.layout is not None, **dec.info))
                if dec.layout is not None:
                    if dec.layout.move_mode == "boundary":
                        # cut the step at the trigger (count-cut) or the end of its tick
                        cut = a + f
                        if self.ticks.tick is not None:
                            k = int(np.searchsorted(self.ticks.bounds, a + f, "right")) - 1
                            ticks = [t for t in ticks if t.index <= k]
                            cut = ticks[-1].b
                        else:
                            ticks = [_Tick(-1, pos, cut, cut=self._cut)]
                        z = cut
                        start_migration(layout, dec.layout, z, dec.info, tail)
                        drain, new_layout = True, dec.layout
                        break
                    if a + f > seg0:
                        ops.append((seg0, a + f, layout, old_layout))
                    start_migration(layout, dec.layout, a + f, dec.info, ops)
                    layout, seg0 = dec.layout, a + f
                a = a + f + 1
            if transfer is not None and a < z:
                pol.observe(st.is_r[a:z], a)
            if hasattr(pol, "count_groups"):
                pol.count_groups(st.key[pos:z])
            if z > seg0:
                ops.append((seg0, z, layout, old_layout))

            ops = _interleave(ops, ticks, st, partial(_tick_end, st))
            if tail:  # the boundary move goes right before the step's last tick end
                last = max(i for i, op in enumerate(ops) if isinstance(op, TickEnd))
                ops[last:last] = tail
            # route the segments
            per_part: list[list] = [[] for _ in range(P)]
            received = np.zeros(0, dtype=np.int64)  # new deliveries per worker id
            for op in ops:
                if not isinstance(op, tuple):
                    for p in range(P):
                        per_part[p].append(op)
                    continue
                dl, cnt = _deliveries(st, op[2], op[0], op[1], P, op[3])
                size = max(len(received), len(cnt))
                received = np.pad(received, (0, size - len(received))) + \
                    np.pad(cnt, (0, size - len(cnt)))
                for p in range(P):
                    if dl[p] is not None:
                        per_part[p].append(dl[p])
            quotas: dict = {}
            if transfer is not None and not finalize_next and not drain:
                if z >= n:
                    quotas = transfer.release(None)  # the stream ended: drain the rest
                else:
                    cap = {}
                    mean = received.mean() if len(received) else 0.0
                    for w in layout.workers:
                        own = received[w] if w < len(received) else 0
                        cap[int(w)] = self.rate * max(own, mean)
                    quotas = transfer.release(cap)
            report_workers = np.union1d(layout.workers, new_layout.workers) \
                if drain else layout.workers
            chunks = [Chunk(b, self.cfg, per_part[p], quotas, finalize,
                            tuple(int(w) for w in report_workers if w % P == p), P, z - 1,
                            drain)
                      for p in range(P)]
            if self.backend == "local":
                self._local_step(chunks, acc, prev_sent)
                new = None
            else:
                new = self._spark_step(prev, chunks, prev_sent, acc)
                self._persist(new)
            ckpt = new is not None and self.ckpt_every > 0 and \
                b % self.ckpt_every == self.ckpt_every - 1
            if ckpt:
                new.checkpoint() if self.ckpt_dir is not None else new.localCheckpoint()
            if new is not None:
                try:
                    new._jrdd.count()  # runs the step; reports arrive through the accumulator
                except Exception as e:  # py4j's error: the cause in one line, the trace chained
                    if self.ckpt_dir is not None:  # tidy up, but never hide the cause
                        with contextlib.suppress(Exception):
                            self._drop_checkpoint(self._ckpt_root)
                    raise _step_failure(b, e) from e
                if ckpt and self.ckpt_dir is not None:
                    if not new.isCheckpointed():
                        raise StreamFailure(f"micro-batch {b}: no checkpoint written to "
                                            f"{self.ckpt_dir}")
                    self.checkpoints.append((b, new.getCheckpointFile()))
            # a recomputed task of an older step (after an executor loss) reports again:
            # only this step's reports count, each partition once
            reports = {k: v for k, v in acc.value.items() if k[0] == b}
            acc.value = {}
            if ckpt or b == 0:
                # broadcasts of batches before a checkpoint are out of every later lineage
                # (the checkpointed RDD's own stay until the next one)
                for bc in self._old_broadcasts:
                    bc.destroy()
                self._old_broadcasts, self._broadcasts = self._broadcasts, []
            if prev is not None and prev is not last_ckpt:
                prev.unpersist()
            if ckpt:
                if last_ckpt is not None:
                    last_ckpt.unpersist()
                    if self.ckpt_dir is not None:  # out of every later lineage
                        self._drop_checkpoint(self.checkpoints[-2][1])
                last_ckpt = new
            wall = time.perf_counter() - t0
            if len(reports) != P:
                raise RuntimeError(f"batch {b}: {len(reports)} of {P} partitions reported")
            first_row = len(rows)
            outboxes: dict = {}
            sent = outgoing = 0
            tick_of = {t.number: t for t in ticks}
            for (_, pid), payload in sorted(reports.items()):
                for row in payload["rows"]:
                    k = row.pop("tick")
                    tk = tick_of.get(k)
                    a0, b0 = (tk.a, tk.b) if tk is not None else (pos, z)
                    seen = {f"seen@{i}": int(cum[i, b0]) for i in range(n_in)}
                    rows.append(dict(batch=k, step=b, epoch=epoch, n=layout.mapping[0],
                                     m=layout.mapping[1], r_seen=seen["seen@0"],
                                     s_seen=int(b0 - seen["seen@0"]), tuples=b0 - a0,
                                     migrating=transfer is not None,
                                     batch_wall_seconds=wall / len(ticks), partition=pid,
                                     **seen, **row))
                    sent += row["sent"]
                outboxes.update(payload["outboxes"])
                outgoing += payload["outgoing"]
                for ph, tids in payload.get("pairs", {}).items():
                    pairs.append(tuple(tids))
                    phases.append(ph)
            if transfer is not None and not finalize_next:
                transfer.sync(outboxes, sent)
                if transfer.done:
                    finalize_next = True
                    epochs[-1]["migration_tuples"] = transfer.sent
            # the next step unions this one's outgoing pieces (moves, clean-up gathering)
            prev_sent = outgoing > 0 or bool(quotas)
            prev = new
            if drain:
                layout = new_layout
            if transfer is None and boundary is None:  # drained units leave once empty
                held = {}
                for row in rows[first_row:]:
                    held[row["worker"]] = row.get("outbox", 0) + sum(
                        v for k, v in row.items() if k.startswith("stored@"))
                retired = layout.retire(held)
                if retired is not None:
                    adopt = getattr(pol, "adopt", None)
                    if adopt is not None:  # a policy that builds on its layout (2PS)
                        adopt(retired)
                    gone = sorted(set(layout.workers.tolist()) - set(retired.workers.tolist()))
                    boundary = Decision(z, {"retired": gone}, retired)
            uses_stats = type(pol).after_batch is not Policy.after_batch
            fresh = uses_stats and transfer is None and boundary is None and z < n
            if fresh:
                dec = pol.after_batch(pd.DataFrame(rows[first_row:]), z)
                if dec is not None:
                    if dec.layout is not None:
                        boundary = dec
                    else:
                        decisions.append(dict(at=z, migrated=False, **dec.info))
            for row in rows[first_row:]:  # the controller's private fields are not metrics
                for k in [k for k in row if k.startswith("_")]:
                    del row[k]
            if bar is not None:
                bar.update(z - pos)
            if self.ticks.tick is not None and ticks[0].index < self.ticks.count:
                tick_next += len(ticks)
            if self.ticks.tick is None:
                self._cut += len(ticks)
            pos, b = z, b + 1
        if bar is not None:
            bar.close()
        if last_ckpt is not None and last_ckpt is not prev:
            last_ckpt.unpersist()
        if prev is not None:
            prev.unpersist()
        if self.backend == "spark" and self.ckpt_dir is not None:
            self._drop_checkpoint(self._ckpt_root)  # the last checkpoint, and its folder
        for bc in self._old_broadcasts + self._broadcasts:
            bc.destroy()
        metrics = pd.DataFrame(rows)
        out_pairs = None
        if self.cfg.want_pairs:
            out_pairs = tuple(np.concatenate([p[k] for p in pairs]) if pairs
                              else np.zeros(0, np.int64) for k in range(n_in))
        res = EngineResult(metrics, pd.DataFrame(epochs), pd.DataFrame(decisions), out_pairs,
                           time.perf_counter() - t_start, P, checkpoints=list(self.checkpoints))
        if self.cfg.want_pairs:
            res.phases = np.concatenate([np.full(len(p[0]), ph) for p, ph in
                                         zip(pairs, phases, strict=True)]) if pairs \
                else np.zeros(0, str)
            res.produced_at = np.concatenate([p[n_in] for p in pairs]).astype(float) \
                if pairs else np.zeros(0)
            res.produced_by = np.concatenate([p[n_in + 1] for p in pairs]).astype(np.int64) \
                if pairs else np.zeros(0, np.int64)
        return res
