"""Several batch join algorithms on the same inputs in one Spark session: ``python -m joins
compare``. Each algorithm's output is consumed the way the figures consume it (every column of
every row hashed, :func:`joins.api.consume_output`); its tasks are captured and its time is
modeled on ``executors`` slots with the calibrated costs. With ``check=True`` each output is
then compared with DuckDB's join as a multiset of rows (nothing lost, nothing duplicated),
outside the timed run.
"""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

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


def multiset_mismatch(output: str | Path | pd.DataFrame, left, right, on: str,
                      how: str) -> tuple[int, int]:
    """(rows DuckDB's join has that ``output`` lacks, rows ``output`` has in excess), counted
    with multiplicity (EXCEPT ALL, where nulls compare equal) on the oracle's columns (an
    output's own extra columns, e.g. the online engine's ``phase``, are not compared).
    ``output``: a folder of Parquet files or a frame; ``left``, ``right``: paths or frames."""
    from joins.oracle import oracle_join_sql

    con, select = oracle_join_sql(left, right, on, how)
    if isinstance(output, pd.DataFrame):
        con.register("_output_rows", output)
        mine = "_output_rows"
    else:
        mine = "read_parquet('{}')".format(str(Path(output) / "*.parquet").replace("'", "''"))
    names = con.sql(f"SELECT * FROM ({select}) LIMIT 0").columns
    cols = ", ".join(f'"{c}"' for c in names)
    # each side's distinct rows with their multiplicity, matched null-safely: the same answer
    # as EXCEPT ALL both ways, in two hash aggregations and one hash join (EXCEPT ALL numbers
    # every row: about 3x slower on 4.6M rows)
    same = " AND ".join(f'a."{c}" IS NOT DISTINCT FROM b."{c}"' for c in names)
    missing, extra = con.sql(
        f"WITH a AS (SELECT {cols}, count(*) AS n FROM ({select}) GROUP BY ALL), "
        f"b AS (SELECT {cols}, count(*) AS n FROM {mine} GROUP BY ALL) "
        "SELECT coalesce(sum(greatest(coalesce(a.n, 0) - coalesce(b.n, 0), 0)), 0), "
        "coalesce(sum(greatest(coalesce(b.n, 0) - coalesce(a.n, 0), 0)), 0) "
        f"FROM a FULL OUTER JOIN b ON {same}").fetchone()
    return int(missing), int(extra)


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
    where = (f"modeled on {cmp.executors} executors (this feeds the time model only; it does "
             "not change how many Spark executors run)" if cmp.workers == "executors" else
             f"{cmp.executors} joiners (logical workers on the session's executors)")
    return "\n".join([*lines, "", f"{where}, calibration {cmp.calibration_id}", *legend])


def draw(cmp: Comparison, path: Path) -> None:
    """Bars of modeled and local wall time per algorithm, labelled as such."""
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


# the online table's columns (units and meanings: joins.summary.METRICS)
STREAM_COLUMNS = ("modeled_time", "local_wall_time", "outputs", "batches", "max_ilf",
                  "migrated_tuples", "spilled")


def compare_stream(spark, operators: list[str], r: str, s: str, *, on: str, joiners: int,
                   check: bool = False, scratch: Path | None = None, log=print,
                   **stream_kw) -> Comparison:
    """Run each online operator on the same stream (same order, seed and micro-batches,
    ``stream_kw`` for :func:`joins.online.run_stream`); with ``check`` each result written
    to Parquet is compared with DuckDB's join as a multiset."""
    from joins.calibrated import cost_model
    from joins.online import run_stream
    from runtime.cost_model import load_calibration
    from runtime.paths import SCRATCH

    calibration = load_calibration()
    cost = cost_model(calibration)
    rows, errors = [], {}
    for i, op in enumerate(operators, 1):
        log(f"[{i}/{len(operators)}] {op} ...")
        folder = (scratch or SCRATCH / "compare") / f"stream-{uuid.uuid4().hex[:12]}"
        try:
            res = run_stream(spark, r, s, operator=op, joiners=joiners, on=on, cost=cost,
                             output=folder if check else None, progress=False, **stream_kw)
            row = {"algorithm": op, **{c: res.summary.get(c, 0) for c in STREAM_COLUMNS}}
            if check:
                missing, extra = multiset_mismatch(folder, r, s, on, "inner")
                row["exact"] = not (missing or extra)
                if not row["exact"]:
                    errors[op] = (f"differs from DuckDB: {missing:,} rows missing, "
                                  f"{extra:,} in excess")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        rows.append(row)
        log(f"      {row['modeled_time']:.3f} modeled s, {row['local_wall_time']:.1f} s here, "
            f"{row['outputs']:,} rows" + (f", {'exact' if row['exact'] else errors[op]}"
                                          if check else ""))
    return Comparison(pd.DataFrame(rows), calibration.id, joiners, check, errors,
                      columns=STREAM_COLUMNS, time_columns=("modeled_time", "local_wall_time"),
                      workers="joiners")
