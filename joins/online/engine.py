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
Lineage is cut by ``localCheckpoint`` every few micro-batches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd

from joins.online import migration
from joins.online.controller import Decision, Policy, Static
from joins.online.layouts import Layout
from joins.online.source import Stream
from joins.online.worker import Chunk, Cleanup, Deliveries, Migrate, RunConfig, step


def _pid_of(k: int) -> int:
    """The partitioner of every engine RDD (one function object: equal JVM partitioners)."""
    return k


def _outgoing(kv):
    return kv[1].outgoing


def _run_partition(report, pid, records):
    yield pid, step(pid, records, report)


def _run_partition_bc(report, chunks, pid, records):
    """Like :func:`_run_partition`, the chunk read from this partition's broadcast."""
    yield pid, step(pid, _chain(records, (pid, chunks[pid].value)), report)


def _chain(records, extra):
    yield from records
    yield extra


def _empty_state(p):
    return p, None


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


def _deliveries(stream: Stream, layout: Layout, s0: int, s1: int, parts: int
                ) -> tuple[list[Deliveries | None], np.ndarray]:
    """Route tuples [s0, s1) by ``layout``: per-partition deliveries and per-worker counts."""
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
        out.append(Deliveries(w[sl], stream.is_r[tt], stream.key[tt], stream.tid[tt], tt,
                              stream.u[tt], role[sl]) if len(tt) else None)
    return out, np.bincount(w, minlength=1)


