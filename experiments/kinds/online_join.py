"""One point of an online (streaming) join figure: materialise the inputs, stream them through
an online operator (``joins.online.run_stream``) on Spark, and turn its exact per-micro-batch,
per-worker counts into the figure's scalar metrics and within-run time series.

Settings come from the figure config (see ``conf/figure/squall/*.yaml``):

* ``workload``: ``generator`` (e.g. ``squall_query``), ``params`` (+ ``sizes`` per scale, which
  must carry ``sf`` when a rule scales with it); band joins take their band from the query.
* ``run``: ``joiners``, ``order`` (``random`` | ``fluct``), ``k``, ``controller`` (``exact`` |
  ``sampled``), ``micro_batches`` (the micro-batch is the stream's size divided by it,
  rounded up: one rule for every figure, see ``conf/figure_base/squall_online.yaml``),
  ``batch_scale`` (multiplies that micro-batch: the sensitivity runs), ``batch_size`` (a fixed
  micro-batch instead), ``partitions``, ``tuple_bytes`` (modeled bytes per stored tuple),
  ``warmup_fraction`` (DYNAMIC's warm-up as a share of the stream; a ``warmup_tuples`` rule
  wins), ``weak_factor`` (multiplies sf and joiners together: weak scaling; with
  ``weak_batches: true`` also ``batch_size``, so every joiner gets as many tuples per
  micro-batch at every factor),
  ``memory_budget_factor`` (multiplies the scaled budget: the out-of-core runs),
  ``migration_rate``, ``operator_params``, ``samples`` (points of the ILF/ILF* trace).
* ``rules``: ``memory_budget_bytes`` per joiner (the paper's 2 GB heap, scaled with the data by
  ``experiments.figure_spec.scaled_rule``), optionally ``warmup_tuples``, and
  ``band_outputs_per_input`` (per band query: the band is widened until the join has that
  many results per input tuple, the paper's computation intensity; :func:`intensity_band`).

Time is the engine's *modeled time* (calibrated linear costs of the exact counts, the slowest
worker per micro-batch, summed); local wall time is reported next to it, never instead of it.
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.figure_spec import scaled_rule
from experiments.kinds import (
    STEP_TUPLES,
    PointContext,
    PointOutcome,
    point_settings,
    point_spark,
    wall_clock_guard,
)
from joins.calibrated import cost_model
from runtime.cost_model import r_squared

TIME_SERIES_UNITS = {
    "max_ilf_t": "tuples", "avg_ilf_t": "tuples", "max_ilf_mb_t": "modeled MB",
    "modeled_time_t": "modeled s", "local_wall_time_t": "local wall s", "migrating_t": "flag",
    "ratio_rs_t": "|R|/|S|", "ilf_ratio_t": "ILF/ILF*", "migration_t": "fraction of input",
    "warmup_end_t": "flag",
}


def stream_batch_size(run: dict, total: int) -> int:
    """Tuples per micro-batch: ``batch_size`` if the run fixes one (times the weak factor under
    ``weak_batches``), else the stream divided into ``micro_batches`` (rounded up); either
    times ``batch_scale`` (1 by default; the sensitivity runs use 0.5 and 2)."""
    scale = float(run.get("batch_scale", 1) or 1)
    if run.get("batch_size") is not None:
        base = float(run["batch_size"])
    else:
        base = math.ceil(max(1, total) / int(run.get("micro_batches", 20)))
    return max(1, int(round(base * scale)))


def band_outputs(r_keys: np.ndarray, s_keys: np.ndarray, band: int) -> int:
    """|{(r, s): |r - s| <= band}| on integer keys, from the sorted S keys."""
    s_sorted = np.sort(s_keys)
    lo = np.searchsorted(s_sorted, r_keys - band, "left")
    hi = np.searchsorted(s_sorted, r_keys + band, "right")
    return int((hi - lo).sum())


def intensity_band(folder: Path, band: int, outputs_per_input: float) -> int:
    """The smallest band >= the query's own whose join has at least ``outputs_per_input``
    results per input tuple (all pairs if no band reaches it), cached next to the inputs.

    The paper's B_CI yields about 1,036 results per input at 10G (54.206 billion for 52.338M
    tuples); with the band fixed, results per input shrink with the data (they grow like |R|),
    so at a reduced scale the band is widened by this one rule instead."""
    import pyarrow.dataset as ds

    def keys(table: str) -> np.ndarray:
        return ds.dataset(str(folder / f"{table}.parquet"), format="parquet").to_table(
            columns=["key"]).column("key").to_numpy().astype(np.int64)

    cache = folder / f"intensity-band{band}-{outputs_per_input:g}.json"
    if cache.exists():
        return int(json.loads(cache.read_text())["band"])
    r, s = keys("R"), keys("S")
    need = outputs_per_input * (len(r) + len(s))
    lo, hi = int(band), int(max(r.max(), s.max()) - min(r.min(), s.min())) if len(r) and len(
        s) else int(band)
    if band_outputs(r, s, lo) < need:
        while hi - lo > 1:  # band_outputs(lo) < need <= band_outputs(hi), or hi = all pairs
            mid = (lo + hi) // 2
            if band_outputs(r, s, mid) >= need:
                hi = mid
            else:
                lo = mid
        lo = hi
    tmp = cache.with_suffix(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps({"band": lo}))
    tmp.replace(cache)
    return lo


def query_band(generator: str, params: dict) -> float | None:
    """The band of a band join (|R.key - S.key| <= band), None for an equi-join."""
    if generator != "squall_query":
        return params.get("band")
    from datagen.squall_query import QUERIES

    q = QUERIES[params.get("query", "eq5")]
    return float(q.band) if q.predicate == "band" else None


def _rows(folder: Path, table: str) -> int:
    import pyarrow.dataset as ds

    return int(ds.dataset(str(folder / f"{table}.parquet"), format="parquet").count_rows())


def oracle_rows(folder: Path, band: float | None) -> int:
    """DuckDB's exact |R join S| (equi or band), cached next to the generated inputs."""
    from joins.oracle import oracle_count

    cache = folder / f"oracle-R-S-key-inner-band{band}.json"
    if cache.exists():
        return int(json.loads(cache.read_text())["rows"])
    rows = oracle_count(folder / "R.parquet", folder / "S.parquet", "key", "inner", band=band)
    tmp = cache.with_suffix(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps({"rows": rows}))
    tmp.replace(cache)
    return rows


