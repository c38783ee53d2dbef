"""Measure the cost-model constants on this machine: ``make calibrate``.

Batch: run shuffle joins and aggregations of several sizes and skews on Spark, read every
task's exact counts and its executor run time from the event log, and fit the non-negative
linear model of :class:`runtime.cost_model.BatchCosts` (scipy's NNLS). Online: the
engine's own calibration (:func:`joins.online.calibration.calibrate`) when it is available. The result
goes to ``calibration/local.json`` (``default.json`` is the committed reference, measured the
same way on a 2-core machine, where the default ``spark=local`` preset's ``local[*]`` is the
``local[2]`` its note records) and its id is recorded with every result; an older calibration that published results
still cite is kept as ``calibration/<id>.json``. ``parts=batch`` (``parts=online``) re-measures
the batch (online) constants only and keeps the other ones the current calibration has;
``parts=spill`` re-measures only the online spill store's write and probe costs
(:mod:`joins.online.spill_store`). ``parts=percount`` measures the online constants one count
at a time (:func:`joins.online.calibration.calibrate_per_count`: ``n=`` tuples per input,
``repeats=``) and writes them, with the runs that measured each one, to a file of its own
(``out=``, default ``calibration/online-percount-<date>.json``; ``reuse=FILE`` takes an
earlier file's runs and measures only the experiments it lacks); it changes no calibration
that results use.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from joins.api import consume_output
from runtime.cost_model import (
    CALIBRATION_DIR,
    BatchCosts,
    calibration_id,
    load_calibration,
    r_squared,
)
from runtime.spark_metrics import TaskMetricsCapture
from runtime.spark_session import (
    SparkConfigError,
    get_spark,
    spark_preset,
)


def _workloads(spark):
    """Jobs whose tasks span small and large counts of each kind (records, rows, bytes)."""
    from pyspark.sql import functions as F

    for rows, keys, parts in [(200_000, 50_000, 8), (1_000_000, 200_000, 16),
                              (400_000, 400, 8), (2_000_000, 1_000_000, 24)]:
        left = spark.range(rows, numPartitions=4).select(
            (F.col("id") % keys).alias("k"), F.sha2(F.col("id").cast("string"), 256).alias("p"))
        right = spark.range(rows // 4, numPartitions=4).select((F.col("id") % keys).alias("k"))
        spark.conf.set("spark.sql.shuffle.partitions", parts)
        # outputs consumed as the batch kind consumes them (every column of every row)
        yield lambda lft=left, rgt=right: consume_output(lft.hint("shuffle_hash").join(rgt, "k"))
        yield lambda lft=left: consume_output(lft.groupBy("k").agg(F.count("*")))


def measure_batch(spark, repeats: int = 2) -> tuple[BatchCosts, dict]:
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    frames = []
    for _ in range(repeats):
        for job in _workloads(spark):
            with TaskMetricsCapture(spark) as cap:
                job()
            frames.append(cap.result.tasks)
    tasks = pd.concat(frames, ignore_index=True)
    design = np.column_stack([
        np.ones(len(tasks)),
        tasks["records_in"].to_numpy(float),
        tasks["rows_produced"].to_numpy(float),
        (tasks["shuffle_read_bytes"] + tasks["shuffle_write_bytes"]).to_numpy(float),
    ])
    target = tasks["run_ms"].to_numpy(float) / 1000.0
    coef, _ = nnls(design, target)
    r2 = r_squared(target, design @ coef)
    costs = BatchCosts(per_task=float(coef[0]), per_record_in=float(coef[1]),
                       per_row_produced=float(coef[2]), per_shuffle_byte=float(coef[3]))
    return costs, {"tasks": len(tasks), "r2": float(r2)}


def measure_online(spark, base: dict | None = None) -> dict:
    """The per-count constants (:func:`joins.online.calibration.calibrate_per_count`), then
    the NNLS fit of the engine's mixed runs for the constants no per-count run measures
    (per_worker, per_migrated, per_stored, fixed_per_batch), with the per-count ones kept as
    given; both on the workers' CPU time. The per-count measurements (which run measured which constant)
    go with the constants."""
    try:
        from joins.online.calibration import DERIVED, calibrate, calibrate_per_count
    except ImportError:
        return {}
    per_count = calibrate_per_count(spark, base=base or {})
    known = {k: per_count["online"][k] for k in DERIVED}
    online = dict(calibrate(spark, known=known, clock="cpu_seconds"))
    online["measurements"] = per_count["measurements"]
    return online


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    out = Path(opts.get("out", CALIBRATION_DIR / "local.json"))
    parts = opts.get("parts", "all")
    if parts not in ("all", "batch", "online", "spill", "percount"):
        print(f"parts must be all, batch, online, spill or percount, got {parts!r}",
              file=sys.stderr)
        return 2
    if parts == "percount":
        return _per_count(opts)
    try:
        preset = spark_preset(opts.get("spark", "local"))  # before any work starts
    except SparkConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # the spill store is timed without Spark
    spark = None if parts == "spill" else get_spark(**{**preset, "driver_memory": "6g"})
    master = spark.sparkContext.master if spark is not None else "no Spark"
    t0 = time.perf_counter()
    current = load_calibration()
    if parts in ("online", "spill"):  # keep the batch constants results were made with
        batch_d, fit_note = asdict(current.batch), f"batch kept from {current.id}"
        print(f"batch cost model: kept from the current calibration {current.id}")
    else:
        batch, fit = measure_batch(spark)
        batch_d = asdict(batch)
        fit_note = f"batch fit R²={fit['r2']:.3f} over {fit['tasks']} tasks"
        print(f"batch cost model: {batch} (fit over {fit['tasks']} tasks, R²={fit['r2']:.3f})")
    if parts == "batch":  # keep the online constants results were made with
        online = current.online
        print("online cost model: kept from the current calibration")
    elif parts == "spill":  # the other online constants as they are
        from joins.online import spill_store

        online = {**current.online, **spill_store.measure()}
        fit_note = f"batch and online kept from {current.id} but the spill store's costs"
        print(f"online spill store: per_spilled={online['per_spilled']:.3g} s, "
              f"per_disk_probe={online['per_disk_probe']:.3g} s ({online['spill_store']})")
    else:
        online = measure_online(spark, current.online)
        print(f"online cost model: {online or 'engine calibration not available'}")
    data = {
        "id": calibration_id(batch_d, online),
        "machine": f"{platform.node()} {platform.machine()} {platform.processor()}".strip(),
        "batch": batch_d, "online": online,
        "spark_master": master,
        "note": f"measured by experiments.calibrate with {master} in "
                f"{time.perf_counter() - t0:.0f}s; {fit_note}",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(out)
    print(f"wrote {out} (calibration id {data['id']})")
    return 0


def _per_count(opts: dict) -> int:
    from joins.online.calibration import calibrate_per_count, check_zero_constants

    try:
        preset = spark_preset(opts.get("spark", "local"))
    except SparkConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(opts.get("out", CALIBRATION_DIR /
                        f"online-percount-{time.strftime('%Y%m%d')}.json"))
    current = load_calibration()
    spark = get_spark(**{**preset, "driver_memory": "6g"})
    n, repeats = int(opts.get("n", 200_000)), int(opts.get("repeats", 5))
    data = None
    if "reuse" in opts:  # an earlier file's runs; only the experiments it lacks are measured
        import pandas as pd

        from joins.online.calibration import count_experiments, measure_counts

        earlier = json.loads(Path(opts["reuse"]).read_text())
        if earlier["n"] != n:
            print(f"error: {opts['reuse']} measured n={earlier['n']}, not n={n}",
                  file=sys.stderr)
            return 2
        old = pd.DataFrame(earlier["runs"])
        missing = tuple(e for e in count_experiments(n) if e.name not in set(old.experiment))
        print(f"reusing {len(old)} runs of {opts['reuse']}; measuring "
              f"{', '.join(e.name for e in missing) or 'nothing'}")
        data = pd.concat([old, measure_counts(spark, missing, repeats=repeats, n=n)],
                         ignore_index=True)
    result = calibrate_per_count(spark, n=n, repeats=repeats, data=data,
                                 base={**current.online, "calibration_id":
                                       f"{current.id} ({current.online.get('calibration_id')})"})
    result.update(machine=f"{platform.node()} {platform.machine()}".strip(),
                  spark_master=spark.sparkContext.master, base_calibration=current.id)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    for name, rec in result["measurements"].items():
        if name in result["online"]:  # (the checks are recorded beside the constants)
            print(f"{name}: {result['online'][name]:.3g} s ({rec['runs']}) "
                  f"{rec.get('note', '')}")
    bad = check_zero_constants(result)
    print(f"wrote {out}" + (f"; constants of 0 without a negligible measurement: {bad}"
                            if bad else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
