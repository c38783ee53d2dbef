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

from joins.online.controller import ilf_opt
from joins.online.cost import CostModel
from joins.online.spec import StreamSpec

__all__ = ["StreamResult", "StreamSpec", "run_stream", "CostModel"]


@dataclass
class StreamResult:
    metrics: pd.DataFrame  # one row per micro-batch and worker
    epochs: pd.DataFrame  # one row per epoch (mapping version)
    summary: dict
    output: pd.DataFrame | None
    decisions: pd.DataFrame | None = None  # every trigger firing (also those keeping the map)


def run_stream(spark, r=None, s=None, **options) -> StreamResult:
    """Stream two inputs (``r``, ``s``) or any number (``inputs={name: data}``) through an
    online join operator on Spark: ``run_stream(spark, spec)`` with a :class:`StreamSpec`, or
    its fields as keywords (``operator=``, ``joiners=``, the options :class:`StreamSpec`
    documents; every other keyword is the operator's own parameter). The spec is validated
    when it is built; the operator's policy and program are checked against the inputs'
    sizes (:meth:`StreamSpec.plan`) before any step runs."""
    from joins.online.engine import remove_checkpoint

    if isinstance(r, StreamSpec):
        if s is not None or options:
            raise TypeError("run_stream(spark, spec) takes no other inputs or options")
        spec = r
    else:
        spec = StreamSpec.of(r, s, **options)
    reliable = spec.reliable(spark)
    if reliable:  # the inputs' checkpoints: a fresh subfolder, deleted after the run
        spark.sparkContext.setCheckpointDir(str(spec.checkpoint_dir))
        inputs_ckpt = spark.sparkContext.getCheckpointDir()
    try:
        rels, stream = _load_stream(spark, spec, reliable)
        key_range = _key_range(stream.key) if spec.band is not None else None
        policy, program = spec.plan(stream.n_r, stream.n_s, key_range)
        res, pairs_dir = _run_engine(spark, spec, stream, policy, program, reliable)
        return _result(spark, spec, rels, stream, policy, program, res, pairs_dir, reliable)
    finally:
        if reliable:
            remove_checkpoint(spark, inputs_ckpt)


def _load_stream(spark, spec: StreamSpec, reliable: bool):
    """The inputs as relations (composite keys folded in) and their arrival order."""
    from joins.online import source

    graph = spec.graph
    rels = [source.load(spark, d, graph.columns(i), spec.names[i], spec.time, reliable)
            for i, d in enumerate(spec.data)]
    source.add_composite_keys(rels, graph)
    stream = source.build_stream(rels, order=spec.order, seed=spec.seed, k=spec.k,
                                 band=spec.band, order_params=spec.order_params, graph=graph)
    return rels, stream


def _run_engine(spark, spec: StreamSpec, stream, policy, program, reliable: bool):
    """The engine's run of ``policy`` and ``program`` over ``stream``, with the run's scratch
    folders (result pairs for ``output=``, kept for :func:`_result`; spilled state, removed
    with the run, failed or not)."""
    from joins.online.engine import Engine
    from joins.online.worker import RunConfig
    from runtime.paths import ONLINE_SCRATCH

    parts = spec.partitions or max(1, min(spec.joiners, executor_cores(spark)))
    run_id = uuid.uuid4().hex[:12]
    pairs_dir = None
    if spec.output is not None:
        pairs_dir = Path(tempfile.mkdtemp(prefix=f"pairs-{run_id}-", dir=_mk(ONLINE_SCRATCH)))
    spill_dir = _mk(ONLINE_SCRATCH / f"spill-{run_id}") \
        if spec.spill != "charge" or program.uses_disk else None
    cfg = RunConfig(band=spec.band, predicate=spec.predicate, want_pairs=spec.collect_output,
                    pairs_dir=str(pairs_dir) if pairs_dir else None,
                    budget_tuples=spec.memory_budget_tuples, spill=spec.spill,
                    spill_dir=str(spill_dir) if spill_dir else None, window=spec.window,
                    archive=spec.archive, delay=spec.delay, program=program,
                    inputs=len(spec.names), edges=spec.graph.edges)
    engine = Engine(spark, stream, policy, batch_size=spec.batch_size, partitions=parts,
                    config=cfg, migration_rate=spec.migration_rate,
                    checkpoint_every=spec.checkpoint_every, progress=spec.progress,
                    backend=spec.backend, transport=spec.transport, tick=spec.tick,
                    checkpoint_dir=str(spec.checkpoint_dir) if reliable else None,
                    step_tuples=spec.step_tuples)
    try:
        return engine.run(), pairs_dir
    finally:  # the run's files go with it, failed or not
        if spill_dir is not None:
            shutil.rmtree(spill_dir, ignore_errors=True)


def _result(spark, spec: StreamSpec, rels, stream, policy, program, res, pairs_dir,
            reliable: bool) -> StreamResult:
    """Metrics with their modeled cost, the summary, and the result rows asked for."""
    names, cost = spec.names, spec.cost_model
    metrics = _with_cost(_named(res.metrics, names), cost)
    if spec.tuple_bytes is not None:
        metrics["mlv_bytes"] = sum(b * metrics[f"stored_{nm}"]
                                   for b, nm in zip(spec.tuple_bytes, names, strict=True))
    summary = _summary(metrics, res, stream, policy, cost, spec.joiners,
                       spec.memory_budget_tuples)
    summary.update(**spec.summary(), program=program.name)
    if reliable:
        summary["reliable_checkpoints"] = len(res.checkpoints)
    out_df = None
    if spec.collect_output:
        out_df = _pandas_output(rels, spec.prefixes, res.pairs, res.phases, res.produced_at,
                                res.produced_by)
    if spec.output is not None:
        _write_output(spark, rels, spec.prefixes, pairs_dir, Path(spec.output))
        shutil.rmtree(pairs_dir, ignore_errors=True)
    return StreamResult(metrics, res.epochs, summary, out_df, res.decisions)


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