def arrival_is_r(order: str, n_r: int, n_s: int, seed: int, k: float | None) -> np.ndarray:
    """The arrival order the engine used (same generator, same seed), for the exact ILF trace."""
    from datagen.orders import compute_arrival

    params = {"k": k} if k is not None else {}
    return compute_arrival(order, n_r, n_s, seed, **params).is_r


def ilf_trace(is_r: np.ndarray, epochs: pd.DataFrame, joiners: int) -> pd.DataFrame:
    """Per tuple: |R|, |S|, the current epoch's (n,m), its ILF and the oracle's ILF*."""
    from joins.online.controller import ilf_opt

    cum_r = np.cumsum(is_r)
    cum_s = np.arange(1, len(is_r) + 1) - cum_r
    starts = epochs["start_tuple"].to_numpy()
    ep = np.searchsorted(starts, np.arange(len(is_r)), "right") - 1
    n, m = epochs["n"].to_numpy()[ep], epochs["m"].to_numpy()[ep]
    ilf = cum_r / n + cum_s / m
    return pd.DataFrame({"r": cum_r, "s": cum_s, "ilf": ilf,
                         "ilf_opt": ilf_opt(cum_r, cum_s, joiners)})


def _trace_rows(trace: pd.DataFrame, warm: int, samples: int) -> list[dict]:
    """ILF/ILF* and |R|/|S| at evenly spaced tuples plus both sides of every epoch change,
    so no peak between samples is hidden (the per-tuple maximum is a scalar metric)."""
    total = len(trace)
    idx = set(np.linspace(0, total - 1, min(samples, total)).astype(int).tolist())
    ratio = (trace["ilf"] / trace["ilf_opt"]).to_numpy()
    jumps = np.flatnonzero(np.diff(ratio) != 0)
    if len(jumps) > 4 * samples:  # ratio changes at every tuple: keep the local peaks
        jumps = jumps[np.argsort(-ratio[jumps])[: 2 * samples]]
    idx |= set(jumps.tolist()) | set((jumps + 1).tolist())
    rows = []
    for i in sorted(i for i in idx if i < total):
        t = (i + 1) / total
        s = trace["s"].iat[i]
        if s > 0:
            rows.append({"metric": "ratio_rs_t", "t": t, "value": trace["r"].iat[i] / s})
        rows.append({"metric": "ilf_ratio_t", "t": t, "value": ratio[i],
                     "after_warmup": i >= warm})
    return [{k: v for k, v in r.items() if k != "after_warmup"} for r in rows]