class Engine:
    def __init__(self, spark, stream: Stream, policy: Policy, *, batch_size: int,
                 partitions: int, config: RunConfig, migration_rate: float = 2.0,
                 checkpoint_every: int = 10, progress: bool = True,
                 backend: str = "spark", transport: str = "broadcast") -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if backend not in ("spark", "local"):
            raise ValueError(f"backend must be spark or local, got {backend!r}")
        if transport not in ("broadcast", "shuffle"):
            raise ValueError(f"transport must be broadcast or shuffle, got {transport!r}")
        self.backend, self.transport = backend, transport
        self._broadcasts: list = []
        self._old_broadcasts: list = []
        self._local: dict[int, object] = {}
        self.spark, self.stream, self.policy = spark, stream, policy
        self.bs, self.P, self.cfg = batch_size, partitions, config
        self.rate, self.ckpt_every, self.progress = migration_rate, checkpoint_every, progress

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
        if src.getNumPartitions() != self.P:
            raise RuntimeError("state and migrated tuples are not co-partitioned")
        bcs = [sc.broadcast(c) for c in chunks]
        self._broadcasts.extend(bcs)
        return src.mapPartitionsWithIndex(partial(_run_partition_bc, acc, bcs),
                                          preservesPartitioning=True)

    def _local_step(self, chunks, report) -> None:
        """The same step without Spark, for fast property tests: every partition's state is
        pickled and unpickled between micro-batches, as a Spark block would be."""
        import pickle

        mail: dict[int, list] = {p: [] for p in range(self.P)}
        for st in self._local.values():
            for dest, msg in st.outgoing:
                mail[dest].append((dest, msg))
        for p, chunk in enumerate(chunks):
            recs = ([(p, self._local[p])] if p in self._local else []) + [(p, chunk)] + mail[p]
            new = step(p, recs, report)
            self._local[p] = pickle.loads(pickle.dumps(new, protocol=pickle.HIGHEST_PROTOCOL))

    def run(self) -> EngineResult:
        from pyspark import StorageLevel

        st, pol, P = self.stream, self.policy, self.P
        if self.backend == "spark":
            acc = self.spark.sparkContext.accumulator({}, _ReportParam())
        else:
            acc = _LocalReport()
        n = len(st)
        cum_r = np.concatenate([[0], np.cumsum(st.is_r)])
        layout = pol.layout
        epoch, pos, b = 0, 0, 0
        transfer: migration.Transfer | None = None
        finalize_next = False
        boundary: Decision | None = None
        epochs = [dict(epoch=0, start_tuple=0, start_batch=0, n=layout.mapping[0],
                       m=layout.mapping[1], joiners=layout.joiners, migration_tuples=0,
                       migration_end_batch=0)]
        decisions: list[dict] = []
        rows: list[dict] = []
        pairs_r, pairs_s = [], []
        prev, prev_sent, last_ckpt = None, False, None
        t_start = time.perf_counter()
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=n, unit="tuple", desc="stream", leave=False)

        def start_migration(old: Layout, new: Layout, at: int, info: dict, ops: list) -> None:
            nonlocal transfer, epoch
            ops.append(Migrate(old, new, at))
            planned = migration.plan(old, new, st.is_r[:at], st.key[:at], st.u[:at])
            transfer = migration.Transfer(planned)
            epoch += 1
            epochs.append(dict(epoch=epoch, start_tuple=at, start_batch=b, n=new.mapping[0],
                               m=new.mapping[1], joiners=new.joiners,
                               migration_tuples=transfer.total, migration_end_batch=-1, **info))

        cleanup = self.cfg.spill == "evict"
        if cleanup and not isinstance(pol, Static):
            raise ValueError("spill='evict' (clean-up phase) supports static operators only")
        while pos < n or transfer is not None or boundary is not None or cleanup:
            t0 = time.perf_counter()
            z = min(n, pos + self.bs)
            ops: list = []
            if pos >= n and transfer is None and boundary is None:
                ops.append(Cleanup())  # the stream ended: the clean-up phase of evicted state
                cleanup = False
            finalize = None
            if finalize_next:
                finalize, transfer, finalize_next = layout, None, False
                epochs[-1]["migration_end_batch"] = b
            seg0 = pos
            if boundary is not None and transfer is None:
                start_migration(layout, boundary.layout, pos, boundary.info, ops)
                decisions.append(dict(at=pos, migrated=True, **boundary.info))
                layout, boundary = boundary.layout, None
            a = pos
            while a < z and transfer is None:
                f = pol.scan(st.is_r[a:z], a)
                if f is None:
                    a = z
                    break
                dec = pol.decide(a + f)
                decisions.append(dict(at=a + f, migrated=dec.layout is not None, **dec.info))
                if dec.layout is not None:
                    if a + f > seg0:
                        ops.append((seg0, a + f, layout))
                    start_migration(layout, dec.layout, a + f, dec.info, ops)
                    layout, seg0 = dec.layout, a + f
                a = a + f + 1
            if transfer is not None and a < z:
                pol.observe(st.is_r[a:z], a)
            if hasattr(pol, "count_groups"):
                pol.count_groups(st.key[pos:z])
            if z > seg0:
                ops.append((seg0, z, layout))
            # route the segments
            per_part: list[list] = [[] for _ in range(P)]
            received = np.zeros(0, dtype=np.int64)  # new deliveries per worker id
            for op in ops:
                if isinstance(op, (Migrate, Cleanup)):
                    for p in range(P):
                        per_part[p].append(op)
                    continue
                dl, cnt = _deliveries(st, op[2], op[0], op[1], P)
                size = max(len(received), len(cnt))
                received = np.pad(received, (0, size - len(received))) + \
                    np.pad(cnt, (0, size - len(cnt)))
                for p in range(P):
                    if dl[p] is not None:
                        per_part[p].append(dl[p])
            quotas: dict = {}
            if transfer is not None and not finalize_next:
                if z >= n:
                    quotas = transfer.release(None)  # the stream ended: drain the rest
                else:
                    cap = {}
                    mean = received.mean() if len(received) else 0.0
                    for w in layout.workers:
                        own = received[w] if w < len(received) else 0
                        cap[int(w)] = self.rate * max(own, mean)
                    quotas = transfer.release(cap)
                if transfer.done:
                    finalize_next = True
            report_workers = layout.workers
            chunks = [Chunk(b, self.cfg, per_part[p], quotas, finalize,
                            tuple(int(w) for w in report_workers if w % P == p), P, z - 1)
                      for p in range(P)]
            if self.backend == "local":
                self._local_step(chunks, acc)
                new = None
            else:
                new = self._spark_step(prev, chunks, prev_sent, acc)
                new.persist(StorageLevel.MEMORY_AND_DISK)
            ckpt = new is not None and self.ckpt_every > 0 and \
                b % self.ckpt_every == self.ckpt_every - 1
            if ckpt:
                new.localCheckpoint()
            if new is not None:
                new._jrdd.count()  # runs the step; reports arrive through the accumulator
            reports = acc.value
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
                last_ckpt = new
            prev, prev_sent = new, bool(quotas)
            wall = time.perf_counter() - t0
            r_seen, s_seen = int(cum_r[z]), int(z - cum_r[z])
            first_row = len(rows)
            for (_, pid), payload in sorted(reports.items()):
                for row in payload["rows"]:
                    rows.append(dict(batch=b, epoch=epoch, n=layout.mapping[0],
                                     m=layout.mapping[1], r_seen=r_seen, s_seen=s_seen,
                                     tuples=z - pos, migrating=transfer is not None,
                                     batch_wall_seconds=wall, partition=pid, **row))
                if "pairs" in payload:
                    pairs_r.append(payload["pairs"][0])
                    pairs_s.append(payload["pairs"][1])
            if len(reports) != P:
                raise RuntimeError(f"batch {b}: {len(reports)} of {P} partitions reported")
            uses_stats = type(pol).after_batch is not Policy.after_batch
            if uses_stats and transfer is None and boundary is None and z < n:
                dec = pol.after_batch(pd.DataFrame(rows[first_row:]), z)
                if dec is not None:
                    if dec.layout is not None:
                        boundary = dec
                    else:
                        decisions.append(dict(at=z, migrated=False, **dec.info))
            if bar is not None:
                bar.update(z - pos)
            pos, b = z, b + 1
        if bar is not None:
            bar.close()
        if last_ckpt is not None and last_ckpt is not prev:
            last_ckpt.unpersist()
        if prev is not None:
            prev.unpersist()
        for bc in self._old_broadcasts + self._broadcasts:
            bc.destroy()
        metrics = pd.DataFrame(rows)
        pairs = None
        if self.cfg.want_pairs:
            pairs = (np.concatenate(pairs_r) if pairs_r else np.zeros(0, np.int64),
                     np.concatenate(pairs_s) if pairs_s else np.zeros(0, np.int64))
        return EngineResult(metrics, pd.DataFrame(epochs), pd.DataFrame(decisions), pairs,
                            time.perf_counter() - t_start, P)
