"""Experiment kind ``single_site_join``: the DINER paper's operators (DINER and its baselines)
on one pair of timed streams under a memory budget, or (MINER, MJoin) on n timed streams
joined along the edges a generator writes in ``query.json``.

Figure keys: ``workload`` (``generator``, e.g. ``diner_streams``; ``params``; ``sizes`` per
scale), ``run``: ``memory_share`` (the budget as a share of |R| + |S|, the paper's 5%) or
``memory_tuples`` (a fixed budget), ``band`` (a band join ``|r - s| <= band``: DINER and PMJ),
``tick`` (event-time ticks: the engine's micro-batches; the operator processes every arrival
one at a time whatever the tick), ``buffer_limit`` (default true: a run whose input buffer
ever holds more arrivals than the whole memory budget has overflowed, status ``overflow``, as
the paper's RPJ in Fig 16; false: the buffer may grow, Table 3), ``operator_params`` (block
size, MaxNewArr, WaitThresh, the time model's costs...), ``cost_factor`` (default 1: multiplies
the block costs ``c_read``, ``c_write`` and ``c_join``, the time model's sensitivity run). A
series names its operator
(``algorithm``) and may override any of them, the workload's generator and parameters too
(Fig 9 runs three traces).

The operator is one site: one worker of the engine, on an executor. Spark hosts it and
generates nothing here (the inputs are small, written on the driver); no speed-up from Spark is
claimed. Metrics are exact counts of the operator's own run: results of the online phase
(arriving and reactive, up to the last arrival) and of the clean-up; the total is checked
against the exact join size (per-key counts of R and S: the Zipf joins have billions of pairs;
DuckDB's count for n inputs).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.kinds import (
    PointContext,
    PointOutcome,
    point_settings,
    point_spark,
    wall_clock_guard,
)
from experiments.kinds.online_join import band_outputs
from experiments.kinds.query_inputs import join_count, read_query


def _table(folder: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(folder / f"{name}.parquet")


def exact_join_size(r: pd.DataFrame, s: pd.DataFrame, band: float = 0) -> int:
    """|R join S| on ``key`` (``|r - s| <= band``), counted over sorted keys without listing
    pairs (nulls match nothing): the squall kind's band count."""
    def keys(f: pd.DataFrame):
        return f["key"].dropna().astype("int64").to_numpy()

    return band_outputs(keys(r), keys(s), band)


#: the hash-based baselines whose bucket count (``n_part``) the DINER paper does not give
HASH_BASELINES = ("xjoin", "hmj", "rpj")
BUCKET_GRID = (10, 100, 1000)
VALUES_PER_BUCKET = 10


def rule_buckets(frames: dict[str, pd.DataFrame]) -> int:
    """The baselines' bucket count by one written rule: at least ``VALUES_PER_BUCKET`` distinct
    join values per bucket in the relation with fewer of them, on the grid 10, 100, 1,000 (10
    at least). A hash bucket then mixes values, as the DINER paper's account of RPJ and HMJ
    (flushing that "does not take into account data characteristics") presumes; with a bucket
    per value, RPJ's arrival-probability flush keeps exactly the most frequent keys."""
    fewest = min(int(f["key"].dropna().nunique()) for f in frames.values())
    fits = [g for g in BUCKET_GRID if g * VALUES_PER_BUCKET <= fewest]
    return fits[-1] if fits else BUCKET_GRID[0]


def operator_params(run: dict, algorithm: str, frames: dict[str, pd.DataFrame]) -> dict:
    """The operator's parameters: ``run.operator_params``, then the paper's times (``paper_ms``:
    WaitThresh and the block costs in milliseconds) in the figure's time unit
    (``time_unit_ms``), the block costs times ``cost_factor`` (the time model's sensitivity),
    then, for a hash-based baseline without its own ``n_part``, the bucket rule
    (``baseline_buckets: rule``)."""
    params = dict(run.get("operator_params") or {})
    unit = float(run.get("time_unit_ms", 1.0))
    if unit <= 0:
        raise ValueError(f"run.time_unit_ms must be > 0, got {unit}")
    for name, ms in (run.get("paper_ms") or {}).items():
        params.setdefault(name, float(ms) / unit)
    factor = float(run.get("cost_factor", 1.0))
    for cost in ("c_read", "c_write", "c_join"):  # every block cost scaled alike
        if cost in params:
            params[cost] = float(params[cost]) * factor
    if run.get("baseline_buckets") == "rule" and algorithm in HASH_BASELINES:
        params.setdefault("n_part", rule_buckets(frames))
    return params


