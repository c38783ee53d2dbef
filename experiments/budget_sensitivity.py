"""The memory budget's sensitivity for amjoin's equi-join figures, computed without running joins.

``python -m experiments.budget_sensitivity [scale=small] [figures=amjoin/fig5,amjoin/fig6,...]
[factors=0.5,0.75,1,1.5,2] [grid=0.05]`` (``make budget-sensitivity``).

For every point it computes the memory each budgeted algorithm needs, with the very functions
the algorithm passes to ``BatchContext.require_memory`` (imported from ``joins``, not copied),
from the exact key counts of the generator's keys (``datagen.dpair.table_keys``: the draws the
written inputs hold), then says from which x each algorithm fails under the figure's budget
(``rules.memory_budget_bytes``) times each factor:

* ``tree_join_basic``: :func:`joins.batch.tree_join.basic_index_need` over every key (the first
  joined index holds each key's two lists on one task);
* ``am_join_basic``: the same over κ_RS (its HH Tree-Join-Basic), κ by
  :func:`joins.batch.hot_keys.top_of_counts` with the point's τ and |κ|max;
* ``broadcast_join``: :func:`joins.batch.spark_builtin.broadcast_relation_bytes` of the right
  relation (the broadcast side of an inner join);
* ``full_skew_join``: :func:`joins.batch.full_skew_join.broadcast_hot_bytes` of the records
  :func:`~joins.batch.full_skew_join.broadcast_hot_rows` assigns to the broadcast side.

AM-Join and Tree-Join are checked too, but hold only sub-lists of a hot key whose random
membership is not modeled here; their measured ``max_group_records`` is in the results. At
small scale their largest entries are at most 1.0 MB, and AM-Join's Small-Large broadcasts
(the budget decides whether they are broadcast) at most 0.96 MB, both under half any budget
this module tries (measured at fig6, α = 1.0 and 0.9).

For a figure whose x is the Zipf-α, ``grid`` adds α values (0 to 1 by ``grid``) to the
figure's own, so that the onset is located between the run points; the keys do not depend on
the record size, so fig5 and fig6 share their counts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from datagen.dpair import TABLES, table_keys
from experiments.figure_spec import scaled_rule, x_values
from experiments.figures import load_figure
from experiments.kinds import PointContext, point_settings
from joins.batch.full_skew_join import broadcast_hot_bytes, broadcast_hot_rows
from joins.batch.hot_keys import hot_params, top_of_counts
from joins.batch.spark_builtin import broadcast_relation_bytes
from joins.batch.tree_join import basic_index_need, shared_hot_keys

FIGURES = ("amjoin/fig5", "amjoin/fig6", "amjoin/fig7", "amjoin/fig10")
FACTORS = (0.5, 0.75, 1.0, 1.5, 2.0)
BUDGETED = ("am_join_basic", "tree_join_basic", "broadcast_join", "full_skew_join")


@dataclass(frozen=True)
class Point:
    figure: str
    x: float
    alpha: float
    budget: float
    needs: dict[str, float]  # series -> bytes


@cache
def _counts(params_key: tuple) -> tuple[dict[int, int], dict[int, int]]:
    params = dict(params_key)
    out = []
    for table in TABLES:
        keys, n = np.unique(table_keys(params, table), return_counts=True)
        out.append(dict(zip(keys.tolist(), n.tolist(), strict=True)))
    return out[0], out[1]


def key_counts(params: dict) -> tuple[dict[int, int], dict[int, int]]:
    """Records per key of R and S as dpair writes them (the record size does not matter)."""
    return _counts(tuple(sorted((k, v) for k, v in params.items() if k not in ("size", "payload"))))


def needs_of(counts_l: dict, counts_r: dict, record_bytes: float,
             algorithm_params: dict) -> dict[str, float]:
    """Bytes each budgeted algorithm checks against the budget on these key counts."""
    hp = hot_params(algorithm_params)
    hot_l = top_of_counts(counts_l.items(), hp.threshold, hp.max_keys)
    hot_r = top_of_counts(counts_r.items(), hp.threshold, hp.max_keys)
    krs = shared_hot_keys(hot_l, hot_r)

    def rows_of(counts: dict):
        return lambda keys: sum(counts.get(k, 0) for k in keys)

    dup_l, dup_r = broadcast_hot_rows(hot_l, hot_r, rows_of(counts_l), rows_of(counts_r))
    return {
        "am_join_basic": basic_index_need(counts_l, counts_r, record_bytes, keys=krs),
        "tree_join_basic": basic_index_need(counts_l, counts_r, record_bytes),
        "broadcast_join": broadcast_relation_bytes(sum(counts_r.values()), record_bytes),
        "full_skew_join": broadcast_hot_bytes(dup_l + dup_r, record_bytes),
    }


def point_needs(figure: dict, x: float, scale: str, seed: int = 0) -> Point:
    """One point's budget and needs, from the figure config as a run would read it."""
    pc = PointContext(figure=figure, series="hash_join", x=x, scale=scale, seed=seed,
                      spark_cfg={}, calibration=None)
    s = point_settings(pc)
    wl = s["workload"]
    if wl["generator"] != "dpair":
        raise ValueError(f"{figure['id']}: only dpair workloads are modeled, not {wl['generator']}")
    params = {**wl["params"], "seed": wl["params"].get("seed", seed)}
    budget = scaled_rule(figure.get("rules", {}), "memory_budget_bytes", scale,
                         figure["workload"]["sizes"])
    counts_l, counts_r = key_counts(params)
    needs = needs_of(counts_l, counts_r, float(params["size"]),
                     dict(s["run"].get("algorithm_params", {})))
    return Point(figure["id"], float(x), float(params["alpha"]), float(budget or 0), needs)


