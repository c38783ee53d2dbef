"""The paper's regime of a batch point by each stage's own measured growth (issue 37, rule 2).

Why: :mod:`experiments.paper_regime` grows every task by two factors from the sizes alone
(records, output pairs), which holds where the two relations grow together (amjoin/fig5) but
not on Fig. 9's Small-Large workload, whose stages grow with different relations (its
validation there fails). This rule measures instead how each stage grows.

The rule, one for a batch point: the data sizes move on the straight line from the run's to the
paper's (:func:`path_sizes`: each size ``run + t (paper - run)``, an x that is a data size
included, the paper's sizes being :func:`experiments.paper_regime.grown_params`'); the point
runs at ``t = 0`` and again where its input has ``factor`` times the records. Stage i of one
run is stage i of the other (the same plan shape: stages and tasks per stage, else
:class:`PlanMismatch`: the rule does not apply); each stage's records in, shuffle bytes and
rows produced are fitted as affine in t through the two runs and read at the target t (the
paper's sizes: t = 1), times the executors as run over the paper's (the fig5 rule's records per
partition: the tasks as run carry what a task of the paper's E does). Each task keeps its share
of its stage's counts; the modeled time is :mod:`runtime.cost_model`'s on the tasks as run.

``python -m experiments.regime_fit figure=<paper>/<fig> series=<s> x=<x> [fit=2] [check=4]
[scale=small]`` validates it: runs the point at 1x, ``fit`` x and ``check`` x the records,
fits on the first two, and prints per stage the counts extrapolated to the third (on the same
executors) against the real ones, with each total's relative error. Rule 2 accepts it where they
agree within 5% at a ``check`` of 4 or more. It writes nothing to ``results/``.

On amjoin/fig9 it does not (2026-11-28, x = 10000, fit 2x, check 4x): DER's and DDR's records
in are 42% over the real ones, rows produced 8-13% under, and IB-Join's 4x plan has a stage
more (amjoin/fig9's choices.paper_regime: why no affine fit follows that workload's counts), so
no figure uses it: it is a validation tool only.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import pandas as pd

from experiments.kinds import PointContext, point_settings
from experiments.paper_regime import DATA_SIZES, grown_params, records
from runtime.cost_model import BatchCosts, per_task_share, scaled_counts, stage_table

USAGE = ("usage: python -m experiments.regime_fit figure=<paper>/<fig> series=<series> x=<x> "
         "[fit=2] [check=4] [scale=small]")
# A stage's counts the rule fits (shuffle bytes: read + write, as stage_table sums them).
FITTED = ("records_in", "shuffle_bytes", "rows_produced")


class PlanMismatch(ValueError):
    """The two runs' plans differ in shape, so no stage of one is a stage of the other."""


def path_sizes(generator: str, run: dict[str, Any], paper: dict[str, Any],
               t: float) -> dict[str, Any]:
    """The generator's data sizes at ``t`` on the straight line from ``run`` (t = 0) to
    ``paper`` (t = 1); integer sizes stay integers."""
    out = {}
    for name in DATA_SIZES[generator]:
        if name in run and name in paper:
            value = float(run[name]) + t * (float(paper[name]) - float(run[name]))
            out[name] = int(round(value)) if isinstance(run[name], int) else value
    return out


def t_at(generator: str, run: dict[str, Any], paper: dict[str, Any], factor: float) -> float:
    """Where on the line the input holds ``factor`` times the run's records (records are
    affine in t, so this t is exact)."""
    n_run, n_paper = records(generator, run), records(generator, paper)
    return (factor - 1.0) * n_run / (n_paper - n_run)


def plan_shape(table: pd.DataFrame) -> list[int]:
    """A stage table's shape: its stages' task counts, in order."""
    return [int(n) for n in table["tasks"]]


def require_same_plan(run: pd.DataFrame, larger: pd.DataFrame) -> None:
    """Refuse two stage tables whose plans differ (stage count or tasks per stage)."""
    a, b = plan_shape(run), plan_shape(larger)
    if a != b:
        raise PlanMismatch(f"the plans differ ({len(a)} stages, tasks {a} vs {len(b)} stages, "
                           f"tasks {b}): stage i of one is not stage i of the other, so the "
                           f"rule does not apply")


def fitted_counts(run: pd.DataFrame, larger: pd.DataFrame, t_larger: float,
                  t_target: float) -> pd.DataFrame:
    """Per stage, each fitted count at ``t_target`` on the line through (0, run) and
    (t_larger, larger), clipped at 0 (a count cannot be negative)."""
    require_same_plan(run, larger)
    out = pd.DataFrame(index=range(len(run)))
    for c in FITTED:
        a = run[c].to_numpy(float)
        b = (larger[c].to_numpy(float) - a) / t_larger
        out[c] = (a + b * t_target).clip(min=0.0)
    return out


def _carry(stage: pd.DataFrame, column: str, total: float) -> tuple[pd.DataFrame, float]:
    """The stage's tasks and the factor that brings ``column`` to ``total``; a count the stage
    did not have as run is first spread evenly over its tasks."""
    held = float(stage[column].sum())
    if held > 0 or total == 0:
        return stage, (total / held if held > 0 else 1.0)
    stage = stage.copy()
    stage[column] = 1.0
    return stage, total / len(stage)


