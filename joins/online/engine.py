"""The driver loop of the online join engine on Spark.

The driver loop (:meth:`Engine.run`) runs named steps over one :class:`DriverState`: plan the
step (:class:`Planner`: its ticks; the controller, a :class:`Policy`, scans the arrivals and
may fire at an exact tuple, splitting the step into two epochs), route its tuples (the
reshufflers' job, vectorised: :func:`route`), execute it (one chunk per partition, one Spark
step, or the same step locally), collect its reports (:class:`Collector`) and apply them
(:func:`apply_step`: the move's progress, retiring units, the policy's decisions). A step:

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

from joins.online.controller import Policy, Static
from joins.online.driver import DriverState, StepPlan
from joins.online.planner import Planner
from joins.online.routing import release_quotas, route
from joins.online.source import Stream
from joins.online.step_reports import Collector, apply_step
from joins.online.ticks import Tick, Ticks
from joins.online.worker import Chunk, RunConfig, step

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

    def _shares_step(self, tick: Tick, settled: bool, a0: int) -> bool:
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

    def _plan_ticks(self, tick_next: int, pos: int, settled: bool = False,
                    cut: int = 0) -> tuple[list[Tick], int]:
        """The ticks of the next step and its end tuple. Count-cut micro-batches share a step
        only under a static policy (no decision can cut one); event-time ticks also where the
        policy is quiet (:meth:`_shares_step`). A step holds at most ``step_cap`` tuples."""
        n = len(self.stream)
        if self.ticks.tick is None:
            z = min(n, pos + self.bs)
            group = [Tick(-1, pos, z, cut=cut)]
            static = self._static()
            while static and z < n and min(n, z + self.bs) - pos <= self.step_cap:
                group.append(Tick(-1, z, min(n, z + self.bs), cut=cut + len(group)))
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
        """The driver loop: each step planned, routed, executed, its reports collected and
        applied, until the stream, its moves and the clean-up are done."""
        acc = self._report_channel()
        n = len(self.stream)
        collector = Collector(self.stream, self.cfg.inputs, self.P)
        planner = Planner(self.stream, self.policy, self.cfg, self.ticks, self._plan_ticks)
        s = DriverState.start(self.policy.layout, cleanup=self._cleans_up())
        t_start = time.perf_counter()
        bar = self._progress_bar(n)
        while s.running(n, self.ticks.count):
            t0 = time.perf_counter()
            step = planner.plan(s)
            per_part, received = route(step.ops, self.stream, self.P)
            quotas = self._quotas(s, step, received)
            reports = self._execute(s, self._chunks(s, step, per_part, quotas), acc)
            got = collector.collect(s, step, reports, time.perf_counter() - t0)
            apply_step(s, step, got, quotas, self.policy, n, self.ticks)
            if bar is not None:
                bar.update(step.z - step.start)
        if bar is not None:
            bar.close()
        self._release_all(s)
        return self._result(s, time.perf_counter() - t_start)

    def _report_channel(self):
        """Where the steps' reports arrive: a Spark accumulator, or a dict locally."""
        if self.backend != "spark":
            return _LocalReport()
        sc = self.spark.sparkContext
        acc = sc.accumulator({}, _ReportParam())
        if self.ckpt_dir is not None:  # a fresh subfolder of it, deleted after the run
            sc.setCheckpointDir(self.ckpt_dir)
            self._ckpt_root = sc.getCheckpointDir()
        return acc

    def _cleans_up(self) -> bool:
        """Is a clean-up phase due after the stream: evicted state, or a program's own
        (DINER's)? Sets whether the workers log the pairs they produce for it."""
        pol, evict = self.policy, self.cfg.spill == "evict"
        # The clean-up finds the missed pairs by eviction points where a pair's partners meet
        # at one worker for the whole run (a static grid or hash layout, or moves at batch
        # boundaries). Where they may not (moves in flight, a join-biclique storing R and S
        # apart), the workers log the pairs they produce and the clean-up joins everything
        # they held, on disk and in memory, minus the log.
        self.cfg.cleanup_log = evict and (
            pol.layout.kind == "biclique" or
            not (isinstance(pol, Static) or pol.layout.move_mode == "boundary"))
        return evict or (self.cfg.program is not None and self.cfg.program.cleans_up)

    def _progress_bar(self, n: int):
        if not self.progress:
            return None
        from tqdm import tqdm

        return tqdm(total=n, unit="tuple", desc="stream", leave=False)

    def _quotas(self, s: DriverState, step: StepPlan, received: np.ndarray) -> dict:
        """The running move's quotas for this step (none while a boundary move drains)."""
        if s.transfer is None or s.finalize_next or step.drain:
            return {}
        return release_quotas(s.transfer, received, s.layout.workers, self.rate,
                              step.z >= len(self.stream))

    def _chunks(self, s: DriverState, step: StepPlan, per_part: list[list],
                quotas: dict) -> list[Chunk]:
        """One chunk per partition; a boundary move's new units report too."""
        workers = np.union1d(s.layout.workers, step.new_layout.workers) \
            if step.drain else s.layout.workers
        return [Chunk(s.b, self.cfg, per_part[p], quotas, step.finalize,
                      tuple(int(w) for w in workers if w % self.P == p), self.P, step.z - 1,
                      step.drain)
                for p in range(self.P)]

    def _execute(self, s: DriverState, chunks: list[Chunk], acc) -> dict:
        """Run the step (on Spark, or locally), checkpoint its state every few steps and
        release what no later step needs; its reports, each partition once."""
        b = s.b
        if self.backend == "local":
            self._local_step(chunks, acc, s.prev_sent)
            new = None
        else:
            new = self._spark_step(s.prev, chunks, s.prev_sent, acc)
            self._persist(new)
        ckpt = new is not None and self.ckpt_every > 0 and \
            b % self.ckpt_every == self.ckpt_every - 1
        if ckpt:
            new.checkpoint() if self.ckpt_dir is not None else new.localCheckpoint()
        if new is not None:
            self._run_spark_step(new, b, ckpt)
        # a recomputed task of an older step (after an executor loss) reports again:
        # only this step's reports count, each partition once
        reports = {k: v for k, v in acc.value.items() if k[0] == b}
        acc.value = {}
        self._release(s, new, ckpt)
        s.prev = new
        return reports

    def _run_spark_step(self, new, b: int, ckpt: bool) -> None:
        """Run the step's Spark job; a failure stops the run with its cause in one line."""
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

    def _release(self, s: DriverState, new, ckpt: bool) -> None:
        """After a step: the broadcasts, persisted state and checkpoints out of every later
        lineage go."""
        if ckpt or s.b == 0:
            # broadcasts of batches before a checkpoint are out of every later lineage
            # (the checkpointed RDD's own stay until the next one)
            for bc in self._old_broadcasts:
                bc.destroy()
            self._old_broadcasts, self._broadcasts = self._broadcasts, []
        if s.prev is not None and s.prev is not s.last_ckpt:
            s.prev.unpersist()
        if ckpt:
            if s.last_ckpt is not None:
                s.last_ckpt.unpersist()
                if self.ckpt_dir is not None:  # out of every later lineage
                    self._drop_checkpoint(self.checkpoints[-2][1])
            s.last_ckpt = new

    def _release_all(self, s: DriverState) -> None:
        """After the run: its persisted state, last checkpoint and broadcasts go."""
        if s.last_ckpt is not None and s.last_ckpt is not s.prev:
            s.last_ckpt.unpersist()
        if s.prev is not None:
            s.prev.unpersist()
        if self.backend == "spark" and self.ckpt_dir is not None:
            self._drop_checkpoint(self._ckpt_root)  # the last checkpoint, and its folder
        for bc in self._old_broadcasts + self._broadcasts:
            bc.destroy()

    def _result(self, s: DriverState, wall: float) -> EngineResult:
        """The run's metrics, epochs and decisions; its pairs if asked for."""
        res = EngineResult(pd.DataFrame(s.rows), pd.DataFrame(s.epochs),
                           pd.DataFrame(s.decisions), None, wall, self.P,
                           checkpoints=list(self.checkpoints))
        if self.cfg.want_pairs:
            n_in, pairs = self.cfg.inputs, s.pairs
            res.pairs = tuple(np.concatenate([p[k] for p in pairs]) if pairs
                              else np.zeros(0, np.int64) for k in range(n_in))
            res.phases = np.concatenate([np.full(len(p[0]), ph) for p, ph in
                                         zip(pairs, s.phases, strict=True)]) if pairs \
                else np.zeros(0, str)
            res.produced_at = np.concatenate([p[n_in] for p in pairs]).astype(float) \
                if pairs else np.zeros(0)
            res.produced_by = np.concatenate([p[n_in + 1] for p in pairs]).astype(np.int64) \
                if pairs else np.zeros(0, np.int64)
        return res
