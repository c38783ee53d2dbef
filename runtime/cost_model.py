"""Modeled time: calibrated costs of exact counts, scheduled onto E executor slots.

Two cores cannot show what E executors do, so a batch run's time on E executors is modeled:
each task's cost is a linear function of its exact counts (records read, rows produced by SQL
operators, shuffle bytes), with constants measured on this machine by ``make calibrate``; each
stage's tasks are list-scheduled in index order onto E slots (as Spark launches them), and the
stage makespans are summed. Driver-side work is not part of the model.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runtime.paths import ROOT

CALIBRATION_DIR = ROOT / "calibration"


def r_squared(measured, predicted) -> float:
    """Coefficient of determination of a fit (1.0 when the measured values do not vary)."""
    y, f = np.asarray(measured, float), np.asarray(predicted, float)
    ss = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - f) ** 2).sum()) / ss if ss > 0 else 1.0


@dataclass(frozen=True)
class BatchCosts:
    """Seconds per unit of each exact count of a task."""

    per_task: float = 0.005
    per_record_in: float = 2.0e-7
    per_row_produced: float = 5.0e-8
    per_shuffle_byte: float = 2.0e-9

    def task_costs(self, tasks: pd.DataFrame) -> np.ndarray:
        return (
            self.per_task
            + self.per_record_in * tasks["records_in"].to_numpy(float)
            + self.per_row_produced * tasks["rows_produced"].to_numpy(float)
            + self.per_shuffle_byte
            * (tasks["shuffle_read_bytes"] + tasks["shuffle_write_bytes"]).to_numpy(float)
        )


@dataclass(frozen=True)
class Calibration:
    id: str
    machine: str
    batch: BatchCosts
    online: dict  # constants of joins.online's cost model, as measured
    note: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {"id": self.id, "machine": self.machine, "batch": asdict(self.batch),
             "online": self.online, "note": self.note},
            indent=2, sort_keys=True,
        )


def calibration_id(batch: dict, online: dict) -> str:
    blob = json.dumps({"batch": batch, "online": online}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


def load_calibration(path: Path | None = None) -> Calibration:
    """The machine's own calibration if `make calibrate` ran, else the committed default."""
    if path is None:
        local = CALIBRATION_DIR / "local.json"
        path = local if local.exists() else CALIBRATION_DIR / "default.json"
    data = json.loads(Path(path).read_text())
    return Calibration(
        id=data["id"], machine=data.get("machine", ""), batch=BatchCosts(**data["batch"]),
        online=data.get("online", {}), note=data.get("note", ""),
    )


def slot_loads(costs: np.ndarray, slots: int) -> np.ndarray:
    """Busy time of each of ``slots`` slots when tasks launch in order on the first free slot."""
    free = [0.0] * max(1, slots)
    heapq.heapify(free)
    for c in costs:
        heapq.heappush(free, heapq.heappop(free) + float(c))
    return np.asarray(free)


def list_schedule(costs: np.ndarray, slots: int) -> float:
    """Makespan of tasks launched in order, each on the slot that frees up first."""
    if len(costs) == 0:
        return 0.0
    return float(slot_loads(costs, min(slots, len(costs))).max())


def lpt_schedule(costs: np.ndarray, slots: int) -> float:
    """Longest-processing-time-first makespan (a lower-variance alternative)."""
    return list_schedule(np.sort(np.asarray(costs))[::-1], slots)


def modeled_makespan(tasks: pd.DataFrame, executors: int, costs: BatchCosts,
                     schedule: str = "list") -> float:
    """Sum over stages of the stage's makespan on `executors` single-core slots."""
    return float(stage_table(tasks, executors, costs, schedule)["modeled_s"].sum())


STAGE_COLUMNS = ["stage_id", "attempt", "tasks", "records_in", "rows_produced", "shuffle_bytes",
                 "max_task_s", "modeled_s", "constants_s", "busy_s", "slot_imbalance"]


def stage_table(tasks: pd.DataFrame, executors: int, costs: BatchCosts,
                schedule: str = "list") -> pd.DataFrame:
    """Per stage attempt: its tasks' exact counts, its costliest task, its modeled makespan on
    ``executors`` slots (the column that sums to the run's modeled time), the part of it the
    per-task constant alone would take (its waves of tasks, ⌈tasks / executors⌉ x per_task):
    what a run of many stages pays whatever its counts; its summed task cost and the max/mean
    busy time of the slots when its tasks launch in order (:func:`executor_imbalance`)."""
    rows = []
    for (sid, attempt), stage in _stages(tasks):
        c = costs.task_costs(stage)
        loads = slot_loads(c, executors)
        makespan = lpt_schedule(c, executors) if schedule == "lpt" else float(loads.max())
        rows.append([int(sid), int(attempt), len(stage), int(stage["records_in"].sum()),
                     int(stage["rows_produced"].sum()),
                     int((stage["shuffle_read_bytes"] + stage["shuffle_write_bytes"]).sum()),
                     float(c.max()), makespan, -(-len(stage) // executors) * costs.per_task,
                     float(c.sum()),
                     float(loads.max() / loads.mean()) if loads.mean() > 0 else 1.0])
    return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def scaled_counts(tasks: pd.DataFrame, records: float, rows: float,
                  shuffle: float | None = None) -> pd.DataFrame:
    """The same tasks, each carrying more data: records in multiplied by ``records``, shuffle
    bytes by ``shuffle`` (``records`` when not given), rows produced by ``rows``; the task count
    and the per-task constant stay.

    Why: the per-task constant weighs against per-record work as the records per task decide,
    so a plan's time at larger sizes is this plan's tasks carrying those sizes' counts
    (experiments.paper_regime and experiments.regime_fit write the factors' rules)."""
    out = tasks.copy()
    out["records_in"] = out["records_in"].astype(float) * records
    for column in ("shuffle_read_bytes", "shuffle_write_bytes"):
        out[column] = out[column].astype(float) * (records if shuffle is None else shuffle)
    out["rows_produced"] = out["rows_produced"].astype(float) * rows
    return out


def per_task_share(table: pd.DataFrame) -> float:
    """The share of a :func:`stage_table`'s modeled time that its per-task constant's waves
    alone would take (0 for an empty table)."""
    total = float(table["modeled_s"].sum()) if not table.empty else 0.0
    return float(table["constants_s"].sum()) / total if total > 0 else 0.0


def _stages(tasks: pd.DataFrame):
    """Each stage attempt's tasks, in stage order, tasks in launch (index) order."""
    if tasks.empty:
        return iter(())
    return iter(tasks.sort_values(["stage_id", "task_index"])
                .groupby(["stage_id", "stage_attempt"], sort=True))


def executor_imbalance(table: pd.DataFrame) -> float:
    """Max/mean busy time over the E slots in the costliest stage of a :func:`stage_table`
    (1 = perfectly balanced).

    Unlike max/mean *task* load, this is the load balance the paper is about: a stage that mixes
    many small tasks of one sub-join with fewer large ones of another is balanced if the slots
    end up equally busy, and a single hot task leaves E-1 slots idle however the rest look.
    """
    if table.empty:
        return 1.0
    return float(table.loc[table["busy_s"].idxmax(), "slot_imbalance"])