def extrapolated_tasks(tasks: pd.DataFrame, target: pd.DataFrame,
                       per_partition: float) -> pd.DataFrame:
    """The run's tasks, stage by stage (stage_table's order), each carrying its share of its
    stage's ``target`` counts times ``per_partition``."""
    ordered = tasks.sort_values(["stage_id", "stage_attempt", "task_index"])
    stages = [s for _, s in ordered.groupby(["stage_id", "stage_attempt"], sort=True)]
    out = []
    for stage, want in zip(stages, target.itertuples(index=False), strict=True):
        stage = stage.assign(shuffle_bytes=stage["shuffle_read_bytes"] + stage["shuffle_write_bytes"])
        stage, f_rec = _carry(stage, "records_in", want.records_in * per_partition)
        stage, f_rows = _carry(stage, "rows_produced", want.rows_produced * per_partition)
        if float(stage["shuffle_bytes"].sum()) == 0 and want.shuffle_bytes > 0:
            stage = stage.assign(shuffle_write_bytes=1.0, shuffle_read_bytes=0.0,
                                 shuffle_bytes=1.0)
        _, f_shuf = _carry(stage, "shuffle_bytes", want.shuffle_bytes * per_partition)
        out.append(scaled_counts(stage.drop(columns="shuffle_bytes"), f_rec, f_rows, f_shuf))
    return pd.concat(out, ignore_index=True) if out else tasks.iloc[0:0]


def fit_table(tasks: pd.DataFrame, larger_tasks: pd.DataFrame, executors: int,
              costs: BatchCosts, schedule: str, t_larger: float, t_target: float,
              per_partition: float = 1.0) -> pd.DataFrame:
    """The stage table of the run's tasks carrying the fit's counts at ``t_target``."""
    run = stage_table(tasks, executors, costs, schedule)
    larger = stage_table(larger_tasks, executors, costs, schedule)
    target = fitted_counts(run, larger, t_larger, t_target)
    return stage_table(extrapolated_tasks(tasks, target, per_partition), executors, costs,
                       schedule)


def grown_context(pc: PointContext, t: float) -> PointContext:
    """The point at ``t`` on the line to the paper's sizes."""
    wl = point_settings(pc)["workload"]
    paper = grown_params(wl["generator"], wl["params"], pc.figure["workload"]["sizes"]["paper"])
    sizes = path_sizes(wl["generator"], wl["params"], paper, t)
    figure = copy.deepcopy(pc.figure)
    held = figure["workload"]["sizes"][pc.scale]
    figure["workload"]["sizes"][pc.scale] = {**held, **{k: sizes[k] for k in held if k in sizes}}
    x_name = figure["x"]["param"].rsplit(".", 1)[-1]
    x = sizes.get(x_name, pc.x) if figure["x"]["param"].startswith("workload.params.") else pc.x
    return PointContext(figure=figure, series=pc.series, x=x, scale=pc.scale, seed=pc.seed,
                        spark_cfg=pc.spark_cfg, calibration=pc.calibration,
                        progress=pc.progress, wall_limit_s=pc.wall_limit_s)


def run_at(pc: PointContext, factor: float) -> tuple[float, Any]:
    """The point run where its input has ``factor`` times the records: (t, outcome)."""
    from experiments.kinds.batch_join import run_point

    wl = point_settings(pc)["workload"]
    paper = grown_params(wl["generator"], wl["params"], pc.figure["workload"]["sizes"]["paper"])
    t = t_at(wl["generator"], wl["params"], paper, factor)
    grown = grown_context(pc, t)
    outcome = run_point(grown)
    if outcome.status != "ok":
        raise RuntimeError(f"{pc.figure['id']} {pc.series} at {factor}x the records: "
                           f"{outcome.status} {outcome.error}")
    return t, outcome


def validate(argv: list[str]) -> tuple[pd.DataFrame, dict[str, float]]:
    """Run the point at 1x, fit x and check x its records; the fit's extrapolation to the
    check run against it (per stage and totals) and a summary."""
    from experiments.config import compose
    from experiments.figure_spec import plain, with_seed_replicates
    from experiments.regime_check import compare
    from experiments.run import UsageError, point_context, require_figure, require_series
    from experiments.stages import _x

    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    if any(k not in opts for k in ("figure", "series", "x")) or len(opts) != len(argv):
        raise UsageError(USAGE)
    require_figure(opts["figure"])
    scale = opts.get("scale", "small")
    cfg = compose([f"figure={opts['figure']}", f"scale={scale}", "spark=local"])
    figure = with_seed_replicates(plain(cfg.figure))
    require_series(figure, opts["series"])
    pc = point_context(cfg, figure, opts["series"], _x(figure, scale, opts["x"]))
    _, base = run_at(pc, 1.0)
    t_fit, fit = run_at(pc, float(opts.get("fit", 2)))
    t_check, check = run_at(pc, float(opts.get("check", 4)))
    e = int(point_settings(pc)["run"]["executors"])
    schedule = point_settings(pc)["run"].get("schedule", "list")
    costs = pc.calibration.batch
    extrap = fit_table(base.tasks, fit.tasks, e, costs, schedule, t_fit, t_check)
    real = check.stages
    try:  # the check run's own plan may differ: then the fit does not predict it, shown
        require_same_plan(base.stages, real)
    except PlanMismatch as exc:
        print(f"{exc}; the check run's stages:\n{real.to_string(index=False)}", file=sys.stderr)
    summary = {"t_fit": t_fit, "t_check": t_check, "plan_matches": float(
                   plan_shape(base.stages) == plan_shape(real)),
               "modeled_base": float(base.stages["modeled_s"].sum()),
               "modeled_fit_run": float(fit.stages["modeled_s"].sum()),
               "modeled_real": float(real["modeled_s"].sum()),
               "modeled_extrap": float(extrap["modeled_s"].sum()),
               "per_task_share_real": per_task_share(real),
               "per_task_share_extrap": per_task_share(extrap)}
    return compare(extrap, real), summary


def main(argv: list[str]) -> int:
    from experiments import regime_check

    return regime_check.main(argv, validate)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
