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


# The calibration runs: (operator, joiners, R tuples, S tuples, key domain, Zipf z of R's keys,
# tuples per micro-batch, spill). Each varies one thing against the others, so that the terms
# the fit separates are not collinear: few vs many outputs per probe (domain, skew), grid
# replication vs one joiner per key (probes and stored per received tuple), small vs large
# micro-batches (fixed vs per-tuple costs), 4 vs 16 joiners (per-worker cost), migrations
# (dynamic) and spills (a tight budget, really written to disk).
CALIBRATION_RUNS: tuple[tuple, ...] = (
    ("shj", 4, 60_000, 180_000, 1_000_000, 0.0, 20_000, None),
    ("static_mid", 4, 60_000, 180_000, 1_000_000, 0.0, 20_000, None),
    ("static_mid", 16, 60_000, 180_000, 1_000_000, 0.0, 40_000, None),
    ("shj", 4, 60_000, 180_000, 20_000, 0.0, 20_000, None),
    ("static_mid", 4, 30_000, 90_000, 3_000, 0.0, 8_000, None),
    ("static_mid", 4, 60_000, 180_000, 10_000, 1.0, 30_000, None),
    ("shj", 16, 200_000, 200_000, 1_000_000, 0.0, 50_000, None),
    ("dynamic", 4, 60_000, 180_000, 30_000, 1.0, 20_000, None),
    ("dynamic", 16, 40_000, 200_000, 100_000, 0.0, 30_000, None),
    ("static_mid", 4, 60_000, 180_000, 50_000, 0.0, 20_000, "spill"),
)


def _keys(rng: np.random.Generator, n: int, domain: int, z: float) -> np.ndarray:
    if z == 0:
        return rng.integers(0, domain, n)
    p = 1.0 / np.arange(1, domain + 1) ** z
    return rng.choice(domain, size=n, p=p / p.sum())


def calibrate(spark, *, runs: tuple[tuple, ...] = CALIBRATION_RUNS, repeats: int = 3,
              seed: int = 0, out: str | Path | None = None) -> dict:
    """Measure the cost constants on this machine (run by ``make calibrate``).

    Runs the engine on the synthetic equi-join streams of :data:`CALIBRATION_RUNS`, each
    ``repeats`` times (the counts are deterministic, the times are not: a (micro-batch,
    worker) row's time is the median over the repeats), then fits :func:`fit` on every row.
    Returns the constants (and writes them as JSON to ``out`` when given), with
    ``calibration_id`` = time stamp and fit quality: ``r2`` over the rows, ``r2_runs`` over
    the runs' total worker seconds.
    """
    from joins.online import run_stream

    rng = np.random.default_rng(seed)
    frames, walls = [], []
    for i, (operator, joiners, n_r, n_s, domain, z, batch, spill) in enumerate(runs):
        r = pd.DataFrame({"key": _keys(rng, n_r, domain, z)})
        s = pd.DataFrame({"key": _keys(rng, n_s, domain, 0.0)})
        options = dict(operator=operator, joiners=joiners, seed=seed + i, batch_size=batch,
                       progress=False)
        if operator == "dynamic":
            options["warmup"] = n_r // 10
        if spill:
            options.update(memory_budget_tuples=(n_r + n_s) // (joiners * 2), spill="disk")
        measured = [run_stream(spark, r, s, **options).metrics for _ in range(repeats)]
        keys = ["batch", "worker"]
        m = measured[0].sort_values(keys).reset_index(drop=True)
        for other in measured[1:]:
            other = other.sort_values(keys).reset_index(drop=True)
            if not other[["received", "outputs", "migrated"]].equals(
                    m[["received", "outputs", "migrated"]]):
                raise RuntimeError("calibration run's counts differ between repeats")
        m["seconds"] = np.median([o.sort_values(keys)["seconds"].to_numpy() for o in measured],
                                 axis=0)
        wall = np.median([o.groupby("batch")["batch_wall_seconds"].first().to_numpy()
                          for o in measured], axis=0)
        m = m.assign(batch=m["batch"] + 10_000 * i)
        frames.append(m)
        walls.append(pd.Series(wall, index=sorted(m["batch"].unique())))
    metrics = pd.concat(frames, ignore_index=True)
    consts = fit(metrics, pd.concat(walls))
    consts["calibration_id"] = "calibrated-" + time.strftime("%Y%m%dT%H%M%S")
    model = replace(CostModel(), **{k: float(v) if k != "calibration_id" else v
                                   for k, v in consts.items() if k in CostModel.__dataclass_fields__})
    # single rows are a few ms of numpy and noisy; what modeled time sums is a run's total
    run = metrics["batch"] // 10_000
    measured = metrics.groupby(run)["seconds"].sum()
    predicted = model.worker_cost(metrics).groupby(run).sum()
    r2_runs = 1 - float(((measured - predicted) ** 2).sum()) / float(
        ((measured - measured.mean()) ** 2).sum() or 1.0)
    result = {**model.to_dict(), "r2": consts["r2"], "r2_runs": r2_runs, "rows": len(metrics)}
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))
    return result
