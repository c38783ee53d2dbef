"""Several batch join algorithms on the same inputs in one Spark session: ``python -m joins
compare``. Each algorithm's output is consumed the way the figures consume it (every column of
every row hashed, :func:`joins.api.consume_output`); its tasks are captured and its time is
modeled on ``executors`` slots with the calibrated costs. With ``check=True`` each output is
then compared with DuckDB's join as a multiset of rows (nothing lost, nothing duplicated),
outside the timed run.

Online operators (:func:`compare_stream`) are run and measured as the arena runs them
(:mod:`joins.arena`: its equal-resources rule, time model and metrics, every run checked
against DuckDB), so that a user's own stream can be put beside the arena's figures; the chart
is their results over modeled time.
"""

from __future__ import annotations

import shutil
import textwrap
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from joins.cli_common import parquet_rows
from joins.oracle import multiset_mismatch

# the table's columns (units and meanings: joins.summary.METRICS)
COLUMNS = ("modeled_s", "wall_s", "output_rows", "shuffle_write_bytes", "task_imbalance",
           "spark_tasks")


@dataclass
class Comparison:
    """One row per algorithm (:data:`COLUMNS`, plus ``exact`` when checked); the calibration
    id that priced every row."""

    table: pd.DataFrame
    calibration_id: str
    executors: int  # modeled executors (batch) or joiners (online)
    checked: bool
    errors: dict[str, str] = field(default_factory=dict)
    columns: tuple[str, ...] = COLUMNS
    time_columns: tuple[str, str] = ("modeled_s", "wall_s")
    workers: str = "executors"
    series: pd.DataFrame | None = None  # online: results over modeled time (joins.arena)
    where: str = ""  # online: the arena's resources, said under the table and on the chart


def compare_batch(spark, algorithms: list, left: str, right: str, *, on: str, how: str,
                  executors: int, partitions: int, seed: int = 0,
                  params: dict[str, dict[str, Any]] | None = None, check: bool = False,
                  scratch: Path | None = None, log=print) -> Comparison:
    """Run each of ``algorithms`` (:class:`joins.registry.Algorithm`, batch) on the Parquet
    inputs; ``params[name]`` are that algorithm's parameters."""
    from joins.api import BatchContext, consume_output
    from joins.batch.sql_conf import sql_conf
    from joins.keys import run_on_keys
    from runtime.cost_model import load_calibration, modeled_makespan
    from runtime.progress import StageProgress
    from runtime.spark_metrics import TaskMetricsCapture

    calibration = load_calibration()
    lhs, rhs = spark.read.parquet(left), spark.read.parquet(right)
    rows, errors = [], {}
    for i, algo in enumerate(algorithms, 1):
        log(f"[{i}/{len(algorithms)}] {algo.name} ...")
        ctx = BatchContext(spark, executors=executors, partitions=partitions, seed=seed,
                           params=dict((params or {}).get(algo.name, {})))
        t0 = time.perf_counter()
        with TaskMetricsCapture(spark) as cap, StageProgress(spark, label=f"{algo.name}: "):
            result = run_on_keys(algo.load(), ctx, lhs, rhs, on, how)
            with sql_conf(spark, result.sql_conf):
                n_rows, _ = consume_output(result.output)
        wall = time.perf_counter() - t0
        summary = cap.result.summary()
        row = {"algorithm": algo.name,
               "modeled_s": modeled_makespan(cap.result.tasks, executors, calibration.batch),
               "wall_s": wall, "output_rows": n_rows,
               "shuffle_write_bytes": summary.get("shuffle_write_bytes", 0.0),
               "task_imbalance": summary.get("task_imbalance", float("nan")),
               "spark_tasks": summary.get("spark_tasks", 0)}
        if check:
            row["exact"], error = _check(spark, result, left, right, on, how, scratch)
            if error:
                errors[algo.name] = error
        rows.append(row)
        log(f"      {row['modeled_s']:.3f} modeled s, {wall:.1f} s here, {n_rows:,} rows"
            + (f", {'exact' if row['exact'] else errors[algo.name]}" if check else ""))
    return Comparison(pd.DataFrame(rows), calibration.id, executors, check, errors)


