"""Readable run summaries: every metric with its unit and a one-line meaning, exact counts as
integers with thousands separators (``91,600``, never ``9.16e+04``). Shared by ``joins run``
and ``joins compare``."""

from __future__ import annotations

import math
from typing import Any

# name -> (unit, meaning); a metric not listed is an algorithm's own exact count
METRICS: dict[str, tuple[str, str]] = {
    "modeled_s": ("modeled s", "calibrated cost of the exact task counts on the modeled "
                  "executors (not this machine's time)"),
    "wall_s": ("local wall s", "this machine's wall clock for the run (never a cluster's time)"),
    "output_rows": ("rows", "rows of the join's output"),
    "spark_jobs": ("jobs", "Spark jobs run"),
    "spark_stages": ("stages", "stages of the heaviest side (reduce stages if any shuffle)"),
    "spark_tasks": ("tasks", "Spark tasks run"),
    "shuffle_read_bytes": ("bytes", "bytes read by every shuffle of the run"),
    "shuffle_write_bytes": ("bytes", "bytes written by every shuffle of the run"),
    "input_records": ("records", "records read by all tasks"),
    "rows_produced": ("rows", "rows produced by all tasks"),
    "max_task_records": ("records", "records in + rows out of the busiest task of the heaviest "
                         "stage"),
    "mean_task_records": ("records", "the same, averaged over that stage's tasks"),
    "task_imbalance": ("max/mean", "max over mean records per task in the heaviest stage"),
    "stage_union_parts": ("parts", "inputs unioned in the heaviest stage"),
    "largest_part_task_imbalance": ("max/mean", "task imbalance of that stage's largest part"),
    "task_run_ms_total": ("task ms", "run time summed over all tasks (this machine)"),
    "uncounted_seconds": ("local wall s", "driver-side preparation the paper leaves out"),
    # online runs (python -m joins stream)
    "tuples": ("tuples", "tuples streamed, all inputs"),
    "r_tuples": ("tuples", "tuples of R (the first input)"),
    "s_tuples": ("tuples", "tuples of S (the other inputs)"),
    "outputs": ("rows", "result rows produced, every phase"),
    "batches": ("micro-batches", "micro-batches (Spark steps carry one or more)"),
    "modeled_time": ("modeled s", "per micro-batch a fixed cost plus the slowest worker's "
                     "calibrated cost of its exact counts, summed (not this machine's time)"),
    "modeled_fixed_per_batch": ("modeled s", "of modeled_time: the calibrated fixed cost per "
                                "micro-batch (scheduling a Spark step) x micro-batches"),
    "mean_latency_modeled": ("modeled s", "mean over tuples of their micro-batch's modeled cost"),
    "local_wall_time": ("local wall s", "this machine's wall clock for the run"),
    "max_ilf": ("tuples", "ILF: most tuples stored on one worker at any point"),
    "final_max_ilf": ("tuples", "most tuples stored on one worker at the end"),
    "final_avg_ilf": ("tuples", "mean tuples stored per worker at the end"),
    "final_total_stored": ("tuples", "tuples stored over all workers at the end"),
    "ilf_opt_final": ("tuples", "the optimal mapping's ILF for the final sizes (ILF*)"),
    "ilf_ratio_max": ("ILF/ILF*", "largest ILF over ILF* after the warm-up"),
    "ilf_ratio_final": ("ILF/ILF*", "ILF over ILF* at the end"),
    "migrations": ("count", "state migrations (layout changes that moved state)"),
    "migrated_tuples": ("tuples", "tuples moved between workers by migrations"),
    "spilled": ("tuples", "tuples spilled beyond the memory budget"),
    "reliable_checkpoints": ("count", "checkpoints written to checkpoint_dir="),
    # the arena's metrics (joins.arena; python -m joins compare operators=...), units as there
    "modeled_time_50": ("modeled s", "modeled time until half of the join is out: per "
                        "micro-batch the slowest unit's calibrated cost of its exact counts, "
                        "summed (the arena's time model, not this machine's time)"),
    "modeled_time_100": ("modeled s", "the same until the whole join is out"),
    "share_before_end": ("share of the join", "share of the join produced before the stream "
                         "ends (the rest comes in a clean-up)"),
    "peak_memory_per_unit": ("tuples", "a unit's largest in-memory state (a distributed "
                             "unit's beyond its memory counts as spilled; a single site's "
                             "input buffer included, which may exceed it)"),
    "network_tuples": ("tuples", "tuples delivered to units (to store or to probe) and tuples "
                       "migrated"),
    "load_max_mean": ("max / mean unit work", "a unit's modeled work over the run, max over "
                      "mean across the units (1 on a single site)"),
    "units": ("units", "units the operator ran on (1: a single site)"),
}
_INTEGER_UNITS = {"rows", "jobs", "stages", "tasks", "bytes", "records", "parts", "count",
                  "tuples", "micro-batches", "units"}


def unit(name: str) -> str:
    return METRICS.get(name, ("count", ""))[0]


def meaning(name: str) -> str:
    return METRICS.get(name, ("", "an exact count of the algorithm (see its module)"))[1]


def format_value(name: str, value: Any) -> str:
    """``value`` for display: integers with separators, ratios and times with fixed decimals."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if unit(name) in _INTEGER_UNITS and float(value).is_integer():
        return f"{int(value):,}"
    if unit(name) in ("max/mean", "ILF/ILF*", "max / mean unit work"):
        return f"{value:.2f}"
    if unit(name).endswith(" s") and 0 < abs(value) < 0.01:  # the arena's modeled ms: 4 digits
        return f"{value:.4g}"
    return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"


def lines(values: dict[str, Any], explain: bool = False) -> list[str]:
    """One line per metric: name, value, unit (and its meaning with ``explain``)."""
    width = max((len(k) for k in values), default=0)
    out = []
    for k, v in values.items():
        line = f"  {k:<{width}}  {format_value(k, v):>14} {unit(k)}"
        out.append(f"{line:<{width + 32}}  {meaning(k)}" if explain else line)
    return out