def figure_points(figure_id: str, scale: str, grid: float | None = 0.05) -> list[Point]:
    figure = load_figure(figure_id, scale)
    xs = [float(v) for v in x_values(figure, scale)]
    if grid and figure["x"]["param"] == "workload.params.alpha" and len(xs) > 1:
        xs += [round(i * grid, 6) for i in range(int(round(1 / grid)) + 1)]
    return [point_needs(figure, x, scale) for x in sorted(set(xs))]


def needs_table(points: list[Point]) -> pd.DataFrame:
    rows = [{"figure": p.figure, "x": p.x, "alpha": p.alpha, "budget": p.budget,
             "series": s, "need_bytes": v} for p in points for s, v in p.needs.items()]
    return pd.DataFrame(rows)


def onset(needs: pd.DataFrame, budget: float) -> str:
    """The x from which a series fails (needs > budget at it and every larger x), as text:
    'never', 'always', 'x >= v', or the failing x values when they are not one tail."""
    fail = needs.sort_values("x").set_index("x")["need_bytes"] > budget
    if not fail.any():
        return "never"
    if fail.all():
        return "always"
    first = fail.idxmax()
    if fail.loc[first:].all():
        return f">= {first:g}"
    return "at " + ", ".join(f"{x:g}" for x in fail.index[fail])


def sensitivity(table: pd.DataFrame, factors=FACTORS) -> pd.DataFrame:
    """Per figure and series: where it fails under the budget times each factor."""
    rows = []
    for (fig, series), g in table.groupby(["figure", "series"], sort=False):
        budget = float(g["budget"].iloc[0])
        rows.append({"figure": fig, "series": series,
                     **{f"x{f:g} ({budget * f / 1e6:.2f} MB)": onset(g, budget * f)
                        for f in factors}})
    return pd.DataFrame(rows)


def _option(argv: list[str], name: str, default: str) -> str:
    for a in argv:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    scale = _option(argv, "scale", "small")
    figures = [f for f in _option(argv, "figures", ",".join(FIGURES)).split(",") if f]
    factors = [float(f) for f in _option(argv, "factors", ",".join(map(str, FACTORS))).split(",")]
    grid = float(_option(argv, "grid", "0.05")) or None
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    for fid in figures:
        table = needs_table(figure_points(fid, scale, grid))
        figure = load_figure(fid, scale)
        print(f"\n== {fid} ({scale}): x = {figure['x'].get('name')}, budget "
              f"{table['budget'].iloc[0] / 1e6:.3f} MB (rules.memory_budget_bytes)")
        wide = table.pivot_table(index=["x", "alpha"], columns="series", values="need_bytes",
                                 sort=False) / 1e6
        print("needed MB per point:")
        print(wide[[s for s in BUDGETED if s in wide]].round(3).to_string())
        print("fails from (budget x factor):")
        print(sensitivity(table, factors).drop(columns="figure").to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