def batch_cost(metrics: pd.DataFrame, cost, overhead: bool) -> pd.Series:
    """Modeled seconds per micro-batch: the slowest worker's calibrated cost of its counts,
    plus, when ``overhead``, the per-batch constants (fixed scheduling cost and the cost per
    worker per batch).

    The squall figures leave the constants out by default (``run.batch_overhead``): Squall
    on Storm processes tuple at a time, and at reduced scale the number of micro-batches is
    chosen for this machine's speed, so per-batch constants would measure that choice."""
    from dataclasses import replace

    if metrics.empty:
        return pd.Series(dtype=float)
    model = cost if overhead else replace(cost, fixed_per_batch=0.0, per_worker=0.0)
    per_worker = model.worker_cost(metrics)
    return model.fixed_per_batch + per_worker.groupby(metrics["batch"]).max()


def batch_series(metrics: pd.DataFrame, bc: pd.Series, total: int,
                 tuple_bytes: float) -> list[dict]:
    """Per micro-batch: physical max/avg stored per worker (old and new data coexist during a
    migration), cumulative modeled and local wall time, and whether a migration runs."""
    if metrics.empty:
        return []
    m = metrics.assign(stored=metrics["r_stored"] + metrics["s_stored"] + metrics["pending"])
    g = m.groupby("batch")
    seen = (g["r_seen"].first() + g["s_seen"].first()) / max(1, total)
    per = pd.DataFrame({
        "t": seen,
        "max_ilf_t": g["stored"].max(),
        "avg_ilf_t": g["stored"].mean(),
        "modeled_time_t": bc.cumsum(),
        "local_wall_time_t": g["batch_wall_seconds"].first().cumsum(),
        "migrating_t": g["migrating"].first().astype(float),
    })
    per["max_ilf_mb_t"] = per["max_ilf_t"] * tuple_bytes / 1e6
    rows = []
    for _, r in per.iterrows():
        for name in ("max_ilf_t", "avg_ilf_t", "max_ilf_mb_t", "modeled_time_t",
                     "local_wall_time_t", "migrating_t"):
            rows.append({"metric": name, "t": float(r["t"]), "value": float(r[name])})
    return rows


def migration_rows(epochs: pd.DataFrame, metrics: pd.DataFrame, total: int) -> list[dict]:
    """One row per migration: t = fraction of input at the decision, value = fraction at which
    every joiner finished (the engine finalises at the start of ``migration_end_batch``)."""
    if len(epochs) < 2 or metrics.empty:
        return []
    g = metrics.groupby("batch")
    seen = (g["r_seen"].first() + g["s_seen"].first()).to_dict()
    rows = []
    for _, e in epochs.iloc[1:].iterrows():
        end_batch = int(e["migration_end_batch"])
        end = seen.get(end_batch - 1, total) if end_batch >= 0 else total
        rows.append({"metric": "migration_t", "t": float(e["start_tuple"]) / total,
                     "value": float(end) / total})
    return rows


def linear_fit(series_rows: list[dict], metric: str) -> tuple[float, float]:
    """Least-squares slope per 1% of input of a per-batch series that starts at 0 (nothing is
    stored and no time has passed before the input), and the fit's R^2 (linearity)."""
    pts = [(0.0, 0.0)] + [(r["t"] * 100, r["value"]) for r in series_rows
                          if r["metric"] == metric]
    x, y = np.array(pts).T
    if len(set(x)) < 2:
        return float("nan"), float("nan")
    coef = np.polyfit(x, y, 1)
    return float(coef[0]), r_squared(y, np.polyval(coef, x))


def growth_slope(series_rows: list[dict], metric: str = "max_ilf_mb_t") -> float:
    """Fig 5a's growth rate: modeled MB of the max ILF per 1% of input."""
    return linear_fit(series_rows, metric)[0]


def _settings(pc: PointContext) -> tuple[dict, dict, dict]:
    s = point_settings(pc)
    wl, run = s["workload"], s["run"]
    params = dict(wl["params"])
    # per-x workload parameters, e.g. Fig 5b's Zipf z: Z4 for E_Q5/E_Q7, Z0 for the band joins
    params.update((wl.get("params_by_x") or {}).get(str(pc.x), {}))
    params.setdefault("seed", pc.seed)
    factor = float(run.get("weak_factor", 1) or 1)
    if factor != 1:
        params["sf"] = float(params["sf"]) * factor
    if run.get("batch_size") is not None:
        run = {**run, "batch_size": weak_batch_size(run, factor)}
    return s, wl, {**run, "params": params, "weak_factor": factor, "algorithm": s["algorithm"]}


