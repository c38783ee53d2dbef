"""Where one batch point's modeled time goes, stage by stage.

``python -m experiments.stages figure=<paper>/<fig> series=<series> x=<x> [scale=small]
[spark=local]`` runs the point as the runner does, writes nothing to ``results/``, and prints
each Spark stage's tasks, exact counts, costliest task and modeled makespan on the figure's E
executors; the makespans sum to the point's modeled time. It answers "why is this point
slow?": a straggler task, a stage with many waves of small tasks, or many stages (the
``constants_s`` column: the waves of the calibrated per-task constant alone).

``regime=true`` prints the same stages in the paper's regime too (:mod:`experiments.paper_regime`:
each task's counts grown to what it carries at the paper's sizes), for figures that have one:
where a verdict judged in the regime is decided, stage by stage.
"""

from __future__ import annotations

import sys

import pandas as pd

from experiments.config import compose, figure_of
from experiments.figure_spec import x_values
from experiments.kinds import load_kind
from experiments.paper_regime import regime_tables
from experiments.run import (
    UsageError,
    _first_line,
    point_context,
    require_figure,
    require_series,
)

USAGE = ("usage: python -m experiments.stages figure=<paper>/<fig> series=<series> x=<x> "
         "[scale=small] [spark=local] [regime=true]")


def _x(figure: dict, scale: str, given: str):
    """The figure's own x value that ``given`` names (so 1 and 1.0 are the same point)."""
    values = x_values(figure, scale)
    for v in values:
        if str(v) == given:
            return v
        try:
            if float(v) == float(given):
                return v
        except (TypeError, ValueError):
            continue
    raise UsageError(f"x={given} is not an x value of {figure['id']} at this scale; valid: "
                     f"{', '.join(map(str, values))}")


def stages(argv: list[str]) -> tuple[object, pd.DataFrame, object]:
    """Run the point ``argv`` names; its outcome, its stage table and its PointContext."""
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    missing = [k for k in ("figure", "series", "x") if k not in opts]
    if missing or len(opts) != len(argv):
        raise UsageError(USAGE)
    require_figure(opts["figure"])
    try:
        cfg = compose([f"figure={opts['figure']}", f"scale={opts.get('scale', 'small')}",
                       f"spark={opts.get('spark', 'local')}"])
    except Exception as exc:  # an unknown scale or Spark preset: Hydra names the valid ones
        raise UsageError(_first_line(exc)) from None
    figure = figure_of(cfg)
    if figure["kind"] != "batch_join":
        raise UsageError(f"{figure['id']} is a {figure['kind']} figure; stages are reported for "
                         "batch_join figures")
    require_series(figure, opts["series"])
    x = _x(figure, cfg.scale.name, opts["x"])
    ctx = point_context(cfg, figure, opts["series"], x)
    outcome = load_kind(figure["kind"])(ctx)
    return outcome, outcome.stages if outcome.stages is not None else pd.DataFrame(), ctx


def regime_table(figure: dict, outcome, calibration) -> pd.DataFrame | None:
    """The point's stages in the paper's regime (its tasks' counts grown by the figure's
    factors, as its ``modeled_time_regime`` is made), or None where the figure has none."""
    metrics = {k: v for k, (v, _) in outcome.metrics.items()}
    if outcome.tasks is None or "regime_records_factor" not in metrics:
        return None
    regime, _ = regime_tables(outcome.tasks, int(metrics["executors"]), calibration.batch,
                              figure.get("run", {}).get("schedule", "list"),
                              metrics["regime_records_factor"], metrics["regime_output_factor"])
    return regime


def _print_table(table: pd.DataFrame, executors: int, tail: str = "") -> None:
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.to_string(index=False))
    print(f"{len(table)} stages, {int(table.tasks.sum())} tasks; modeled time "
          f"{table.modeled_s.sum():.3f} s on {executors} executors, of which "
          f"{table.constants_s.sum():.3f} s are the per-task constant's waves{tail}")


def main(argv: list[str]) -> int:
    regime = [a for a in argv if a.startswith("regime=")]
    argv = [a for a in argv if not a.startswith("regime=")]
    want_regime = bool(regime) and regime[-1].split("=", 1)[1].lower() in ("true", "1", "yes")
    try:
        outcome, table, ctx = stages(argv)
    except (UsageError, KeyError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    metrics = {k: v for k, (v, _) in outcome.metrics.items()}
    executors = int(metrics.get("executors", 0))
    print(f"status {outcome.status}" + (f" ({outcome.error})" if outcome.error else ""))
    if not table.empty:
        _print_table(table, executors, f" (local wall time "
                     f"{metrics.get('local_wall_time', float('nan')):.1f} s)")
    if want_regime:
        grown = regime_table(ctx.figure, outcome, ctx.calibration)
        if grown is None:
            print("no paper's regime for this figure (experiments.paper_regime)")
        else:
            print(f"\nin the paper's regime (records in and shuffle bytes x "
                  f"{metrics['regime_records_factor']:.3g}, rows produced x "
                  f"{metrics['regime_output_factor']:.3g}):")
            _print_table(grown, executors)
    return 0 if outcome.status in ("ok", "oom", "timeout") else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
