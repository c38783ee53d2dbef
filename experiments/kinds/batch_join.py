"""One point of a batch-join figure: generate (cached) inputs, run one algorithm on Spark,
capture its tasks, model its time on E executors and check its output count against DuckDB."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb

from experiments.figure_spec import scaled_rule
from experiments.kinds import (
    PointContext,
    PointOutcome,
    point_settings,
    point_spark,
    wall_clock_guard,
)
from experiments.kinds.batch_inputs import distributed_inputs, release_cached
from experiments.paper_regime import paper_factors, regime_metrics
from joins.api import BatchContext, BudgetExceeded, JoinSpec, consume_output
from joins.batch.sql_conf import sql_conf
from joins.oracle import oracle_count
from joins.registry import get as get_algorithm
from runtime.cost_model import executor_imbalance, stage_table
from runtime.spark_metrics import TaskMetricsCapture


def cached_value(cache: Path, field: str, compute) -> Any:
    """A value kept as JSON next to the generated inputs, computed once (atomic write)."""
    if cache.exists():
        return json.loads(cache.read_text())[field]
    value = compute()
    tmp = cache.with_suffix(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps({field: value}))
    tmp.replace(cache)
    return value


def _oracle_rows(folder: Path, left: str, right: str, on: str, how: str,
                 self_join: str | None = None) -> int:
    """DuckDB's exact output count, cached next to the generated inputs.

    ``self_join`` ("diagonal" or "no_diagonal") counts a same-attribute self-join's unordered
    pairs: per key n(n+1)/2 with the r-r pairs (catalogue T18, the default) or n(n-1)/2.
    """
    def count() -> int:
        rows = oracle_count(folder / f"{left}.parquet", folder / f"{right}.parquet", on, how)
        if self_join is not None:  # rows is then the ordered-pair count, sum of n^2 per key
            keyed_rows = int(duckdb.sql(
                f"SELECT count({on}) FROM read_parquet('{folder / left}.parquet/*.parquet')"
            ).fetchone()[0])
            rows = (rows + (keyed_rows if self_join == "diagonal" else -keyed_rows)) // 2
        return rows

    return int(cached_value(folder / f"oracle-{left}-{right}-{on}-{how}-{self_join}.json",
                             "rows", count))


def _agreed_checksum(folder: Path, left: str, right: str, on: str, how: str,
                     columns: list[str], checksum: int) -> int:
    """The output checksum the first correct run on these inputs recorded (this one's if first).

    Every algorithm writes its rows in the same ``l_*``/``r_*`` layout, so any two correct
    runs on the same inputs and join type hash to the same sum; the layout is part of the key.
    """
    layout = hashlib.sha256(",".join(columns).encode()).hexdigest()[:8]
    return int(cached_value(folder / f"checksum-{left}-{right}-{on}-{how}-{layout}.json",
                             "checksum", lambda: str(checksum)))


def inputs(pc: PointContext) -> tuple[str, dict[str, Any]]:
    """The generator and parameters of this point's input relations."""
    wl = point_settings(pc)["workload"]
    return wl["generator"], {**wl["params"], "seed": wl["params"].get("seed", pc.seed)}


def operator_seed(pc: PointContext) -> int:
    """The seed of the algorithm's own draws (FGSD-Join's samples, Tree-Join's spreading): the
    point's, or the series' ``run.seed``, so that a seed replicate (verdict rule 3) draws new
    data (``workload.params.seed``) and a new operator seed."""
    return int(point_settings(pc)["run"].get("seed", pc.seed))


def run_point(pc: PointContext) -> PointOutcome:
    from datagen import materialize

    s = point_settings(pc)
    wl, run = s["workload"], s["run"]
    spark, out = point_spark(pc)
    _, gen_params = inputs(pc)
    folder = Path(materialize(wl["generator"], gen_params, spark=spark, progress=pc.progress))
    left_t, right_t = wl.get("tables", ["R", "S"])
    spec = JoinSpec(on=wl.get("key_column", "key"), how=wl.get("how", "inner"),
                    self_join=bool(wl.get("self_join", False)))
    algo = get_algorithm(s["algorithm"], kind="batch")
    if spec.how not in algo.join_types:
        raise ValueError(f"{algo.name} cannot do {spec.how} joins (it does {algo.join_types})")
    executors = int(run["executors"])
    partitions = int(run.get("partitions") or executors * int(run.get("partitions_per_executor", 3)))
    tables = [left_t] if spec.self_join else [left_t, right_t]
    read = distributed_inputs(spark, [str(folder / f"{t}.parquet") for t in tables], partitions)
    left, right = read[0], read[-1]
    rules = pc.figure.get("rules", {})
    sizes = pc.figure["workload"]["sizes"]
    budget = scaled_rule(rules, "memory_budget_bytes", pc.scale, sizes)
    deadline = scaled_rule(rules, "deadline_modeled_s", pc.scale, sizes)
    record_bytes = int(wl["params"].get("size", 0)) or None
    ctx = BatchContext(spark, executors=executors, partitions=partitions, seed=operator_seed(pc),
                       memory_budget_bytes=budget, record_bytes=record_bytes,
                       params=run.get("algorithm_params", {}))
    m = out.metrics
    m["executors"] = (executors, "executors")
    m["partitions"] = (partitions, "partitions")
    if budget is not None:
        m["memory_budget_bytes"] = (budget, "bytes")
    if deadline is not None:
        m["deadline_modeled_s"] = (deadline, "s")

    start = time.perf_counter()
    try:
        with (wall_clock_guard(spark, pc.wall_limit_s, f"{pc.figure['id']} {pc.series} x={pc.x}"),
              TaskMetricsCapture(spark) as cap):
            result = algo.load()(ctx, left, right, spec)
            with sql_conf(spark, result.sql_conf):
                rows, checksum = consume_output(result.output)
    except BudgetExceeded as exc:
        out.status, out.error = "oom", str(exc)
        m["memory_needed_bytes"] = (exc.needed_bytes, "bytes")
        return out
    finally:
        release_cached(spark)
    # preparation the paper does not count (e.g. DER's ids), already out of the modeled time
    wall = time.perf_counter() - start - float(result.extra.get("uncounted_seconds", 0.0))

    out.stages = stage_table(cap.result.tasks, executors, pc.calibration.batch,
                             schedule=run.get("schedule", "list"))
    modeled = float(out.stages["modeled_s"].sum())
    m["modeled_time"] = (modeled, "modeled s")
    m["executor_imbalance"] = (executor_imbalance(out.stages), "ratio")
    out.tasks = cap.result.tasks
    regime = paper_factors(pc.figure, pc.scale, wl["generator"], wl["params"])
    if regime is not None:  # the paper's regime (experiments.paper_regime)
        m.update(regime_metrics(cap.result.tasks, executors, pc.calibration.batch,
                                run.get("schedule", "list"), *regime, as_run=out.stages))
    m["local_wall_time"] = (wall, "local wall s")
    m["output_rows"] = (rows, "rows")
    m["output_checksum"] = (float(checksum % 2**52), "checksum")  # low bits: exact as a float
    for name, value in cap.result.summary().items():
        m[name] = (value, "bytes" if name.endswith("bytes") else "count")
    for name, value in result.extra.items():
        m[name] = (float(value), "count")
    diagonal = "diagonal" if ctx.params.get("self_join_diagonal", True) else "no_diagonal"
    expected = _oracle_rows(folder, left_t, left_t if spec.self_join else right_t, spec.on,
                            spec.how, diagonal if spec.self_join else None)
    m["oracle_rows"] = (expected, "rows")
    if rows != expected:
        out.status = "error"
        out.error = f"output has {rows} rows, DuckDB oracle has {expected}"
        return out
    if not spec.self_join:  # self-join algorithms may orient a pair either way
        agreed = _agreed_checksum(folder, left_t, right_t, spec.on, spec.how,
                                  result.output.columns, checksum)
        if checksum != agreed:
            out.status = "error"
            out.error = (f"output checksum {checksum} differs from {agreed}, which another "
                         f"run on the same inputs produced")
            return out
    if deadline is not None and modeled > deadline:
        out.status, out.error = "timeout", f"modeled time {modeled:.1f}s > deadline {deadline:.1f}s"
    return out
