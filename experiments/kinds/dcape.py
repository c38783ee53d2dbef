"""Experiment kind ``dcape_join``: the D-CAPE paper's 3-way join over machines (operator
``dcape``) on the timed streams of ``datagen/dcape_streams``.

Figure keys: ``workload`` (``params`` of dcape_streams at the paper's values), ``run``:
``machines``, ``capacity_mb`` (a machine's memory, the paper's 200 MB; none: unlimited),
``operator_params`` (``adapt``, ``push``, ``push_percent``, ``theta_d``, ``min_span``...) and
the figure base's ``scale_factor`` per scale, ``tuple_bytes``, ``tick_ms``.

One scaling rule for the whole paper: the small scale multiplies each stream's rate and tuple
range by ``scale_factor`` and the memory capacity by the same factor (in tuples), which keeps
each tuple's expected results, the state per minute relative to the capacity, and so the
overflow minutes. The memory rule: a machine's memory is its in-memory state tuples x
``tuple_bytes`` (one constant; the figure base says how it was fixed), so capacity_mb maps
to a budget in tuples.

Metrics are exact counts of the run: results of the normal run and of the clean-up (checked
against DuckDB's count of A join B join C), pushes, relocations and forced pushes, tuples read
by the clean-up; the clean-up's time is the calibrated cost model's (modeled, the slowest
machine) next to its local wall time. With ``run.cleanup_per_result_s`` (a cost per
clean-up result that the paper's own clean-up numbers imply; the figure's choices derive it)
the kind also reports ``cleanup_paper_seconds``: the same counts with that cost in place of
the calibrated ``per_output``; for each reading, the slowest machine's shares of modeled time
spent reading state back from disk and producing results (:func:`cleanup_times`). Time series
per virtual minute: results per minute ("overall throughput", defined so), their running
total, and each machine's memory in MB of the memory rule. A run whose machine passes its
memory without a disk mode stops there (the paper's out-of-memory error): its series end at
that minute and ``stopped_minute`` says when.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from experiments.kinds import (
    STEP_TUPLES,
    PointContext,
    PointOutcome,
    point_settings,
    point_spark,
    wall_clock_guard,
)
from experiments.kinds.query_inputs import join_count, read_query

MINUTE_MS = 60_000.0


def scaled_stream_params(params: dict, factor: float) -> dict:
    """The paper's stream parameters at scale ``factor``: rates and tuple range x factor."""
    out = dict(params)
    out["interarrival_ms"] = float(params["interarrival_ms"]) / factor
    out["tuple_range"] = max(1, int(round(float(params["tuple_range"]) * factor)))
    return out


def _balance(ticks: pd.DataFrame) -> float:
    """Mean over ticks of the least over the most used machine's memory (1: balanced)."""
    per = ticks.groupby("batch")["mem"].agg(["min", "max"])
    per = per[per["max"] > 0]
    return float((per["min"] / per["max"]).mean()) if len(per) else float("nan")


