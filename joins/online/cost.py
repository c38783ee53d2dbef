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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runtime.cost_model import r_squared


@dataclass(frozen=True)
class CostModel:
    fixed_per_batch: float = 0.2  # s per micro-batch (scheduling, task launch), uncalibrated
    per_worker: float = 1e-4  # s per worker per micro-batch (state handling), uncalibrated
    per_received: float = 1e-6  # s per new tuple delivered, whatever its purpose, uncalibrated
    # s per delivery for storing (index insert), on top of per_received; 0 by default so that
    # calibrations measured before it (calibration/default.json) keep their modeled times:
    # the per-count calibration (joins.online.calibration.calibrate_per_count) measures it
    per_store_received: float = 0.0
    per_probe: float = 1e-6  # s per index probe, uncalibrated
    per_output: float = 1e-7  # s per result pair, uncalibrated
    per_migrated: float = 2e-6  # s per migrated tuple sent or received, uncalibrated
    per_spilled: float = 2e-5  # s per tuple written to the spill store, uncalibrated
    per_disk_probe: float = 1e-4  # s per probe into the spill store, uncalibrated
    # s per stored tuple per micro-batch: index maintenance grows with the state (the paper's
    # "per-tuple processing overhead grows monotonically" with ILF); uncalibrated
    per_stored: float = 0.0
    # s per tuple expired from a window (its share of the tick end beyond per_stored); 0 by
    # default like per_store_received (older calibrations did not measure it)
    per_expired: float = 0.0
    # s per n-way probe: mjoin's probe of a partial combination into a further input's index
    # (its first probe is per_probe's); 0 by default like per_expired
    per_nway_probe: float = 0.0
    calibration_id: str = "uncalibrated-defaults"

    def worker_cost(self, m: pd.DataFrame) -> pd.Series:
        """Modeled seconds of each (batch, worker) row, from its exact counts.

        Metrics made before the engine counted deliveries by purpose and expiry lack
        ``store_received`` and ``expired``: every delivery of those (two-input grid and hash)
        runs was stored, so ``store_received`` is ``received`` there, and nothing expired."""
        return (self.per_worker + self.per_received * m["received"]
                + self.per_store_received * _col(m, "store_received", "received")
                + self.per_probe * m["probes"] + self.per_output * m["outputs"]
                + self.per_migrated * (m["migrated"] + m["sent"])
                + self.per_spilled * m["spilled"] + self.per_disk_probe * m["disk_probes"]
                + self.per_stored * (m["r_stored"] + m["s_stored"])
                + self.per_expired * _col(m, "expired")
                + self.per_nway_probe * _col(m, "nway_probes"))

    def charged(self) -> dict[str, str]:
        """Each constant of :meth:`worker_cost` and the count it charges."""
        return dict(CHARGED)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> CostModel:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        return cls.from_dict(json.loads(Path(path).read_text()))


def _col(m: pd.DataFrame, name: str, fallback: str | None = None):
    if name in m.columns:
        return m[name].fillna(0)  # a program's own count: absent from other programs' rows
    return m[fallback] if fallback is not None else 0


# the constants of CostModel.worker_cost and the metrics column each one charges
CHARGED = {"per_worker": "(each row)", "per_received": "received",
           "per_store_received": "store_received", "per_probe": "probes",
           "per_output": "outputs", "per_migrated": "migrated+sent", "per_spilled": "spilled",
           "per_disk_probe": "disk_probes", "per_stored": "r_stored+s_stored",
           "per_expired": "expired", "per_nway_probe": "nway_probes"}


_TERMS = {"per_received": "received", "per_probe": "probes", "per_output": "outputs",
          "per_migrated": "migrated_all", "per_spilled": "spilled",
          "per_disk_probe": "disk_probes", "per_stored": "stored"}


# charged only when measured apart (given as ``known`` to :func:`fit`): in the engine's grid
# and hash runs every delivery is stored, so a free fit could not tell them from per_received
_KNOWN_ONLY = {"per_store_received": "store_received", "per_expired": "expired"}


def fit(metrics: pd.DataFrame, batch_wall: pd.Series | None = None, cores: int = 1,
        known: dict[str, float] | None = None, clock: str = "seconds") -> dict:
    """NNLS fit of per-worker measured seconds on [1, counts...]; the fixed per-batch cost is
    the median of (wall time of a micro-batch - summed measured worker time / ``cores``) when
    batch wall times are given (indexed by the rows' ``run`` and ``batch``).

    ``known``: constants measured apart (the spill store's, :mod:`joins.online.spill_store`);
    their share of each row's time is taken out before the fit and they are kept as given.
    ``clock``: the measured time fitted (``seconds`` elapsed, or ``cpu_seconds``); the fixed
    per-batch cost is always wall time beyond the elapsed ``seconds``.
    """
    from scipy.optimize import nnls

    known = dict(known or {})
    m = metrics.assign(migrated_all=metrics["migrated"] + metrics["sent"],
                       stored=metrics["r_stored"] + metrics["s_stored"],
                       store_received=_col(metrics, "store_received", "received"),
                       expired=_col(metrics, "expired"))
    terms = {**_TERMS, **_KNOWN_ONLY}
    free = [name for name in _TERMS if name not in known]
    target = m[clock].to_numpy(float) - sum(
        (v * m[terms[k]].to_numpy(float) for k, v in known.items()), np.zeros(len(m)))
    a = np.column_stack([np.ones(len(m))] + [m[_TERMS[c]].to_numpy(float) for c in free])
    scale = np.maximum(a.max(axis=0), 1e-12)
    coef, _ = nnls(a / scale, target)
    coef = coef / scale
    out = {"per_worker": coef[0], **dict(zip(free, coef[1:], strict=True)), **known}
    predicted = a @ coef + (m[clock].to_numpy(float) - target)
    out["r2"] = r_squared(m[clock], predicted)
    if batch_wall is not None:
        work = m.groupby(["run", "batch"])["seconds"].sum() / max(cores, 1)
        out["fixed_per_batch"] = float(max(0.0, (batch_wall - work).median()))
    return out