def _check(spark, result, left, right, on, how, scratch: Path | None) -> tuple[bool, str]:
    """Write the output (again, outside the timed run) and compare it with DuckDB's."""
    from joins.batch.sql_conf import sql_conf
    from runtime.paths import SCRATCH

    folder = (scratch or SCRATCH / "compare") / f"check-{uuid.uuid4().hex[:12]}"
    try:
        with sql_conf(spark, result.sql_conf):
            result.output.write.parquet(str(folder))
        missing, extra = multiset_mismatch(folder, left, right, on, how)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if missing or extra:
        return False, f"differs from DuckDB: {missing:,} rows missing, {extra:,} in excess"
    return True, ""


def format_table(cmp: Comparison) -> str:
    """The table as text: integers with thousands separators, every column with its unit."""
    from joins.summary import format_value, meaning, unit

    names = ["algorithm", *cmp.columns] + (["exact"] if cmp.checked else [])
    head = [f"{n} ({unit(n)})" if n in cmp.columns else n for n in names]

    def cell(name: str, v: Any) -> str:
        if name == "exact":
            return "yes" if v else "NO"
        return format_value(name, v)

    body = [[cell(n, r[n]) for n in names] for _, r in cmp.table.iterrows()]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                        enumerate(zip(b, widths, strict=True))) for b in body]
    legend = [f"  {c}: {meaning(c)}" for c in cmp.columns]
    if cmp.checked:
        legend.append("  exact: the rows equal DuckDB's join as a multiset (nothing lost, "
                      "nothing duplicated)")
    where = cmp.where or (f"modeled on {cmp.executors} executors (this feeds the time model "
                          "only; it does not change how many Spark executors run)")
    return "\n".join([*lines, "", f"{where}, calibration {cmp.calibration_id}", *legend])


