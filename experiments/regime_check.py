"""Validate the paper's-regime extrapolation (issue 37, rule 2) on one batch point.

``python -m experiments.regime_check figure=<paper>/<fig> series=<s> x=<x> [factor=4]
[scale=small]`` runs the point as the runner does and again with every data size of the
figure multiplied by ``factor`` (the same executors and partitions), writes nothing to
``results/``, and prints, stage by stage, the larger run's real counts against the ones
:mod:`experiments.paper_regime`'s rule extrapolates from the smaller run (tasks, records in,
rows produced, shuffle bytes, modeled makespan), with the relative error of each total. Rule 2
accepts the extrapolation where they agree within 5% at a factor of 4 or more.
"""

from __future__ import annotations

import copy
import sys

import pandas as pd

from experiments.config import compose
from experiments.figure_spec import grown_sizes, plain, with_seed_replicates
from experiments.kinds import load_kind, point_settings
from experiments.paper_regime import factors, regime_tables
from experiments.run import UsageError, point_context, require_figure, require_series
from experiments.stages import _x
from runtime.cost_model import per_task_share

USAGE = ("usage: python -m experiments.regime_check figure=<paper>/<fig> series=<series> x=<x> "
         "[factor=4] [scale=small]")
COUNTS = ["tasks", "records_in", "rows_produced", "shuffle_bytes", "modeled_s", "constants_s"]


def grown(figure: dict, scale: str, factor: float) -> dict:
    """The figure with its data sizes at ``scale`` multiplied by ``factor`` (budgets that scale
    with the sizes follow them; executors, thresholds and partitions stay)."""
    out = copy.deepcopy(figure)
    out["workload"]["sizes"][scale] = grown_sizes(out["workload"]["sizes"][scale], None, factor)
    return out


def compare(small: pd.DataFrame, large: pd.DataFrame) -> pd.DataFrame:
    """Per stage (in order), the extrapolated and real counts, and a total row with the
    relative error of each count."""
    rows = []
    for i in range(max(len(small), len(large))):
        a = small.iloc[i] if i < len(small) else None
        b = large.iloc[i] if i < len(large) else None
        rows.append({"stage": i, **{f"{c}_extrap": (a[c] if a is not None else float("nan"))
                                    for c in COUNTS},
                     **{f"{c}_real": (b[c] if b is not None else float("nan")) for c in COUNTS}})
    table = pd.DataFrame(rows)
    total = {"stage": "total"}
    for c in COUNTS:
        e, r = float(small[c].sum()), float(large[c].sum())
        total[f"{c}_extrap"], total[f"{c}_real"] = e, r
        total[f"{c}_err"] = (e - r) / r if r else float("nan")
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)


def check(argv: list[str]) -> tuple[pd.DataFrame, dict[str, float]]:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    if any(k not in opts for k in ("figure", "series", "x")) or len(opts) != len(argv):
        raise UsageError(USAGE)
    require_figure(opts["figure"])
    scale = opts.get("scale", "small")
    factor = float(opts.get("factor", 4))
    cfg = compose([f"figure={opts['figure']}", f"scale={scale}", "spark=local"])
    figure = with_seed_replicates(plain(cfg.figure))
    require_series(figure, opts["series"])
    x = _x(figure, scale, opts["x"])
    larger = grown(figure, scale, factor)
    runs = []
    for fig in (figure, larger):
        pc = point_context(cfg, fig, opts["series"], x)
        outcome = load_kind(fig["kind"])(pc)
        if outcome.status != "ok":
            raise RuntimeError(f"{fig['id']} {opts['series']} x={x}: {outcome.status} "
                               f"{outcome.error}")
        runs.append((pc, outcome))
    (pc, small), (pc_large, large) = runs
    wl = point_settings(pc)["workload"]
    target = point_settings(pc_large)["workload"]["params"]
    e = int(small.metrics["executors"][0])
    f_in, f_out = factors(wl["generator"], wl["params"], target, e, e)
    schedule = point_settings(pc)["run"].get("schedule", "list")
    extrap, records = regime_tables(small.tasks, e, pc.calibration.batch, schedule, f_in, f_out)
    real = large.stages  # the larger run's own stage table, as the kind made it
    summary = {"f_in": f_in, "f_out": f_out,
               "modeled_small": float(small.stages["modeled_s"].sum()),
               "modeled_real": float(real["modeled_s"].sum()),
               "modeled_extrap": float(extrap["modeled_s"].sum()),
               "modeled_extrap_rows_by_f_in": float(records["modeled_s"].sum()),
               "rows_produced_extrap_by_f_in": float(records["rows_produced"].sum()),
               "per_task_share_small": per_task_share(small.stages),
               "per_task_share_real": per_task_share(real),
               "per_task_share_extrap": per_task_share(extrap),
               "output_rows_small": float(small.metrics["output_rows"][0]),
               "output_rows_real": float(large.metrics["output_rows"][0])}
    return compare(extrap, real), summary


def main(argv: list[str], validate=None) -> int:
    """Print a validation's per-stage table and its summary; ``validate`` (``check`` by
    default) is also :func:`experiments.regime_fit.validate`, which prints the same way."""
    try:
        table, summary = (validate or check)(argv)
    except UsageError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 250, "display.max_rows", 500,
                           "display.max_columns", 50):
        print(table.to_string(index=False))
    for k, v in summary.items():
        print(f"{k}: {v:.6g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
