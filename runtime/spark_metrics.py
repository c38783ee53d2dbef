"""Per-stage and per-task metrics of one run, read from Spark's own event log.

The session writes an uncompressed, non-rolling event log (see spark_session). A
:class:`TaskMetricsCapture` remembers where the log ended before the run and, after it, reads
every task that ran since: records in and out, rows produced by SQL operators, shuffle bytes,
executor run time. From these, algorithms report imbalance (max/mean task records) and
:mod:`runtime.cost_model` derives a modeled makespan on E executors.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from runtime.spark_session import event_log_path

# Spark jobs whose description starts with this are preparation the paper does not count
# (e.g. DER's record ids, marked by joins.api.uncounted): their tasks are left out.
UNCOUNTED_JOB_PREFIX = "uncounted:"

TASK_COLUMNS = [
    "job_id", "stage_id", "stage_attempt", "task_index", "executor", "run_ms", "cpu_ns",
    "input_records", "input_bytes", "shuffle_read_records", "shuffle_read_bytes",
    "shuffle_write_records", "shuffle_write_bytes", "output_records", "output_bytes",
    "rows_produced", "failed",
]


def _task_row(event: dict, stage_job: dict[int, int]) -> dict:
    info, metrics = event.get("Task Info", {}), event.get("Task Metrics") or {}
    inp = metrics.get("Input Metrics", {})
    out = metrics.get("Output Metrics", {})
    srd = metrics.get("Shuffle Read Metrics", {})
    swr = metrics.get("Shuffle Write Metrics", {})
    produced = sum(
        int(a.get("Update", 0))
        for a in info.get("Accumulables", [])
        if a.get("Name") == "number of output rows" and str(a.get("Update", "0")).isdigit()
    )
    stage = event["Stage ID"]
    return {
        "job_id": stage_job.get(stage, -1),
        "stage_id": stage,
        "stage_attempt": event.get("Stage Attempt ID", 0),
        "task_index": info.get("Index", 0),
        "executor": str(info.get("Executor ID", "")),
        "run_ms": metrics.get("Executor Run Time", 0),
        "cpu_ns": metrics.get("Executor CPU Time", 0),
        "input_records": inp.get("Records Read", 0),
        "input_bytes": inp.get("Bytes Read", 0),
        "shuffle_read_records": srd.get("Total Records Read", 0),
        "shuffle_read_bytes": srd.get("Remote Bytes Read", 0) + srd.get("Local Bytes Read", 0),
        "shuffle_write_records": swr.get("Shuffle Records Written", 0),
        "shuffle_write_bytes": swr.get("Shuffle Bytes Written", 0),
        "output_records": out.get("Records Written", 0),
        "output_bytes": out.get("Bytes Written", 0),
        "rows_produced": produced,
        "failed": bool(info.get("Failed", False) or info.get("Killed", False)),
    }


def union_parts(rdd_info: list[dict], tasks: int) -> list[int]:
    """Partition counts of the union children a stage's tasks read, in task-index order.

    A DataFrame union concatenates its children's partitions, so one stage of a plan that
    unions sub-joins (AM-Join, Tree-Join's iterations) runs tasks of very different work: its
    max/mean task load mixes the sub-joins' sizes with their balance. Nested unions are
    flattened; a stage without a union is one part.
    """
    rdds = {r["RDD ID"]: r for r in rdd_info}
    children = {p for r in rdd_info for p in r.get("Parent IDs", [])}
    roots = [r for r in rdd_info if r["RDD ID"] not in children
             and r.get("Number of Partitions") == tasks]
    if not roots:
        return [tasks]

    def parts(rdd_id: int) -> list[int]:
        r = rdds[rdd_id]
        parents = [p for p in r.get("Parent IDs", []) if p in rdds]
        if r.get("Name") == "UnionRDD" and parents:
            flat = [n for p in parents for n in parts(p)]
            if sum(flat) == r["Number of Partitions"]:
                return flat
        elif len(parents) == 1 and rdds[parents[0]]["Number of Partitions"] == r["Number of Partitions"]:
            return parts(parents[0])  # a narrow one-to-one step
        return [r["Number of Partitions"]]

    return parts(max(r["RDD ID"] for r in roots))


@dataclass
class RunMetrics:
    tasks: pd.DataFrame  # one row per successful task attempt (TASK_COLUMNS)
    jobs: int
    # (stage, attempt) -> partition counts of the union children its tasks read
    stage_parts: dict[tuple[int, int], list[int]] = field(default_factory=dict)

    def part_of(self, stage_id: int, stage_attempt: int, task_index: pd.Series) -> pd.Series:
        """The union child (0, 1, ...) each task of a stage read."""
        whole = [int(task_index.max()) + 1] if len(task_index) else []
        bounds = np.cumsum(self.stage_parts.get((stage_id, stage_attempt), whole))
        return pd.Series(np.searchsorted(bounds, task_index.to_numpy(), side="right"),
                         index=task_index.index)

    @property
    def stages(self) -> pd.DataFrame:
        """Per stage: task count and sums/maxima of the task metrics."""
        if self.tasks.empty:
            return pd.DataFrame()
        g = self.tasks.groupby(["stage_id", "stage_attempt"])
        out = g.agg(
            tasks=("task_index", "size"),
            records_in=("records_in", "sum"),
            max_task_records_in=("records_in", "max"),
            mean_task_records_in=("records_in", "mean"),
            rows_produced=("rows_produced", "sum"),
            max_task_rows_produced=("rows_produced", "max"),
            shuffle_read_bytes=("shuffle_read_bytes", "sum"),
            shuffle_write_bytes=("shuffle_write_bytes", "sum"),
            run_ms=("run_ms", "sum"),
            max_task_run_ms=("run_ms", "max"),
        )
        return out.reset_index()

    def summary(self) -> dict[str, float]:
        """Whole-run totals and the imbalance of the heaviest reduce-side stage.

        The reduce side (stages reading shuffled data) is where a join's key skew lands; a run
        without shuffles (broadcast) falls back to its heaviest stage.
        """
        t = self.tasks
        if t.empty:
            return {"spark_jobs": self.jobs, "spark_stages": 0, "spark_tasks": 0}
        st = self.stages
        reduce_side = st[st["shuffle_read_bytes"] > 0]
        if not reduce_side.empty:
            st = reduce_side
        work = st["records_in"] + st["rows_produced"]
        heavy = st.loc[work.idxmax()]
        tasks = t[(t.stage_id == heavy.stage_id) & (t.stage_attempt == heavy.stage_attempt)]
        load = tasks["records_in"] + tasks["rows_produced"]
        part = self.part_of(int(heavy.stage_id), int(heavy.stage_attempt), tasks["task_index"])
        by_part = load.groupby(part)
        largest = load[part == by_part.sum().idxmax()]
        return {
            "spark_jobs": self.jobs,
            "spark_stages": len(st),
            "spark_tasks": len(t),
            "shuffle_read_bytes": float(t.shuffle_read_bytes.sum()),
            "shuffle_write_bytes": float(t.shuffle_write_bytes.sum()),
            "input_records": float(t.input_records.sum()),
            "rows_produced": float(t.rows_produced.sum()),
            "max_task_records": float(load.max()),
            "mean_task_records": float(load.mean()),
            "task_imbalance": float(load.max() / load.mean()) if load.mean() > 0 else 1.0,
            # the same stage seen per union child: how many, and the balance of the one with
            # the most work (a join's own balance, apart from the sizes of what it is unioned with)
            "stage_union_parts": float(by_part.ngroups),
            "largest_part_task_imbalance":
                float(largest.max() / largest.mean()) if largest.mean() > 0 else 1.0,
            "task_run_ms_total": float(t.run_ms.sum()),
        }


class TaskMetricsCapture:
    """Context manager: the tasks of every Spark job started inside the block."""

    def __init__(self, spark, settle_s: float = 0.2, timeout_s: float = 30.0) -> None:
        self.spark = spark
        self.settle_s = settle_s
        self.timeout_s = timeout_s
        self.path: Path | None = None
        self.offset = 0
        self.result: RunMetrics | None = None

    def __enter__(self) -> TaskMetricsCapture:
        self.path = event_log_path(self.spark)
        self.offset = self.path.stat().st_size
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.result = self.collect()

    def _read_events(self) -> list[dict]:
        assert self.path is not None
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        end = data.rfind(b"\n")
        if end < 0:
            return []
        return [json.loads(line) for line in data[: end + 1].splitlines() if line.strip()]

    def collect(self) -> RunMetrics:
        """Wait until every job started in the block has ended in the log, then parse it."""
        deadline = time.monotonic() + self.timeout_s
        last_len = -1
        while True:
            events = self._read_events()
            starts = {e["Job ID"] for e in events if e["Event"] == "SparkListenerJobStart"}
            ends = {e["Job ID"] for e in events if e["Event"] == "SparkListenerJobEnd"}
            settled = len(events) == last_len
            if (starts <= ends and settled) or time.monotonic() > deadline:
                break
            last_len = len(events)
            time.sleep(self.settle_s)
        stage_job: dict[int, int] = {}
        stage_parts = {
            (info["Stage ID"], info.get("Stage Attempt ID", 0)):
                union_parts(info.get("RDD Info", []), info.get("Number of Tasks", 0))
            for e in events if e["Event"] == "SparkListenerStageCompleted"
            for info in [e["Stage Info"]]
        }
        uncounted_stages: set[int] = set()
        for e in events:
            if e["Event"] == "SparkListenerJobStart":
                description = (e.get("Properties") or {}).get("spark.job.description") or ""
                for s in e.get("Stage IDs", []):
                    stage_job[s] = e["Job ID"]
                    if description.startswith(UNCOUNTED_JOB_PREFIX):
                        uncounted_stages.add(s)
        rows = [
            _task_row(e, stage_job)
            for e in events
            if e["Event"] == "SparkListenerTaskEnd"
            and e.get("Task End Reason", {}).get("Reason", "Success") == "Success"
            and e["Stage ID"] not in uncounted_stages
        ]
        tasks = pd.DataFrame(rows, columns=TASK_COLUMNS)
        tasks["records_in"] = tasks["input_records"] + tasks["shuffle_read_records"]
        return RunMetrics(tasks=tasks, jobs=len(starts), stage_parts=stage_parts)
