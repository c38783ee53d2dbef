"""Experiment kinds: how one sweep point of a figure is run.

A kind is a function ``run_point(ctx: PointContext) -> PointOutcome``. A new figure reuses a
kind; a new kind is one module plus one entry here.
"""

from __future__ import annotations

import importlib
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from experiments.figure_spec import resolve_scaled

KINDS: dict[str, str] = {
    "batch_join": "experiments.kinds.batch_join:run_point",
    "first_iteration": "experiments.kinds.first_iteration:run_point",
    "online_join": "experiments.kinds.online_join:run_point",
    "squall_theory": "experiments.kinds.squall_theory:run_point",
    "single_site_join": "experiments.kinds.single_site:run_point",
    "dcape_join": "experiments.kinds.dcape:run_point",
    "bistream_join": "experiments.kinds.bistream:run_point",
    "arena": "experiments.kinds.arena:run_point",
}

# The join-registry kind (joins.registry) of the algorithm each series of a figure of this
# experiment kind runs; kinds absent here run no registered algorithm.
ALGORITHM_KINDS: dict[str, str] = {
    "batch_join": "batch",
    "first_iteration": "batch",
    "online_join": "online",
    "single_site_join": "online",
    "dcape_join": "online",
    "bistream_join": "online",
    "arena": "online",
}

# An online run's micro-batches (or ticks) where no decision can fall share one Spark step
# up to this many tuples (joins.online.run_stream's ``step_tuples``): its fixed cost (about
# 0.15 s here) is paid once for them all. Local wall time only: every micro-batch reports the
# same counts (tests/online/test_step_tuples.py).
STEP_TUPLES = 200_000

# Kinds whose points at one x share work (batch_join: the distributed inputs,
# experiments.kinds.batch_inputs): their sweeps run x by x, every series of an x in a row.
X_MAJOR_KINDS: frozenset[str] = frozenset({"batch_join"})

# Kinds whose point keeps one core busy, whatever the machine has: the single-site operators
# (DINER and its baselines, MINER, MJoin) run their whole loop in one Spark task. A sweep of
# such a kind runs two points at a time where two cores are idle (experiments.run,
# ``jobs``; experiments.parallel says why each point's wall time stays its own).
ONE_CORE_KINDS: frozenset[str] = frozenset({"single_site_join"})


def series_algorithm(figure: dict, series: str) -> str:
    """The registered algorithm a series runs: its ``algorithm`` key, else the series name."""
    return figure["series"][series].get("algorithm", series)


@dataclass
class PointContext:
    figure: dict  # the figure config, per-scale values resolved
    series: str
    x: Any
    scale: str
    seed: int
    spark_cfg: dict
    calibration: Any
    wall_limit_s: float = 900.0  # local guard; a point running longer is status=timeout
    progress: bool = True


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for k in keys[:-1]:
        tree = tree.setdefault(k, {})
    tree[keys[-1]] = value


def point_settings(pc: PointContext) -> dict[str, Any]:
    """The workload and run settings of this point: figure defaults, series overrides, x."""
    fig = pc.figure
    series = dict(fig["series"][pc.series])
    settings = {
        "workload": resolve_scaled({k: v for k, v in fig["workload"].items() if k != "sizes"},
                                   pc.scale),
        "run": resolve_scaled(fig.get("run", {}), pc.scale),
    }
    settings["workload"].setdefault("params", {}).update(fig["workload"]["sizes"][pc.scale])
    for path, value in resolve_scaled(series.get("overrides", {}), pc.scale).items():
        _set_path(settings, path, value)
    _set_path(settings, fig["x"]["param"], pc.x)
    settings["algorithm"] = series_algorithm(fig, pc.series)
    return settings


@dataclass
class PointOutcome:
    status: str  # ok | oom | timeout | overflow | error
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)  # name -> (value, unit)
    error: str = ""
    spark_version: str = ""
    spark_master: str = ""
    # within-run time series: dicts with metric, value, unit and t (e.g. ILF per micro-batch)
    series_rows: list[dict] = field(default_factory=list)
    # where the modeled time went, per Spark stage (for diagnosis, not written to results)
    stages: Any = None
    tasks: Any = None  # the batch tasks' exact counts behind ``stages`` (not written either)


def point_spark(pc: PointContext) -> tuple[Any, PointOutcome]:
    """The point's Spark session (``pc.spark_cfg``) and an "ok" outcome that records which
    Spark ran it (version and master, the result's provenance)."""
    from runtime.spark_session import get_spark

    spark = get_spark(**pc.spark_cfg)
    return spark, PointOutcome(status="ok", spark_version=spark.version,
                               spark_master=spark.sparkContext.master)


def load_kind(name: str) -> Callable[[PointContext], PointOutcome]:
    if name not in KINDS:
        raise KeyError(f"unknown experiment kind {name!r}; valid: {', '.join(sorted(KINDS))}")
    module, _, attr = KINDS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


class WallClockTimeout(RuntimeError):
    """The point ran past the scale's local wall-clock guard (recorded as status=timeout)."""


@contextmanager
def wall_clock_guard(spark, limit_s: float, label: str,
                     recancel_s: float = 0.25) -> Iterator[None]:
    """Cancel the Spark jobs started inside after ``limit_s`` of local wall time, so one point
    cannot hold up a sweep; the failure then surfaces as :class:`WallClockTimeout`.

    Spark cancels only the group's *active* jobs, and the limit may pass while the driver works
    between two jobs, so once it has passed the group is cancelled again every ``recancel_s``
    until the block ends: a job started late is cancelled too.
    """
    sc = spark.sparkContext
    group = f"point-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, label, interruptOnCancel=True)
    timed_out, done = threading.Event(), threading.Event()

    def _cancel_until_done() -> None:
        if done.wait(limit_s):
            return
        timed_out.set()
        while not done.is_set():
            sc.cancelJobGroup(group)
            done.wait(recancel_s)

    watcher = threading.Thread(target=_cancel_until_done, name=f"guard-{group}", daemon=True)
    watcher.start()
    try:
        yield
    except Exception as exc:
        if timed_out.is_set():
            raise WallClockTimeout(f"local wall-clock guard of {limit_s:.0f}s reached") from exc
        raise
    finally:
        done.set()
        watcher.join()
        for prop in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(prop, None)
