"""Structured configs: a typo or an unknown name fails at once, listing what is valid."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class SparkConfig:
    name: str = "local"
    master: str = "local[2]"
    master_env: str | None = None  # cluster presets read the master URL from this variable
    driver_memory: str = "4g"
    conf: dict[str, str] = field(default_factory=dict)


@dataclass
class ScaleConfig:
    name: str = "small"
    results_root: str = "results"  # published reproduction; other scales write to scratch/
    point_wall_limit_s: float = 900.0  # local guard: a point running longer is status=timeout
    description: str = ""


@dataclass
class FigureConfig:
    id: str = MISSING  # "<paper>/<fig>"
    paper: str = MISSING
    title: str = MISSING
    kind: str = MISSING  # experiment kind that runs one point (experiments.kinds registry)
    headline: bool = False
    description: str = ""
    x: dict[str, Any] = field(default_factory=dict)  # name, label, values, values_by_scale
    series: dict[str, Any] = field(default_factory=dict)  # series name -> parameters
    # seed replicates of series, expanded into series at load
    # (experiments.figure_spec.with_seed_replicates)
    seed_replicates: list[Any] = field(default_factory=list)
    workload: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)  # kind-specific settings (per scale)
    rules: dict[str, Any] = field(default_factory=dict)  # failure rules: budgets, deadlines
    metrics: list[str] = field(default_factory=list)
    # another figure whose runs this one draws (its own metrics, plot and targets): see
    # experiments.figures.results_id
    runs_of: str = ""
    plot: dict[str, Any] = field(default_factory=dict)
    paper_values: list[Any] = field(default_factory=list)  # overlay: the paper's numbers
    choices: dict[str, Any] = field(default_factory=dict)  # ambiguities resolved, with reasons
    targets: list[Any] = field(default_factory=list)
    # beyond the papers (the arena): the report's decision table (experiments.decision_table)
    decision: dict[str, Any] = field(default_factory=dict)


@dataclass
class PointConfig:
    series: str | None = None
    x: Any = None


@dataclass
class RootConfig:
    spark: SparkConfig = field(default_factory=SparkConfig)
    scale: ScaleConfig = field(default_factory=ScaleConfig)
    figure: FigureConfig = field(default_factory=FigureConfig)
    point: PointConfig = field(default_factory=PointConfig)
    seed: int = 0
    force: bool = False  # redo points that already have results
    # copy a point from another figure's finished point with the same settings
    # (experiments.point_cache); with force=true only one made by this very commit
    reuse: bool = True
    progress: bool = True
    results_root: str | None = None  # override the scale's results folder
    # points run at once: "auto" (two for a kind that needs one core, ONE_CORE_KINDS, on a
    # machine with two cores or more that other work leaves idle; else one) or a number
    # (capped at the cores; kinds that use every core always run one at a time)
    jobs: str = "auto"


def register() -> None:
    cs = ConfigStore.instance()
    cs.store(name="schema", node=RootConfig)


register()
