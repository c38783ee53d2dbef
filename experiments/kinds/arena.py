"""Experiment kind ``arena`` (beyond the papers): every online operator on the same stream,
under one equal-resources rule, measured by one time model and checked row by row.

A point is one operator (the series' ``algorithm`` and ``run.operator_params``) at one x. Every
series of a figure reads the same generated inputs (the workload's generator and parameters,
seed included, are the figure's; a series changes only the operator), so every operator meets
the same tuples in the same arrival order: arrivals are ordered by their event time ``t``
(``run_stream(time="t")``) and cut into the same event-time micro-batches (``run.tick``).

Figure keys (``run``): ``units`` (J, the units of every distributed operator), ``memory_share``
(the total memory M as a share of |R| + |S|), ``resources`` (``equal_total``, the primary rule:
M in total, M/J per unit of a distributed operator, M on a single site's one unit;
``equal_per_unit``, the sensitivity: M/J on every unit, a single site's too), ``tick``
(event-time micro-batch), ``single_site`` (parameters every single-site operator of the DINER
paper takes: its blocks and its own clock), ``time_unit_ms``, ``paper_ms`` and
``baseline_buckets`` (the DINER paper's time model and bucket rule, converted once by
:func:`experiments.kinds.single_site.operator_params`), ``operator_params`` (the series'
operator's own settings), ``window_share`` (a sliding event-time window, as a share of the
stream's last event time: tuples join only within it, and the oracle is the windowed join),
``archive_share`` (with a window: the chained index's archive period as a share of the window,
BiStream's P), ``cell`` (a name for the x when the x is a workload: the workload's parameters
at that x are ``workload.params_by_x[x]``).

Inputs: two relations ``R`` and ``S`` joined on ``key``, or n inputs along the edges of the
generator's ``query.json`` (a chain of three: MJoin, D-CAPE, MINER).

Whether an operator runs on a single site is read from its declaration
(:func:`joins.arena.is_single_site`), never from a list here.

Metrics (one time model for all, :mod:`joins.arena`, below experiments so that ``python -m
joins`` can use it too): per micro-batch the slowest unit's
calibrated cost of its exact counts, without the per-batch and per-unit constants (equal for
every operator on the same ticks), with every tuple written to disk charged ``per_spilled``
and every tuple read back ``per_disk_probe`` whoever writes it (the engine's spills and
D-CAPE's pushes and clean-up reads are counted by the engine; the single-site operators'
blocks are converted from their block counts). From it: the results over modeled time (the
series ``results_share_t``), modeled time to 50% and 100% of the join, the share of the join
produced before the stream ends, peak memory per unit, tuples sent over the network, and
max/mean load over units. Every run's rows are compared with DuckDB's join as a multiset
(:func:`joins.arena.graph_mismatch`: the oracle's join of the two or n inputs, windowed where
the figure has a window).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.kinds import (
    STEP_TUPLES,
    PointContext,
    PointOutcome,
    point_settings,
    point_spark,
    wall_clock_guard,
)
from experiments.kinds.query_inputs import read_query
from experiments.kinds.single_site import operator_params as single_site_params
from joins.arena import arena_outcome, arena_setup, graph_mismatch, is_single_site


def inputs(pc: PointContext) -> tuple[str, dict]:
    """The generator and parameters of the point's inputs (what ``make data`` prepares): the
    figure's workload, with the x's own parameters when the x is a workload
    (``workload.params_by_x``); the seed is the figure's unless a replicate sets it."""
    wl = point_settings(pc)["workload"]
    params = dict(wl["params"])
    params.update((wl.get("params_by_x") or {}).get(str(pc.x), {}))  # a workload per x
    params.setdefault("seed", pc.seed)
    return wl["generator"], params


def run_point(pc: PointContext) -> PointOutcome:
    from datagen import materialize
    from joins.calibrated import cost_model
    from joins.online import run_stream

    s = point_settings(pc)
    run, algorithm = s["run"], s["algorithm"]
    generator, params = inputs(pc)
    spark, out = point_spark(pc)
    folder = Path(materialize(generator, params, progress=pc.progress))
    query = read_query(folder)
    if query is not None:  # n inputs along the generator's edges
        frames, on, edges = query
        given: dict = dict(inputs=frames, on=on)
    else:
        frames = {name: pd.read_parquet(folder / f"{name}.parquet") for name in ("R", "S")}
        edges = [("R", "key", "S", "key")]
        given = dict(r=frames["R"], s=frames["S"], on="key")
    total = sum(len(f) for f in frames.values())
    own = dict(run.get("operator_params") or {})
    single = is_single_site(algorithm, own)
    op_params = single_site_params({**run, "operator_params": {
        **(run.get("single_site") or {}), **own}}, algorithm, frames) if single else own
    setup = arena_setup(algorithm, op_params, units=int(run["units"]),
                        memory_total=int(round(float(run["memory_share"]) * total)),
                        resources=run.get("resources", "equal_total"), single_site=single)
    cost = cost_model(pc.calibration, run)
    window = None
    timed: dict = {"time": "t", "tick": float(run["tick"])}
    if run.get("window_share") is not None:  # a sliding window over the stream's event time
        window = float(run["window_share"]) * max(float(f["t"].max()) for f in frames.values())
        timed["window"] = window
        if run.get("archive_share") is not None:  # BiStream's chained index, period P
            timed["archive"] = float(run["archive_share"]) * window
    with wall_clock_guard(spark, pc.wall_limit_s, f"{pc.figure['id']} {pc.series} x={pc.x}"):
        res = run_stream(spark, **given, operator=algorithm, joiners=setup.units, **timed,
                         memory_budget_tuples=setup.budget, seed=int(params["seed"]),
                         progress=pc.progress, partitions=min(setup.units, 2), cost=cost,
                         step_tuples=STEP_TUPLES, collect_output=True, **op_params)
    # the check against DuckDB's join (two inputs, n, or windowed: the oracle's graph join) and
    # the metrics: joins.arena, shared with python -m joins compare
    missing, extra = graph_mismatch(res.output, frames, edges, window=window,
                                    time=None if window is None else "t")
    metrics, out.series_rows, error = arena_outcome(
        res, missing=missing, extra=extra, output_rows=len(res.output), setup=setup, cost=cost,
        total=total)
    out.metrics.update(metrics)
    if window is not None:
        out.metrics["window"] = (window, "event-time units")
    if error:
        out.status = "error"
        out.error = error
    return out