def draw(cmp: Comparison, path: Path) -> None:
    """Bars of modeled and local wall time per algorithm, labelled as such; online operators:
    their results over modeled time, as the arena draws them."""
    if cmp.series is not None:
        _draw_curves(cmp, path)
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = cmp.table
    fig, axes = plt.subplots(1, 2, figsize=(max(6, 1.2 * len(t) + 3), 3.6))
    modeled, wall = cmp.time_columns
    for ax, col, label in ((axes[0], modeled, f"modeled time, {cmp.executors} {cmp.workers} (s)"),
                           (axes[1], wall, "local wall time, this machine (s)")):
        ax.bar(t["algorithm"], t[col], color="#4472a8")
        ax.set_ylabel(label)
        ax.tick_params(axis="x", rotation=30)
        for lab in ax.get_xticklabels():
            lab.set_ha("right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# the online table's columns: the arena's metrics (joins.arena; units and meanings:
# joins.summary.METRICS), so a user's stream is read as the arena's figures are
STREAM_COLUMNS = ("modeled_time_50", "modeled_time_100", "share_before_end",
                  "peak_memory_per_unit", "network_tuples", "load_max_mean", "units",
                  "output_rows")
CURVE_XLABEL = ("modeled time (s): per micro-batch the slowest unit's calibrated cost of its "
                "exact counts (not wall time)")
CURVE_YLABEL = "share of the join produced (exact)"


def compare_stream(spark, operators: list[str], r: str, s: str, *, on: str, joiners: int,
                   memory: int | None = None, resources: str = "equal_total",
                   params: dict[str, dict[str, Any]] | None = None,
                   scratch: Path | None = None, log=print, **stream_kw) -> Comparison:
    """Run each online operator on the same stream (same order, seed and micro-batches or
    event-time ticks: ``stream_kw`` for :func:`joins.online.run_stream`, e.g. ``time=``,
    ``tick=``) as the arena runs it: ``joiners`` units for a distributed operator, one for a
    single site, ``memory`` tuples in total (default |R| + |S|) split by ``resources``
    (:func:`joins.arena.unit_budget`), measured by the arena's time model and checked
    against DuckDB's join as a multiset (the shares are shares of DuckDB's join).
    ``params[name]`` are that operator's own parameters."""
    from joins.calibrated import cost_model
    from runtime.cost_model import load_calibration

    calibration = load_calibration()
    cost = cost_model(calibration)
    total = parquet_rows(r) + parquet_rows(s)
    memory_total = total if memory is None else int(memory)
    rows, curves, errors = [], [], {}
    for i, op in enumerate(operators, 1):
        log(f"[{i}/{len(operators)}] {op} ...")
        metrics, series, error = _arena_run(
            spark, op, dict((params or {}).get(op, {})), r, s, on=on, cost=cost, total=total,
            units=joiners, memory_total=memory_total, resources=resources, scratch=scratch,
            stream_kw=stream_kw)
        rows.append({"algorithm": op, **{k: v for k, (v, _) in metrics.items()},
                     "exact": not error})
        curves += [{"algorithm": op, **p} for p in series]
        if error:
            errors[op] = error
        log(f"      {metrics['modeled_time_100'][0]:.6f} modeled s to 100%, "
            f"{metrics['local_wall_time'][0]:.1f} s here, {metrics['output_rows'][0]:,.0f} "
            f"rows, {error or 'exact'}")
    where = (f"{joiners} units per distributed operator, one per single site; {memory_total:,} "
             f"tuples of memory in total, {resources} (joins.arena.unit_budget)")
    return Comparison(pd.DataFrame(rows), calibration.id, joiners, True, errors,
                      columns=STREAM_COLUMNS, time_columns=("modeled_time_100", "local_wall_time"),
                      workers="joiners", series=pd.DataFrame(curves), where=where)


def _arena_run(spark, op: str, own: dict[str, Any], r: str, s: str, *, on: str, cost: Any,
               total: int, units: int, memory_total: int, resources: str,
               scratch: Path | None, stream_kw: dict) -> tuple[dict, list[dict], str]:
    """One operator's run under the arena's rule (:func:`joins.arena.arena_setup`), its rows
    written to a scratch folder (not held in memory), then checked and measured
    (:func:`joins.arena.arena_outcome`); the folder goes with the run."""
    from joins.arena import arena_outcome, arena_setup
    from joins.online import run_stream
    from runtime.paths import SCRATCH

    setup = arena_setup(op, own, units=units, memory_total=memory_total, resources=resources)
    folder = (scratch or SCRATCH / "compare") / f"stream-{uuid.uuid4().hex[:12]}"
    try:
        res = run_stream(spark, r, s, operator=op, joiners=setup.units, on=on, cost=cost,
                         memory_budget_tuples=setup.budget, output=folder, progress=False,
                         **stream_kw, **own)
        missing, extra = multiset_mismatch(folder, r, s, on, "inner")
        return arena_outcome(res, missing=missing, extra=extra, output_rows=parquet_rows(folder),
                             setup=setup, cost=cost, total=total)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _draw_curves(cmp: Comparison, path: Path) -> None:
    """Every operator's share of the join over modeled time (the arena figures' curve), a tick
    where its stream ends; an operator whose rows differ from DuckDB's says so in the
    legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    colors, styles = plt.get_cmap("tab10").colors, ("-", "--", ":")
    for i, (name, part) in enumerate(cmp.series.groupby("algorithm", sort=False)):
        color, style = colors[i % 10], styles[(i // 10) % 3]
        line = part[part["metric"] == "results_share_t"].sort_values("t")
        label = name if name not in cmp.errors else f"{name} (NOT exact: {cmp.errors[name]})"
        ax.plot(line["t"], line["value"], style, color=color, lw=1.5, label=label)
        end = part[part["metric"] == "stream_end_t"]
        if len(end) and len(line):
            t_end = float(end["t"].iloc[0])
            ax.plot([t_end], [np.interp(t_end, line["t"], line["value"])], "|", color=color,
                    ms=12, mew=2)
    ax.plot([], [], "|", color="0.3", ms=12, mew=2, label="stream ends")
    ax.set_xlabel(CURVE_XLABEL, fontsize=8)
    ax.set_ylabel(CURVE_YLABEL)
    ax.set_title(textwrap.fill(f"results over modeled time (python -m joins compare); "
                               f"{cmp.where}; calibration {cmp.calibration_id}", 110),
                 fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