def run_point(pc: PointContext) -> PointOutcome:
    from datagen import materialize
    from joins.online import run_stream

    s = point_settings(pc)
    wl, run = s["workload"], s["run"]
    params = dict(wl["params"])
    params.setdefault("seed", pc.seed)
    spark, out = point_spark(pc)
    folder = Path(materialize(wl["generator"], params, progress=pc.progress))
    query = read_query(folder)
    if query is not None:  # n inputs joined along edges (MINER's chains and stars)
        frames, on, edges = query
    else:
        frames = {"R": _table(folder, "R"), "S": _table(folder, "S")}
        on = None
    total = sum(len(f) for f in frames.values())
    if run.get("memory_tuples") is not None:  # a fixed memory (Fig 18: 10,000 tuples)
        budget = int(run["memory_tuples"])
    else:
        budget = max(1, int(round(float(run["memory_share"]) * total)))
    op_params = operator_params(run, s["algorithm"], frames)
    with wall_clock_guard(spark, pc.wall_limit_s, f"{pc.figure['id']} {pc.series} x={pc.x}"):
        # the frames already read (for the join size): Spark does not read the files again
        inputs = dict(inputs=frames, on=on) if on else \
            dict(r=frames["R"], s=frames["S"], on="key")
        res = run_stream(spark, **inputs,
                         operator=s["algorithm"], joiners=1, time="t",
                         tick=float(run["tick"]), memory_budget_tuples=budget,
                         seed=int(params["seed"]), progress=pc.progress, partitions=1,
                         band=run.get("band"), **op_params)
    m = res.metrics

    def col(name: str) -> float:
        return float(m[name].fillna(0).sum()) if name in m else 0.0

    arriving, reactive = col("outputs_arriving"), col("outputs_reactive")
    outputs = col("outputs")
    online = arriving + reactive
    last = m.iloc[-1]
    if on:
        expected = join_count(folder, frames, edges)
    else:
        expected = exact_join_size(frames["R"], frames["S"], run.get("band") or 0)
    out.metrics.update({
        "online_results": (online, "rows"),
        "arriving_results": (arriving, "rows"),
        "reactive_results": (reactive, "rows"),
        "cleanup_results": (outputs - online, "rows"),
        "total_results": (outputs, "rows"),
        "online_share": (online / outputs if outputs else float("nan"), "share of results"),
        "memory_budget_tuples": (budget, "tuples"),
        **({"n_part": (float(op_params["n_part"]), "buckets")} if "n_part" in op_params else {}),
        **({"wait_thresh": (float(op_params["wait_thresh"]), "virtual time units")}
           if "wait_thresh" in op_params else {}),
        "memory_max": (float(last.get("memory_max", 0)), "tuples"),
        "reactive_episodes": (float(last.get("reactive_episodes", 0)), "count"),
        "buffer_at_handover_max": (float(last.get("buffer_at_handover_max", 0)), "tuples"),
        "buffer_at_handover_mean": (
            float(last.get("buffer_at_handover_sum", 0)) / float(last.get("handovers", 0))
            if last.get("handovers", 0) else float("nan"), "tuples"),
        "buffer_max": (float(last.get("buffer_max", 0)), "tuples"),
        "blocks_written": (float(last.get("blocks_written", 0)), "count"),
        "blocks_read": (float(last.get("blocks_read", 0)), "count"),
        "virtual_end": (float(last.get("clock", float("nan"))), "virtual time units"),
        "input_tuples": (total, "tuples"),
        **({} if on else {"r_tuples": (len(frames["R"]), "tuples"),
                          "s_tuples": (len(frames["S"]), "tuples")}),
        **({"index_entries_max": (float(last["index_entries_max"]), "entries")}
           if "index_entries_max" in last else {}),
        "local_wall_time": (float(res.summary["local_wall_time"]), "local wall s"),
        "oracle_rows": (expected, "rows"),
    })
    normal = m[m["phase"] == "normal"].reindex(
        columns=["t1", "outputs_arriving", "outputs_reactive"])
    cumulative = normal[["outputs_arriving", "outputs_reactive"]].fillna(0).sum(axis=1).cumsum()
    out.series_rows = [{"metric": "cumulative_online_results", "t": float(t1),
                        "value": float(v), "unit": "rows"}
                       for t1, v in zip(normal["t1"], cumulative, strict=True)]
    if run.get("buffer_limit", True) and float(last.get("buffer_max", 0)) > budget:
        out.status = "overflow"  # the results stay: the run went on as if the buffer grew
        out.error = (f"the input buffer reached {int(last.get('buffer_max', 0))} arrivals, more "
                     f"than the memory of {budget} tuples")
    if int(outputs) != expected:
        out.status = "error"
        out.error = f"the operator produced {int(outputs)} results, the join has {expected}"
    return out