def inputs(pc: PointContext) -> tuple[str, dict[str, Any]]:
    """The generator and parameters of this point's R and S (what ``make data`` prepares)."""
    _, wl, run = _settings(pc)
    return wl["generator"], run["params"]


def weak_batch_size(run: dict, factor: float) -> int:
    """Tuples per micro-batch; under ``weak_batches`` times the weak-scaling factor, since the
    modeled time sums each micro-batch's slowest joiner and a fixed batch spread over more
    joiners has a slowest joiner further above the mean."""
    return max(1, int(round(int(run["batch_size"]) * (factor if run.get("weak_batches") else 1))))


def run_point(pc: PointContext) -> PointOutcome:
    from datagen import materialize
    from joins.online import run_stream

    _, wl, run = _settings(pc)
    params, algorithm, factor = run["params"], run["algorithm"], run["weak_factor"]
    joiners = int(round(int(run["joiners"]) * factor))
    band = query_band(wl["generator"], params)
    if band is not None and algorithm in ("shj", "relocating_shj"):
        # the paper runs SHJ on the equi-joins only; the point is recorded as not applicable
        return PointOutcome(status="n/a", error=f"{algorithm} is an equi-join operator; "
                            f"{params.get('query')} is a band join")
    spark, out = point_spark(pc)
    folder = Path(materialize(*inputs(pc), spark=spark, progress=pc.progress))
    n_r, n_s = _rows(folder, "R"), _rows(folder, "S")
    total = n_r + n_s
    batch_size = stream_batch_size(run, total)
    rules, sizes = pc.figure.get("rules", {}), pc.figure["workload"]["sizes"]
    intensity = (rules.get("band_outputs_per_input") or {}).get(str(params.get("query")))
    if isinstance(intensity, dict):  # per scale: {small: 1036}; none at the paper's own scale
        intensity = intensity.get(pc.scale)
    if band is not None and intensity is not None:
        band = float(intensity_band(folder, int(band), float(intensity)))
    tuple_bytes = float(run.get("tuple_bytes", 200))
    budget_bytes = scaled_rule(rules, "memory_budget_bytes", pc.scale, sizes)
    budget = None
    if budget_bytes is not None:
        budget = max(1, int(budget_bytes * float(run.get("memory_budget_factor", 1))
                            / tuple_bytes))
    op_params = dict(run.get("operator_params") or {})
    warm = 0
    if algorithm == "dynamic":
        rule = scaled_rule(rules, "warmup_tuples", pc.scale, sizes)
        warm = int(math.ceil(rule * factor if rule is not None else
                             float(run.get("warmup_fraction", 0.01)) * total))
        # The engine's controller cannot react faster than a micro-batch (a decision waits for
        # the running migration, which ends at a batch boundary), so a warm-up much shorter
        # than a batch would measure the batch size, not Algorithm 2.
        warm = max(warm, int(math.ceil(float(run.get("warmup_min_batches", 0))
                                       * batch_size)))
        op_params.setdefault("warmup", warm)
        warm = int(op_params["warmup"])
    order, k = run.get("order", "random"), run.get("k")
    k = float(k) if k is not None else None
    cost = cost_model(pc.calibration, run)

    with wall_clock_guard(spark, pc.wall_limit_s, f"{pc.figure['id']} {pc.series} x={pc.x}"):
        res = run_stream(spark, str(folder / "R.parquet"), str(folder / "S.parquet"),
                         operator=algorithm, joiners=joiners, on="key", band=band, order=order,
                         k=k, seed=int(params["seed"]),
                         controller=run.get("controller", "exact"),
                         batch_size=batch_size, memory_budget_tuples=budget,
                         spill=run.get("spill", "charge"), cost=cost, progress=pc.progress,
                         partitions=run.get("partitions"),
                         migration_rate=float(run.get("migration_rate", 2.0)),
                         step_tuples=STEP_TUPLES, **op_params)

    sm = res.summary
    mt = out.metrics
    bc = batch_cost(res.metrics, cost, bool(run.get("batch_overhead", False)))
    modeled = float(bc.sum())
    per_batch = res.metrics.groupby("batch")["tuples"].first() if len(bc) else bc
    latency = float((per_batch * bc).sum() / max(1, per_batch.sum())) if len(bc) else 0.0
    mt.update({
        "joiners": (joiners, "joiners"), "r_tuples": (n_r, "tuples"), "s_tuples": (n_s, "tuples"),
        "modeled_time": (modeled, "modeled s"),
        "local_wall_time": (float(sm["local_wall_time"]), "local wall s"),
        "throughput": (total / modeled if modeled > 0 else float("nan"),
                       "tuples per modeled s"),
        "modeled_time_with_batch_overhead": (float(sm["modeled_time"]), "modeled s"),
        # a tuple waits for the micro-batch it arrives in: the batch's modeled duration,
        # averaged over tuples
        "latency_ms": (1e3 * latency, "modeled ms"),
        "max_ilf": (sm["max_ilf"], "tuples"),
        "final_max_ilf": (sm["final_max_ilf"], "tuples"),
        "final_avg_ilf": (sm["final_avg_ilf"], "tuples"),
        "final_avg_ilf_mb": (sm["final_avg_ilf"] * tuple_bytes / 1e6, "modeled MB"),
        "cluster_storage_tuples": (sm.get("final_total_stored", 0), "tuples"),
        "cluster_storage_gb": (sm.get("final_total_stored", 0) * tuple_bytes / 1e9,
                               "modeled GB"),
        "migrations": (sm["migrations"], "count"),
        "migrated_tuples": (sm["migrated_tuples"], "tuples"),
        "spilled": (sm["spilled"], "tuples"),
        "batches": (sm["batches"], "count"),
        "batch_size": (batch_size, "tuples"),
        "output_rows": (sm["outputs"], "rows"),
        "warmup_tuples": (warm, "tuples"),
        "cost_per_received": (cost.per_received, "s"),
        "cost_per_disk_probe": (cost.per_disk_probe, "s"),
    })
    if band is not None:
        mt["band"] = (band, "key units")
    if run.get("disk_cost_factor") is not None:
        mt["disk_cost_factor"] = (float(run["disk_cost_factor"]), "x in-memory tuple cost")
    if budget is not None:
        mt["memory_budget_tuples"] = (budget, "tuples")
    if "final_mapping" in sm:
        mt["final_n"] = (sm["final_mapping"][0], "rows of grid")
        mt["final_m"] = (sm["final_mapping"][1], "columns of grid")
    rows = batch_series(res.metrics, bc, total, tuple_bytes)
    slope, r2 = linear_fit(rows, "max_ilf_mb_t")
    mt["max_ilf_growth_mb_per_pct"] = (slope, "modeled MB per 1% input")
    mt["max_ilf_growth_r2"] = (r2, "R^2")
    mt["time_linearity_r2"] = (linear_fit(rows, "modeled_time_t")[1], "R^2")
    rows += migration_rows(res.epochs, res.metrics, total)
    if sm.get("final_mapping", (0, 0))[0] > 0 and total:  # a grid operator: epoch ILF trace
        is_r = arrival_is_r(order, n_r, n_s, int(params["seed"]), k)
        trace = ilf_trace(is_r, res.epochs, joiners)
        if not res.metrics.empty:  # the re-derived order must be the engine's
            last = res.metrics[res.metrics["batch"] == res.metrics["batch"].max()]
            if int(last["r_seen"].iat[0]) != int(trace["r"].iat[-1]):
                raise RuntimeError("re-derived arrival order disagrees with the engine's")
        ratio = trace["ilf"] / trace["ilf_opt"]
        after = ratio.iloc[min(warm, total - 1):]
        mt["ilf_ratio_max"] = (float(after.max()), "ILF/ILF*")
        mt["ilf_ratio_final"] = (float(ratio.iloc[-1]), "ILF/ILF*")
        mt["ilf_final"] = (float(trace["ilf"].iloc[-1]), "tuples")
        mt["ilf_opt_final"] = (float(trace["ilf_opt"].iloc[-1]), "tuples")
        if int(run.get("samples", 400)) > 0:
            rows += _trace_rows(trace, warm, int(run.get("samples", 400)))
            rows.append({"metric": "warmup_end_t", "t": min(warm, total) / total, "value": 1.0})
    out.series_rows = [{**r, "unit": TIME_SERIES_UNITS[r["metric"]]} for r in rows]

    expected = oracle_rows(folder, band)
    mt["oracle_rows"] = (expected, "rows")
    if int(sm["outputs"]) != expected:
        out.status = "error"
        out.error = f"output has {sm['outputs']} rows, DuckDB oracle has {expected}"
    elif sm["status"] != "ok":
        out.status = sm["status"]  # overflow: the paper's asterisk (spill charged)
    return out
