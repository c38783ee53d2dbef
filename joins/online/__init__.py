"""The online (streaming) join engine on Spark and the operators of the Squall paper.

``run_stream`` is the one entry point: it reads R and S (pandas, Spark DataFrames or Parquet
paths), orders their arrivals, runs an operator of the registry (kind "online") through the
micro-batch engine (:mod:`joins.online.engine`) and returns exact per-micro-batch, per-worker
counts, the epochs (mapping versions), a summary with modeled and local wall time, and
optionally the result rows (``l_*`` = R's columns, ``r_*`` = S's columns).
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
from joins.online.kernel import Equi

__all__ = ["StreamResult", "run_stream", "CostModel"]


@dataclass
class StreamResult:
    metrics: pd.DataFrame  # one row per micro-batch and worker
    epochs: pd.DataFrame  # one row per epoch (mapping version)
    summary: dict
    output: pd.DataFrame | None
    decisions: pd.DataFrame | None = None  # every trigger firing (also those keeping the map)


def _factory(operator):
    """A registry name (kind "online"), or a factory callable (extension operators, tests)."""
    from joins import registry

    if callable(operator):
        return operator
    return registry.get(operator, "online").load()


def run_stream(spark, r, s, *, operator: str, joiners: int, on: str = "key",
               band: float | None = None, order: str = "random", k: float | None = None,
               seed: int = 0, controller: str = "exact", batch_size: int = 50_000,
               memory_budget_tuples: int | None = None, spill: str = "charge",
               cost: CostModel | None = None, output: str | Path | None = None,
               collect_output: bool = False, progress: bool = True,
               partitions: int | None = None, checkpoint_every: int = 10,
               migration_rate: float = 2.0, order_params: dict | None = None,
               backend: str = "spark", transport: str = "broadcast",
               predicate=None, **operator_params) -> StreamResult:
    """Stream R and S through an online join operator on Spark.

    ``partitions``: Spark partitions holding the J logical workers (default: the
    application's cores, at most J; about one per core is the efficient shape).
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
    """
    from joins.online import source
    from joins.online.engine import Engine
    from joins.online.worker import RunConfig

    if joiners < 1:
        raise ValueError(f"joiners must be >= 1, got {joiners}")
    if spill not in ("charge", "disk", "evict"):
        raise ValueError(f"spill must be charge, disk or evict, got {spill!r}")
    if band is not None and band < 0:
        raise ValueError(f"band must be >= 0, got {band}")
    if predicate is not None and band is not None:
        raise ValueError("give band= or predicate=, not both")
    factory = _factory(operator)
    cost = cost or CostModel()
    rel_r = source.load(spark, r, on, "R")
    rel_s = source.load(spark, s, on, "S")
    stream = source.build_stream(rel_r, rel_s, order=order, seed=seed, k=k, band=band,
                                 order_params=order_params)
    policy = factory(joiners, n_r=stream.n_r, n_s=stream.n_s, seed=seed, controller=controller,
                     band=band, **operator_params)
    if predicate is not None and not isinstance(predicate, Equi) and \
            policy.layout.kind == "hash":
        raise ValueError(f"a {predicate.name} predicate needs content-insensitive routing "
                         "(grid or biclique); hash routing only meets equal keys")
    parts = partitions or max(1, min(joiners, executor_cores(spark)))
    from runtime.paths import ONLINE_SCRATCH

    run_id = uuid.uuid4().hex[:12]
    pairs_dir = None
    if output is not None:
        pairs_dir = Path(tempfile.mkdtemp(prefix=f"pairs-{run_id}-", dir=_mk(ONLINE_SCRATCH)))
    spill_dir = _mk(ONLINE_SCRATCH / f"spill-{run_id}") if spill != "charge" else None
    cfg = RunConfig(band=band, predicate=predicate, want_pairs=collect_output,
                    pairs_dir=str(pairs_dir) if pairs_dir else None,
                    budget_tuples=memory_budget_tuples, spill=spill,
                    spill_dir=str(spill_dir) if spill_dir else None)
    engine = Engine(spark, stream, policy, batch_size=batch_size, partitions=parts, config=cfg,
                    migration_rate=migration_rate, checkpoint_every=checkpoint_every,
                    progress=progress, backend=backend,
                    transport=transport)
    res = engine.run()
    if spill_dir is not None:
        shutil.rmtree(spill_dir, ignore_errors=True)
    metrics = _with_cost(res.metrics, cost)
    summary = _summary(metrics, res, stream, policy, cost, joiners, memory_budget_tuples)
    summary.update(operator=operator if isinstance(operator, str) else
                   getattr(operator, "__name__", "custom"), on=on, band=band, order=order, k=k, seed=seed,
                   controller=controller, batch_size=batch_size, spill=spill)
    out_df = None
    if collect_output:
        out_df = _pandas_output(rel_r, rel_s, *res.pairs)
    if output is not None:
        _write_output(spark, rel_r, rel_s, pairs_dir, Path(output))
        shutil.rmtree(pairs_dir, ignore_errors=True)
    return StreamResult(metrics, res.epochs, summary, out_df, res.decisions)


def executor_cores(spark) -> int:
    """Task slots of the application: about one partition per core is the efficient shape
    (notes/engine-measurements.md), whatever spark.default.parallelism says."""
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


def _pandas_output(rel_r, rel_s, r_tid: np.ndarray, s_tid: np.ndarray) -> pd.DataFrame:
    from joins.online.source import TID

    def frame(rel):
        if rel.frame is not None:
            return rel.frame
        f = rel.sdf.toPandas().set_index(TID).sort_index()
        return f

    fr, fs = frame(rel_r), frame(rel_s)
    left = (fr.iloc[r_tid] if rel_r.frame is not None else fr.loc[r_tid]).reset_index(drop=True)
    right = (fs.iloc[s_tid] if rel_s.frame is not None else fs.loc[s_tid]).reset_index(drop=True)
    left.columns = ["l_" + c for c in left.columns]
    right.columns = ["r_" + c for c in right.columns]
    return pd.concat([left, right], axis=1)


def _write_output(spark, rel_r, rel_s, pairs_dir: Path, output: Path) -> None:
    """Result rows as Parquet: pairs of tids joined back to both relations' columns."""
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

    if any(pairs_dir.glob("*.parquet")):
        pairs = spark.read.parquet(str(pairs_dir))
    else:
        pairs = spark.createDataFrame([], "r_tid long, s_tid long")
    left, right = sdf(rel_r), sdf(rel_s)
    lcols = [c for c in left.columns if c != TID]
    rcols = [c for c in right.columns if c != TID]
    lp = prefixed(left.select(TID, *lcols), "l_")
    rp = prefixed(right.select(TID, *rcols), "r_")
    out = (pairs.join(lp, pairs["r_tid"] == lp["l_" + TID])
           .join(rp, pairs["s_tid"] == rp["r_" + TID])
           .select(*[F.col("l_" + c) for c in lcols], *[F.col("r_" + c) for c in rcols]))
    out.write.mode("overwrite").parquet(str(output))
