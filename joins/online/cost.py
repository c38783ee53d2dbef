"""The calibrated linear cost model of a worker in a micro-batch, and its calibration.

Two cores cannot show what J machines do, so the engine reports *modeled time*: per
micro-batch, a fixed cost plus the slowest worker's cost, linear in its exact counts; summed
over micro-batches. The defaults below are UNCALIBRATED placeholders (orders of magnitude of a
numpy joiner on this kind of machine); :func:`calibrate` measures them here by running the
engine on synthetic inputs and regressing the measured per-worker task time on the counts with
non-negative least squares. Every result records ``calibration_id``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

TERMS = ("received", "probes", "outputs", "migrated", "spilled", "disk_probes")


@dataclass(frozen=True)
class CostModel:
    fixed_per_batch: float = 0.2  # s per micro-batch (scheduling, task launch), uncalibrated
    per_worker: float = 1e-4  # s per worker per micro-batch (state handling), uncalibrated
    per_received: float = 1e-6  # s per new tuple delivered, uncalibrated
    per_probe: float = 1e-6  # s per index probe, uncalibrated
    per_output: float = 1e-7  # s per result pair, uncalibrated
    per_migrated: float = 2e-6  # s per migrated tuple sent or received, uncalibrated
    per_spilled: float = 2e-5  # s per tuple written to disk, uncalibrated
    per_disk_probe: float = 1e-4  # s per probe into a spilled state, uncalibrated
    # s per stored tuple per micro-batch: index maintenance grows with the state (the paper's
    # "per-tuple processing overhead grows monotonically" with ILF); uncalibrated
    per_stored: float = 0.0
    calibration_id: str = "uncalibrated-defaults"

    def worker_cost(self, m: pd.DataFrame) -> pd.Series:
        """Modeled seconds of each (batch, worker) row, from its exact counts."""
        return (self.per_worker + self.per_received * m["received"]
                + self.per_probe * m["probes"] + self.per_output * m["outputs"]
                + self.per_migrated * (m["migrated"] + m["sent"])
                + self.per_spilled * m["spilled"] + self.per_disk_probe * m["disk_probes"]
                + self.per_stored * (m["r_stored"] + m["s_stored"]))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> CostModel:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        return cls.from_dict(json.loads(Path(path).read_text()))


def fit(metrics: pd.DataFrame, batch_wall: pd.Series | None = None) -> dict:
    """NNLS fit of per-worker measured seconds on [1, counts...]; the fixed per-batch cost is
    the median of (wall time of a micro-batch - summed measured worker time / cores) when
    batch wall times are given."""
    from scipy.optimize import nnls

    cols = ["received", "probes", "outputs", "migrated_all", "spilled", "disk_probes", "stored"]
    m = metrics.assign(migrated_all=metrics["migrated"] + metrics["sent"],
                       stored=metrics["r_stored"] + metrics["s_stored"])
    a = np.column_stack([np.ones(len(m))] + [m[c].to_numpy(float) for c in cols])
    scale = np.maximum(a.max(axis=0), 1e-12)
    coef, resid = nnls(a / scale, m["seconds"].to_numpy(float))
    coef = coef / scale
    out = dict(per_worker=coef[0], per_received=coef[1], per_probe=coef[2], per_output=coef[3],
               per_migrated=coef[4], per_spilled=coef[5], per_disk_probe=coef[6],
               per_stored=coef[7])
    pred = a @ coef
    ss = float(((m["seconds"] - m["seconds"].mean()) ** 2).sum()) or 1.0
    out["r2"] = 1 - float(((m["seconds"] - pred) ** 2).sum()) / ss
    if batch_wall is not None:
        work = m.groupby("batch")["seconds"].sum() / 2.0
        out["fixed_per_batch"] = float(max(0.0, (batch_wall - work).median()))
    return out


def calibrate(spark, *, sizes: tuple[int, ...] = (60_000, 180_000), joiners: int = 4,
              seed: int = 0, out: str | Path | None = None) -> dict:
    """Measure the cost constants on this machine (run by ``make calibrate``).

    Runs the engine on synthetic equi-join streams (uniform and Zipf-skewed keys, so outputs
    and probes vary independently of received tuples), with migrations (dynamic with a small
    warm-up) and a tight memory budget in one run (so spill terms have data), then fits
    :func:`fit` on every (micro-batch, worker) row. Returns the constants (and writes them as
    JSON to ``out`` when given), with ``calibration_id`` = time stamp and fit quality.
    """
    from joins.online import run_stream

    rng = np.random.default_rng(seed)
    frames, walls = [], []
    runs = []
    for n in sizes:
        for skew in (0.0, 1.0):
            dom = max(10, n // 20)
            if skew:
                p = 1.0 / np.arange(1, dom + 1) ** skew
                kr = rng.choice(dom, size=n // 4, p=p / p.sum())
            else:
                kr = rng.integers(0, dom, n // 4)
            ks = rng.integers(0, dom, n - n // 4)
            runs.append((pd.DataFrame({"key": kr}), pd.DataFrame({"key": ks})))
    for i, (r, s) in enumerate(runs):
        budget = (len(r) + len(s)) // (joiners * 2) if i == len(runs) - 1 else None
        res = run_stream(spark, r, s, operator="dynamic", joiners=joiners, seed=seed + i,
                         batch_size=max(2_000, (len(r) + len(s)) // 6), progress=False,
                         memory_budget_tuples=budget, spill="disk", warmup=len(r) // 10)
        m = res.metrics.assign(batch=res.metrics["batch"] + 10_000 * i)
        frames.append(m)
        walls.append(m.groupby("batch")["batch_wall_seconds"].first())
    metrics = pd.concat(frames, ignore_index=True)
    consts = fit(metrics, pd.concat(walls))
    consts["calibration_id"] = "calibrated-" + time.strftime("%Y%m%dT%H%M%S")
    model = replace(CostModel(), **{k: float(v) if k != "calibration_id" else v
                                   for k, v in consts.items() if k in CostModel.__dataclass_fields__})
    result = {**model.to_dict(), "r2": consts["r2"], "rows": len(metrics)}
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))
    return result
