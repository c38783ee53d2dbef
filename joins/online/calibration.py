"""Calibration of the online cost model: run the engine on synthetic inputs that vary one
count at a time and fit the per-worker task time on the counts (:func:`joins.online.cost.fit`).

Apart from :mod:`joins.online.cost` because it runs the engine (``run_stream``), which itself
depends on the cost model: keeping them apart keeps the imports acyclic.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from joins.online import spill_store
from joins.online.cost import CostModel, fit
from runtime.cost_model import r_squared


class CalibrationRun(NamedTuple):
    operator: str
    joiners: int
    r_tuples: int
    s_tuples: int
    domain: int  # distinct keys
    r_zipf: float  # Zipf z of R's keys (S's are uniform)
    batch_size: int  # tuples per micro-batch
    spill: bool = False  # a tight memory budget, overflow really written to disk


# Each run varies one thing against the others, so that the terms the fit separates are not
# collinear: few vs many outputs per probe (domain, skew), grid replication vs one joiner per
# key (probes and stored per received tuple), small vs large micro-batches, 4 vs 16 joiners
# (per-worker cost), migrations (dynamic) and spills.
CALIBRATION_RUNS: tuple[CalibrationRun, ...] = (
    CalibrationRun("shj", 4, 60_000, 180_000, 1_000_000, 0.0, 20_000),
    CalibrationRun("static_mid", 4, 60_000, 180_000, 1_000_000, 0.0, 20_000),
    CalibrationRun("static_mid", 16, 60_000, 180_000, 1_000_000, 0.0, 40_000),
    CalibrationRun("shj", 4, 60_000, 180_000, 20_000, 0.0, 20_000),
    CalibrationRun("static_mid", 4, 30_000, 90_000, 3_000, 0.0, 8_000),
    CalibrationRun("static_mid", 4, 60_000, 180_000, 10_000, 1.0, 30_000),
    CalibrationRun("shj", 16, 200_000, 200_000, 1_000_000, 0.0, 50_000),
    CalibrationRun("dynamic", 4, 60_000, 180_000, 30_000, 1.0, 20_000),
    CalibrationRun("dynamic", 16, 40_000, 200_000, 100_000, 0.0, 30_000),
    CalibrationRun("static_mid", 4, 60_000, 180_000, 50_000, 0.0, 20_000, spill=True),
)


def _keys(rng: np.random.Generator, n: int, domain: int, z: float) -> np.ndarray:
    if z == 0:
        return rng.integers(0, domain, n)
    p = 1.0 / np.arange(1, domain + 1) ** z
    return rng.choice(domain, size=n, p=p / p.sum())


def calibrate(spark, *, runs: tuple[CalibrationRun, ...] = CALIBRATION_RUNS, repeats: int = 3,
              seed: int = 0, out: str | Path | None = None) -> dict:
    """Measure the cost constants on this machine (run by ``make calibrate``).

    Runs the engine on the synthetic equi-join streams of :data:`CALIBRATION_RUNS`, each
    ``repeats`` times (the counts are deterministic, the times are not: a (micro-batch,
    worker) row's time is the median over the repeats), then fits :func:`fit` on every row,
    with the costs of writing and probing spilled state measured apart on the spill store
    (:func:`joins.online.spill_store.measure`: the engine's spill keeps its in-memory index,
    so its runs cannot show what a probe into spilled state costs).
    Returns the constants (and writes them as JSON to ``out`` when given), with
    ``calibration_id`` = time stamp and fit quality: ``r2`` over the rows, ``r2_runs`` over
    the runs' total worker seconds (what a modeled time sums; single rows are a few ms of
    numpy and noisy).
    """
    from joins.online import run_stream

    rng = np.random.default_rng(seed)
    frames, walls = [], []
    for i, run in enumerate(runs):
        r = pd.DataFrame({"key": _keys(rng, run.r_tuples, run.domain, run.r_zipf)})
        s = pd.DataFrame({"key": _keys(rng, run.s_tuples, run.domain, 0.0)})
        options = dict(operator=run.operator, joiners=run.joiners, seed=seed + i,
                       batch_size=run.batch_size, progress=False)
        if run.operator == "dynamic":
            options["warmup"] = run.r_tuples // 10
        if run.spill:
            options.update(memory_budget_tuples=(run.r_tuples + run.s_tuples) // (run.joiners * 2),
                           spill="disk")
        measured = [run_stream(spark, r, s, **options).metrics
                    .sort_values(["batch", "worker"]).reset_index(drop=True)
                    for _ in range(repeats)]
        m = measured[0]
        counts = ["received", "outputs", "migrated"]
        if any(not o[counts].equals(m[counts]) for o in measured[1:]):
            raise RuntimeError("calibration run's counts differ between repeats")
        m = m.assign(seconds=np.median([o["seconds"].to_numpy() for o in measured], axis=0),
                     run=i)
        wall = pd.concat([o.groupby("batch")["batch_wall_seconds"].first() for o in measured],
                         axis=1).median(axis=1)
        frames.append(m)
        walls.append(pd.concat({i: wall}, names=["run", "batch"]))
    metrics = pd.concat(frames, ignore_index=True)
    # the workers of a micro-batch share the machine's cores
    disk = spill_store.measure()
    consts = fit(metrics, pd.concat(walls), cores=spark.sparkContext.defaultParallelism,
                 known={k: disk[k] for k in ("per_spilled", "per_disk_probe")})
    consts["calibration_id"] = "calibrated-" + time.strftime("%Y%m%dT%H%M%S")
    model = replace(CostModel(), **{k: float(v) if k != "calibration_id" else v
                                   for k, v in consts.items() if k in CostModel.__dataclass_fields__})
    per_run = metrics.assign(predicted=model.worker_cost(metrics)).groupby("run")
    r2_runs = r_squared(per_run["seconds"].sum(), per_run["predicted"].sum())
    result = {**model.to_dict(), "r2": consts["r2"], "r2_runs": r2_runs, "rows": len(metrics),
              "spill_store": disk["spill_store"]}
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))
    return result