def cleanup_times(cleanup: pd.DataFrame, cost, per_result: float | None = None) -> dict:
    """The clean-up's modeled seconds (the slowest machine: machines clean up in parallel) and
    that machine's shares of them spent reading back (``per_disk_probe`` x tuples read from
    disk) and producing results (the cost per result x results), from the clean-up rows'
    counts and their calibrated ``modeled_cost``; also the most results and the most tuples
    read back by one machine (exact counts).

    ``per_result``: a cost per clean-up result in place of the calibrated ``per_output`` (the
    paper's reading, ``cleanup_paper_*``); the rest of the calibrated model is kept, so only the
    charge for results changes. Metric name -> (value, unit)."""
    if cleanup.empty:
        w = pd.DataFrame({"modeled_cost": [0.0], "outputs": [0.0], "disk_probes": [0.0]})
    else:
        w = cleanup.groupby("worker")[["modeled_cost", "outputs", "disk_probes"]].sum()
    out: dict[str, tuple[float, str]] = {
        "cleanup_results_max_machine": (float(w["outputs"].max()), "rows"),
        "cleanup_tuples_read_max_machine": (float(w["disk_probes"].max()), "tuples")}
    readings = {"cleanup_modeled": float(cost.per_output)}
    if per_result is not None:
        readings["cleanup_paper"] = float(per_result)
        out["cleanup_per_result_s"] = (float(per_result), "s per result (paper, wall)")
    for name, each in readings.items():
        total = w["modeled_cost"] + (each - cost.per_output) * w["outputs"]
        slow = total.idxmax()
        t = float(total[slow])
        parts = {"readback": cost.per_disk_probe * w.loc[slow, "disk_probes"],
                 "result": each * w.loc[slow, "outputs"]}
        out[f"{name}_seconds"] = (t, "modeled s")
        for part, v in parts.items():
            out[f"{name}_{part}_share"] = (float(v) / t if t > 0 else float("nan"),
                                           "fraction of modeled s")
    return out


