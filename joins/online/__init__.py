"""The online (streaming) join engine on Spark and the operators of the Squall paper.

``run_stream`` is the one entry point: it reads two inputs R and S or any number of named
inputs (pandas, Spark DataFrames or Parquet paths), orders their arrivals (by event time when
given), runs an operator of the registry (kind "online") through the micro-batch engine
(:mod:`joins.online.engine`) and returns exact per-micro-batch, per-worker counts, the epochs
(layout versions), a summary with modeled and local wall time, and optionally the result rows
(``l_*`` = R's columns, ``r_*`` = S's columns; ``<name>_*`` per input for named inputs) with
the ``phase`` that produced each, its virtual time ``produced_at`` and, in the collected frame
(``collect_output``; not in ``output=`` Parquet), the ``unit`` (worker) that produced it.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from joins.online.checks import check_run, rescaled
from joins.online.controller import ilf_opt
from joins.online.cost import CostModel

__all__ = ["StreamResult", "run_stream", "CostModel"]


@dataclass
class StreamResult:
    metrics: pd.DataFrame  # one row per micro-batch and worker
    epochs: pd.DataFrame  # one row per epoch (mapping version)
    summary: dict
    output: pd.DataFrame | None
    decisions: pd.DataFrame | None = None  # every trigger firing (also those keeping the map)


def _factory(operator):
    """A registry name (kind "online"), or a callable taking ``joiners``, the run's facts
    (:class:`joins.online.operator_spec.Run`) and its parameters as keywords: a declared
    :class:`~joins.online.operator_spec.Operator`, or a plain function (tests)."""
    from joins import registry

    if callable(operator):
        return operator
    return registry.get(operator, "online").load()


def run_stream(spark, r=None, s=None, *, operator: str, joiners: int, on: str | list = "key",
               band: float | None = None, order: str = "random", k: float | None = None,
               seed: int = 0, controller: str = "exact", batch_size: int = 50_000,
               memory_budget_tuples: int | None = None, spill: str = "charge",
               cost: CostModel | None = None, output: str | Path | None = None,
               collect_output: bool = False, progress: bool = True,
               partitions: int | None = None, checkpoint_every: int = 10,
               migration_rate: float = 2.0, order_params: dict | None = None,
               backend: str = "spark", transport: str = "broadcast",
               predicate=None, inputs: dict | None = None, time: str | None = None,
               tick: float | None = None, window: float | None = None,
               archive: float | None = None, delay: float = 0.0,
               tuple_bytes: tuple[float, ...] | None = None,
               rescale: list | None = None, checkpoint_dir: str | Path | None = None,
               step_tuples: int | None = None, **operator_params) -> StreamResult:
    """Stream two inputs (``r``, ``s``) or any number (``inputs={name: data}``) through an
    online join operator on Spark.

    ``on``: one column shared by all inputs, or join edges ("A.x=B.x,B.y=C.y" or a list).
    ``time``: an event-time column (numeric or timestamp) present in every input: arrivals
    are ordered by (time, arrival number). ``tick``: cut micro-batches every ``tick`` units of
    event time (empty ticks included) instead of every ``batch_size`` tuples. ``window``: join
    only tuples whose event times differ by at most ``window``; older state expires.
    ``archive``: BiStream's chained index, expiry by whole subindexes of ``archive`` event
    time, each kept until the other relation is ``window + delay`` past its newest tuple.
    ``tuple_bytes``: bytes of one stored tuple per input (BiStream's chi_R, chi_S): the
    metrics then carry ``mlv_bytes``, each worker's stored tuples in bytes (its MLV).
    ``rescale``: [(arrival number, units), ...] changes a static operator's units there
    (a joiner count for grid and hash layouts, (R units, S units) for a join-biclique).
    ``partitions``: Spark partitions holding the J logical workers (default: the
    application's cores, at most J; about one per core is the efficient shape).
    ``step_tuples``: micro-batches (or ticks) where no decision can fall share one Spark step
    up to this many tuples (default: ``batch_size``, one count-cut micro-batch per step); every
    micro-batch still reports its own rows, with the same counts, and ``batch_wall_seconds``
    is then its step's local wall time split evenly among them.
    ``migration_rate``: migrated tuples a worker takes per new tuple it receives (Thm 4.4: 2).
    ``transport``: how a micro-batch's tuples reach the partitions: ``"broadcast"`` (one
    Spark stage per micro-batch) or ``"shuffle"`` (parallelize + partitionBy, two stages).
    ``backend="local"`` runs the same worker steps in this process (fast property tests
    only; never for measurements).
    ``predicate``: the local join kernel's predicate (:class:`joins.online.kernel.Predicate`,
    e.g. an inequality) instead of the equality or band of ``band``; content-insensitive
    routing (grid, biclique) only, since hash routing sends unequal keys apart.
    ``memory_budget_tuples``: per worker; exceeding it is recorded (status "overflow") and
    charged (``spill="charge"``), also really written to local disk (``spill="disk"``), or
    evicted to disk with a clean-up phase after the stream (``spill="evict"``, D-CAPE).
    ``checkpoint_dir``: a folder every executor can reach (a shared file system, HDFS): every
    ``checkpoint_every`` micro-batches the state is checkpointed there (Spark inputs once, on
    loading), so the run recovers exactly from the loss of an executor; without it the
    checkpoints are local (on the executors) and such a loss stops the run with one
    :class:`~joins.online.engine.StreamFailure`. The run deletes what it wrote there.
    """
    from joins.online import programs, source
    from joins.online.engine import Engine, remove_checkpoint
    from joins.online.worker import RunConfig

    if joiners < 1:
        raise ValueError(f"joiners must be >= 1, got {joiners}")
    if spill not in ("charge", "disk", "evict"):
        raise ValueError(f"spill must be charge, disk or evict, got {spill!r}")
    if band is not None and band < 0:
        raise ValueError(f"band must be >= 0, got {band}")
    if archive is not None and (window is None or not archive > 0):
        raise ValueError("archive= (the chained index's period) needs a window= and must be > 0")
    if not delay >= 0:
        raise ValueError(f"delay must be >= 0, got {delay}")
    if window is not None and not window >= 0:
        raise ValueError(f"window must be >= 0, got {window}")
    if predicate is not None and band is not None:
        raise ValueError("give band= or predicate=, not both")
    if inputs is not None:
        if r is not None or s is not None:
            raise ValueError("give r= and s=, or inputs=, not both")
        if len(inputs) < 2:
            raise ValueError("a join needs at least two inputs")
        names = list(inputs)
        prefixes = [f"{nm}_" for nm in names]
        data = list(inputs.values())
    else:
        names, prefixes, data = ["R", "S"], ["l_", "r_"], [r, s]
    graph = source.JoinGraph.parse(names, on)
    if tuple_bytes is not None and (len(tuple_bytes) != len(names) or min(tuple_bytes) < 0):
        raise ValueError(f"tuple_bytes takes one size >= 0 per input ({len(names)} inputs)")
    factory = _factory(operator)
    op_name = operator if isinstance(operator, str) else \
        getattr(operator, "name", None) or getattr(operator, "__name__", "custom")
    cost = cost or CostModel()
    reliable = checkpoint_dir is not None and spark is not None and backend == "spark"
    if reliable:  # the inputs' checkpoints: a fresh subfolder, deleted after the run
        spark.sparkContext.setCheckpointDir(str(checkpoint_dir))
        inputs_ckpt = spark.sparkContext.getCheckpointDir()
    try:
        rels = [source.load(spark, d, graph.columns(i), names[i], time, reliable)
                for i, d in enumerate(data)]
        if graph.composite and band is not None:
            raise ValueError("a band join takes one key column, not a composite key")
        source.add_composite_keys(rels, graph)
        stream = source.build_stream(rels, order=order, seed=seed, k=k, band=band,
                                     order_params=order_params, graph=graph)
        # the run's facts, the same for every operator (joins.online.operator_spec.Run)
        facts = dict(n_r=stream.n_r, n_s=stream.n_s, seed=seed, controller=controller,
                     band=band, graph=graph, tuple_bytes=tuple_bytes,
                     full_history=window is None,  # 2PS migrates state without a window
                     key_range=_key_range(stream.key) if band is not None else None)
        policy = factory(joiners, **facts, **operator_params)
        base_program = programs.load(getattr(policy, "program", "joiner"))(
            **getattr(policy, "program_params", {}))
        check_run(policy, base_program, operator=op_name, inputs=len(names),
                  shared=graph.shared, spill=spill, predicate=predicate, rescale=rescale)
        policy = rescaled(policy, rescale)
        program = base_program
        parts = partitions or max(1, min(joiners, executor_cores(spark)))
        from runtime.paths import ONLINE_SCRATCH

        run_id = uuid.uuid4().hex[:12]
        pairs_dir = None
        if output is not None:
            pairs_dir = Path(tempfile.mkdtemp(prefix=f"pairs-{run_id}-", dir=_mk(ONLINE_SCRATCH)))
        spill_dir = _mk(ONLINE_SCRATCH / f"spill-{run_id}") \
            if spill != "charge" or program.uses_disk else None
        cfg = RunConfig(band=band, predicate=predicate, want_pairs=collect_output,
                        pairs_dir=str(pairs_dir) if pairs_dir else None,
                        budget_tuples=memory_budget_tuples, spill=spill,
                        spill_dir=str(spill_dir) if spill_dir else None, window=window,
                        archive=archive, delay=delay,
                        program=program, inputs=len(names), edges=graph.edges)
        engine = Engine(spark, stream, policy, batch_size=batch_size, partitions=parts, config=cfg,
                        migration_rate=migration_rate, checkpoint_every=checkpoint_every,
                        progress=progress, backend=backend, transport=transport, tick=tick,
                        checkpoint_dir=str(checkpoint_dir) if reliable else None,
                        step_tuples=step_tuples)
        try:
            res = engine.run()
        finally:  # the run's files go with it, failed or not
            if spill_dir is not None:
                shutil.rmtree(spill_dir, ignore_errors=True)
        metrics = _with_cost(_named(res.metrics, names), cost)
        if tuple_bytes is not None:
            metrics["mlv_bytes"] = sum(b * metrics[f"stored_{nm}"]
                                       for b, nm in zip(tuple_bytes, names, strict=True))
        summary = _summary(metrics, res, stream, policy, cost, joiners, memory_budget_tuples)
        summary.update(operator=op_name, on=on, band=band, order=order, k=k, seed=seed,
                       controller=controller, batch_size=batch_size, spill=spill, window=window,
                       archive=archive, delay=delay, tick=tick, inputs=names, program=program.name)
        if reliable:
            summary["reliable_checkpoints"] = len(res.checkpoints)
        out_df = None
        if collect_output:
            out_df = _pandas_output(rels, prefixes, res.pairs, res.phases, res.produced_at,
                                    res.produced_by)
        if output is not None:
            _write_output(spark, rels, prefixes, pairs_dir, Path(output))
            shutil.rmtree(pairs_dir, ignore_errors=True)
        return StreamResult(metrics, res.epochs, summary, out_df, res.decisions)
    finally:
        if reliable:
            remove_checkpoint(spark, inputs_ckpt)


def _key_range(key: np.ndarray) -> tuple[float, float]:
    """The inputs' key range: what ContRand's range subgroups split in a band join (known in
    advance for a finite input, as TPC-H's orderkey domain is)."""
    known = key[~np.isnan(key)]
    return (float(known.min()), float(known.max())) if len(known) else (0.0, 0.0)


def _named(m: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per-input columns named after the inputs (``store_received_R``, ``stored_C``...); a
    program without R/S stores reports ``r_stored`` (input 0) and ``s_stored`` (the rest)."""
    if m.empty:
        return m
    ren = {}
    for c in m.columns:
        if "@" in c and c.partition("@")[2].isdigit():
            base, _, i = c.partition("@")
            ren[c] = f"{base}_{names[int(i)]}"
    m = m.rename(columns=ren)
    for nm in names:  # a worker that never held an input (an empty stream) reports none
        if f"stored_{nm}" not in m.columns:
            m[f"stored_{nm}"] = 0
    if "r_stored" not in m.columns:
        m["r_stored"] = m[f"stored_{names[0]}"]
        m["s_stored"] = m[[f"stored_{nm}" for nm in names[1:]]].sum(axis=1)
    if "pending" not in m.columns:
        m["pending"] = 0
    return m


def executor_cores(spark) -> int:
    """Task slots of the application, whatever spark.default.parallelism says: one partition
    per slot runs a step in one wave (notes/engine-measurements.md, Partitions)."""
    import os
    import re

    if spark is None:
        return 2
    master = spark.sparkContext.master
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if m:
        return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
    m = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master)
    if m:
        return int(m.group(1)) * int(m.group(2))
    if master == "local":
        return 1
    return spark.sparkContext.defaultParallelism


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _with_cost(m: pd.DataFrame, cost: CostModel) -> pd.DataFrame:
    if m.empty:
        return m.assign(modeled_cost=[])
    m = m.assign(modeled_cost=cost.worker_cost(m))
    return m


def batch_costs(m: pd.DataFrame, cost: CostModel) -> pd.Series:
    """Modeled seconds per micro-batch: fixed cost + the slowest worker."""
    return cost.fixed_per_batch + m.groupby("batch")["modeled_cost"].max()


def ilf_trace(stream, epochs: pd.DataFrame, joiners: int) -> pd.DataFrame:
    """Per tuple: the epoch mapping's ILF and the oracle's ILF* (grid operators), exact."""
    cum_r = np.cumsum(stream.is_r)
    cum_s = np.arange(1, len(stream) + 1) - cum_r
    ep = np.searchsorted(epochs["start_tuple"].to_numpy(), np.arange(len(stream)), "right") - 1
    n = epochs["n"].to_numpy()[ep]
    m = epochs["m"].to_numpy()[ep]
    ilf_now = cum_r / n + cum_s / m
    return pd.DataFrame({"r": cum_r, "s": cum_s, "n": n, "m": m, "ilf": ilf_now,
                         "ilf_opt": ilf_opt(cum_r, cum_s, joiners)})


def _summary(m, res, stream, policy, cost, joiners, budget) -> dict:
    from joins.online.layouts import GridLayout

    out: dict = dict(joiners=joiners, partitions=res.partitions, tuples=len(stream),
                     r_tuples=stream.n_r, s_tuples=stream.n_s, local_wall_time=res.wall_seconds,
                     calibration_id=cost.calibration_id, cost_model=cost.to_dict())
    if m.empty:
        out.update(outputs=0, batches=0, modeled_time=0.0, max_ilf=0, final_max_ilf=0,
                   final_avg_ilf=0.0, migrations=0, migrated_tuples=0, spilled=0, status="ok",
                   mean_latency_modeled=0.0)
        return out
    bc = batch_costs(m, cost)
    stored = m["r_stored"] + m["s_stored"] + m["pending"]
    last = m[m["batch"] == m["batch"].max()]
    tuples = m.groupby("batch")["tuples"].first()
    over = bool(m["overflow"].any())
    out.update(
        outputs=int(m["outputs"].sum()), batches=int(m["batch"].nunique()),
        modeled_time=float(bc.sum()),
        mean_latency_modeled=float((tuples * bc).sum() / max(1, tuples.sum())),
        max_ilf=int(stored.max()),
        final_max_ilf=int((last["r_stored"] + last["s_stored"]).max()),
        final_avg_ilf=float((last["r_stored"] + last["s_stored"]).mean()),
        final_total_stored=int((last["r_stored"] + last["s_stored"]).sum()),
        migrations=int(len(res.epochs) - 1), migrated_tuples=int(m["migrated"].sum()),
        migration_planned=int(res.epochs["migration_tuples"].sum()),
        spilled=int(m["spilled"].sum()), status="overflow" if over else "ok",
        memory_budget_tuples=budget,
        final_mapping=(int(res.epochs["n"].iloc[-1]), int(res.epochs["m"].iloc[-1])),
    )
    if out["migrated_tuples"] != out["migration_planned"]:
        raise RuntimeError(f"migrated {out['migrated_tuples']} tuples, planned "
                           f"{out['migration_planned']}")
    if isinstance(policy.layout, GridLayout) and len(stream):
        tr = ilf_trace(stream, res.epochs, joiners)
        warm = getattr(policy, "warmup", 0)
        after = tr.iloc[warm:] if warm < len(tr) else tr.iloc[-1:]
        ratio = after["ilf"] / after["ilf_opt"]
        out.update(ilf_final=float(tr["ilf"].iloc[-1]), ilf_opt_final=float(tr["ilf_opt"].iloc[-1]),
                   ilf_ratio_max=float(ratio.max()), ilf_ratio_final=float(ratio.iloc[-1]),
                   ilf_ratio_from_tuple=int(min(warm, len(tr) - 1)))
    return out


def _pandas_output(rels, prefixes, tids: tuple[np.ndarray, ...], phases,
                   produced_at, produced_by=None) -> pd.DataFrame:
    from joins.online.source import TID, nullable_integers

    parts = []
    for rel, prefix, t in zip(rels, prefixes, tids, strict=True):
        if rel.frame is not None:
            f = rel.frame.iloc[t]
        else:
            f = (rel.sdf.toArrow().to_pandas(types_mapper=nullable_integers)
                 .set_index(TID).sort_index().loc[t])
        f = f.reset_index(drop=True)
        f.columns = [prefix + c for c in f.columns]
        parts.append(f)
    out = pd.concat(parts, axis=1)
    out["phase"] = np.asarray(phases, dtype=object) if len(out) else pd.Series([], dtype=object)
    out["produced_at"] = np.asarray(produced_at, dtype=float) if len(out) else \
        pd.Series([], dtype=float)
    if produced_by is not None:  # the unit that produced each row (a worker id)
        out["unit"] = np.asarray(produced_by, dtype=np.int64) if len(out) else \
            pd.Series([], dtype=np.int64)
    return out


def _write_output(spark, rels, prefixes, pairs_dir: Path, output: Path) -> None:
    """Result rows as Parquet: tid tuples joined back to every input's columns (late
    materialisation), with the phase that produced each row and its virtual time."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from joins.api import prefixed
    from joins.online.source import TID

    def sdf(rel):
        if rel.sdf is not None:
            return rel.sdf
        t = pa.Table.from_pandas(rel.frame.assign(**{TID: np.arange(len(rel.frame))}),
                                 preserve_index=False)
        return spark.createDataFrame(t)

    n = len(rels)
    if any(pairs_dir.glob("*.parquet")):
        out = spark.read.parquet(str(pairs_dir))
    else:
        out = spark.createDataFrame([], ", ".join(f"tid_{i} long" for i in range(n)) +
                                    ", phase string, produced_at double")
    cols = []
    for i, (rel, prefix) in enumerate(zip(rels, prefixes, strict=True)):
        side = sdf(rel)
        names = [c for c in side.columns if c != TID]
        sp = prefixed(side.select(TID, *names), prefix)
        out = out.join(sp, out[f"tid_{i}"] == sp[prefix + TID])
        cols += [F.col(prefix + c) for c in names]
    out.select(*cols, F.col("phase"), F.col("produced_at")).write.mode("overwrite") \
        .parquet(str(output))