def run_point(pc: PointContext) -> PointOutcome:
    from datagen import materialize
    from joins.calibrated import cost_model
    from joins.online import run_stream

    s = point_settings(pc)
    wl, run = s["workload"], s["run"]
    factor = float(run["scale_factor"])
    params = scaled_stream_params(wl["params"], factor)
    params.setdefault("seed", pc.seed)
    spark, out = point_spark(pc)
    folder = Path(materialize("dcape_streams", params, progress=pc.progress))
    frames, on, edges = read_query(folder)
    tuple_bytes = float(run["tuple_bytes"])
    cap_mb = run.get("capacity_mb")
    budget = None if cap_mb is None else \
        max(1, int(round(float(cap_mb) * 1e6 / tuple_bytes * factor)))
    machines = int(run["machines"])
    op_params = dict(run.get("operator_params") or {})
    cost = cost_model(pc.calibration, run)
    with wall_clock_guard(spark, pc.wall_limit_s, f"{pc.figure['id']} {pc.series} x={pc.x}"):
        res = run_stream(spark, inputs=frames, on=on, operator="dcape", joiners=machines,
                         time="t", tick=float(run["tick_ms"]), memory_budget_tuples=budget,
                         seed=int(params["seed"]), progress=pc.progress,
                         partitions=min(machines, 2), cost=cost, step_tuples=STEP_TUPLES,
                         # a state tuple here stands for 1/factor of the paper's tuples: the
                         # modeled relocation transfer moves the paper's bytes
                         state_bytes=tuple_bytes / factor, **op_params)
    m = res.metrics
    normal = m[m["phase"] == "normal"]
    stop_t = np.inf
    if "oom" in m and m["oom"].fillna(False).astype(bool).any():
        stop_t = float(normal.loc[normal["oom"].fillna(False).astype(bool), "t1"].min())
    t_origin = float(min(f["t"].min() for f in frames.values() if len(f))) if \
        any(len(f) for f in frames.values()) else 0.0
    t0 = normal["t0"].to_numpy()
    t0 = np.where(np.isnan(t0), np.nanmax(t0) if np.isfinite(t0).any() else t_origin, t0)
    minute = np.floor((t0 - t_origin) / MINUTE_MS).astype(np.int64)  # after-stream ticks: last
    mb = tuple_bytes / 1e6 / factor  # MB per state tuple at the paper's scale
    normal = normal.assign(minute=minute, mem=normal[
        [c for c in normal.columns if c.startswith("stored_")]].sum(axis=1))
    kept = normal[normal["t0"] < stop_t]
    per_min = kept.groupby("minute")["outputs"].sum()
    rows = []
    for mi, v in per_min.items():
        rows.append({"metric": "results_per_minute", "t": float(mi + 1), "value": float(v),
                     "unit": "rows per virtual minute"})
    for mi, v in per_min.cumsum().items():
        rows.append({"metric": "cumulative_results", "t": float(mi + 1), "value": float(v),
                     "unit": "rows"})
    mem = kept.groupby(["minute", "worker"])["mem"].last().unstack(fill_value=0)
    for w in mem.columns:
        for mi, v in mem[w].items():
            rows.append({"metric": f"memory_mb_m{int(w) + 1}", "t": float(mi + 1),
                         "value": float(v) * mb,
                         "unit": "MB (memory rule, paper scale)"})
    for mi, v in mem.max(axis=1).items():
        rows.append({"metric": "memory_mb_max", "t": float(mi + 1),
                     "value": float(v) * mb,
                     "unit": "MB (memory rule, paper scale)"})
    out.series_rows = rows
    cleanup = m[m["phase"] == "cleanup"]
    dec = res.decisions if res.decisions is not None else pd.DataFrame()
    action = dec["action"] if "action" in dec else pd.Series([], dtype=object)
    stopped = bool(np.isfinite(stop_t))
    normal_results = float(kept["outputs"].sum())
    cleanup_results = float(cleanup["outputs"].sum()) if not stopped else float("nan")
    expected = join_count(folder, frames, edges)

    pushed = kept[kept["pushes"].fillna(0) > 0] if "pushes" in kept else kept.iloc[:0]

    def col(frame: pd.DataFrame, name: str) -> float:
        return float(frame[name].fillna(0).sum()) if name in frame else 0.0

    minutes = float(run.get("minutes", params.get("minutes", 0)))
    out.metrics.update({
        "normal_results": (normal_results, "rows"),
        "cleanup_results": (cleanup_results, "rows"),
        "total_results": (normal_results + (0 if stopped else cleanup_results), "rows"),
        "oracle_rows": (float(expected), "rows"),
        "throughput_per_minute": (normal_results / minutes if minutes else float("nan"),
                                  "rows per virtual minute"),
        "stopped_minute": ((stop_t - t_origin) / MINUTE_MS if stopped else float("nan"),
                           "virtual minutes"),
        "pushes": (col(normal, "pushes"), "count"),
        "pushed_tuples": (col(normal, "spilled"), "tuples"),
        "forced_pushes": (float((action == "forced_push").sum()), "count"),
        "relocations": (float((action == "relocate").sum()), "count"),
        "relocated_tuples": (float(dec.loc[action == "relocate", "tuples"].sum())
                             if len(dec) else 0.0, "tuples"),
        "relocation_modeled_seconds_max": (
            float(dec.loc[action == "relocate", "modeled_seconds"].max())
            if (action == "relocate").any() else 0.0, "modeled s"),
        "cleanup_tuples_read": (col(cleanup, "cleanup_read"), "tuples"),
        **cleanup_times(cleanup, cost, run.get("cleanup_per_result_s")),
        "cleanup_local_seconds": (float(cleanup.groupby("worker")["seconds"].sum().max())
                                  if len(cleanup) else 0.0, "local wall s"),
        "memory_budget_tuples": (float(budget) if budget else float("nan"), "tuples"),
        "memory_mb_peak": (float(kept["mem"].max()) * mb if len(kept) else 0.0,
                           "MB (memory rule, paper scale)"),
        "memory_ratio_mean": (_balance(kept), "M_least / M_most"),
        "first_push_minute": ((float(pushed["t1"].min()) - t_origin) / MINUTE_MS
                              if len(pushed) else float("nan"), "virtual minutes"),
        "input_tuples": (float(sum(len(f) for f in frames.values())), "tuples"),
        "local_wall_time": (float(res.summary["local_wall_time"]), "local wall s"),
    })
    if stopped:
        out.error = f"out of memory at minute {(stop_t - t_origin) / MINUTE_MS:.1f}"
    elif int(normal_results + cleanup_results) != expected:
        out.status = "error"
        out.error = (f"normal {int(normal_results)} + clean-up {int(cleanup_results)} results, "
                     f"the join has {expected}")
    return out
