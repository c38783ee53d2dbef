"""The arena's decision table (beyond the papers): per workload cell (x) and metric, the best
operator over the seeds, its margin over the second, whether every seed agrees, and one
sentence of why from the counts.

A figure's ``decision`` block says which metrics, in which direction (``better: lower |
higher``), how the margin is given (``margin: ratio``, the default: second / best - 1 for
lower, best / second - 1 for higher; ``difference``: best - second, e.g. for shares), among
which operators (``among: distributed``: those with more than one unit), which series never
rank (``exclude``, e.g. a yardstick that knows the future) and which counts explain it
(``why``: metric names, or ``time_terms``: the term of the time model whose difference
between the two is largest, and the cost constant that would swap them at the factor nearest
its calibrated value: within 0.5x-2x, the why says a cost constant decides). Seed replicates (``replicate_of``) are the seeds of their base
series; series marked ``sensitivity: true`` are ranked apart (:func:`sensitivity_changes`).

The best is the operator with the best mean over the seeds; the cell is *stable* when it is
also the best (or tied best) on every seed, else *unstable* and every seed's best is named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from joins.arena import TERMS

TIE = 1e-9  # relative: values this close are a tie


@dataclass
class Cell:
    x: float
    x_label: str
    metric: str
    best: str  # the best operator's series (ties: the first in the figure's order)
    second: str | None  # the best of the operators not tied with the best
    best_value: float
    second_value: float
    margin: float  # over the second (see the module)
    margin_kind: str
    stable: bool
    seeds: int
    per_seed_best: dict[int, list[str]] = field(default_factory=dict)
    tied: list[str] = field(default_factory=list)  # operators tied with the best
    why: str = ""


def base_and_seed(figure: dict, series: str, seed: int) -> tuple[str, int]:
    """A seed replicate's base series and its seed (from its name, ``<base>_seed<k>``); any
    other series is itself at the row's seed."""
    spec = figure["series"].get(series) or {}
    base = spec.get("replicate_of")
    if base:
        m = re.search(r"_seed(\d+)$", series)
        return base, int(m.group(1)) if m else seed
    return series, seed


def _scalars(figure: dict, results: pd.DataFrame, sensitivity: bool) -> pd.DataFrame:
    """Scalar rows of finished points (status ok), with ``base`` and ``rep`` (the seed)."""
    rows = results[results["t"].isna() & (results["status"] == "ok")] if len(results) else \
        results
    if rows.empty:
        return rows.assign(base=[], rep=[])
    keys = [base_and_seed(figure, s, int(k)) for s, k in zip(rows["series"], rows["seed"],
                                                              strict=True)]
    rows = rows.assign(base=[b for b, _ in keys], rep=[k for _, k in keys])
    sens = {n for n, spec in figure["series"].items() if (spec or {}).get("sensitivity")}
    return rows[rows["base"].isin(sens) == sensitivity]


def _label(figure: dict, series: str) -> str:
    return (figure["series"].get(series) or {}).get("label", series)


def _tied(a: float, b: float) -> bool:
    return abs(a - b) <= TIE * max(abs(a), abs(b), 1.0)


def _margin(best: float, second: float, better: str, kind: str) -> float:
    if kind == "difference":
        return abs(best - second)
    if _tied(best, second):
        return 0.0
    lo, hi = (best, second) if better == "lower" else (second, best)
    return float("inf") if lo == 0 else hi / lo - 1.0


def _why(figure: dict, spec: dict, wide: pd.DataFrame, best: str, second: str | None) -> str:
    """One sentence from the counts (means over the seeds) of the best and the second."""
    if second is None:
        return "every operator ranked has the same value"
    why = spec.get("why") or []
    b, s = _label(figure, best), _label(figure, second)
    if why == "time_terms":
        terms, span = _time_terms(wide, spec["metric"], (best, second))
        if not terms:
            return ""
        diff = (wide.loc[second, list(terms)] - wide.loc[best, list(terms)]).abs()
        term = diff.idxmax()
        # the constant nearest its calibrated value (in ratio) that would swap the two
        swaps = {t: swap_factor(wide.loc[best, spec["metric"]],
                                wide.loc[second, spec["metric"]], wide.loc[best, t],
                                wide.loc[second, t]) for t in terms}
        nearest = min(terms, key=lambda t: abs(np.log(swaps[t])))
        swap = _swap_text(terms[nearest], swaps[nearest])
        return (f"the largest difference of the time model's terms is {terms[term]}: "
                f"{wide.loc[best, term]:.3g} modeled s for {b} against "
                f"{wide.loc[second, term]:.3g} for {s} (the slowest unit of each tick, {span}); "
                f"{swap}")
    parts = [f"{m.replace('_', ' ')} {_fmt(wide.loc[best, m])} against {_fmt(wide.loc[second, m])}"
             for m in why if m in wide.columns]
    return f"{b} vs {s}: " + "; ".join(parts) if parts else ""


def _time_terms(wide: pd.DataFrame, metric: str,
                ranked: tuple[str, str]) -> tuple[dict[str, str], str]:
    """The time model's term columns that add up to ``metric`` (column -> term name) and the
    span they cover: for ``modeled_time_<pct>``, the terms up to that share of the join
    (``time_term_<term>_to_<pct>``) where both ranked operators' runs recorded them; else the
    whole run's."""
    pct = metric.removeprefix("modeled_time_")
    for suffix, span in ((f"_to_{pct}", f"to {pct}% of the join"), ("", "whole run")):
        # in the columns' (alphabetical) order, which breaks an exact tie of two swap factors
        cols = {c: t.replace("_", " ") for t in TERMS
                if (c := f"time_term_{t}{suffix}") in wide.columns}
        cols = dict(sorted(cols.items()))
        if cols and wide.loc[list(ranked), list(cols)].notna().all(axis=None):
            return cols, span
    return {}, ""


CONSTANT_RANGE = (0.5, 2.0)  # a calibrated constant's plausible range, as a factor


def swap_factor(t_best: float, t_second: float, x_best: float, x_second: float) -> float:
    """The factor on one term's cost constant at which best and second would swap, to first
    order: each time moves by (f - 1) x its term (``x_*``, the term's modeled seconds), and the
    slowest unit of each tick is taken as fixed. ``inf`` when no positive factor swaps them."""
    gap, slope = t_second - t_best, x_best - x_second
    if slope == 0:
        return float("inf")
    f = 1.0 + gap / slope
    return f if f > 0 else float("inf")


def _swap_text(term: str, f: float) -> str:
    """Whether a cost constant decides the ranking (issue 40: a ranking that a constant
    decides says so): the factor that would swap best and second against the range
    :data:`CONSTANT_RANGE`."""
    lo, hi = CONSTANT_RANGE
    if not np.isfinite(f):
        return "no factor on one cost constant swaps the two"
    if lo <= f <= hi:
        return (f"a cost constant decides: the {term} constant at {f:.2g}x its calibrated "
                f"value would swap the two (to first order)")
    return f"the {term} constant would have to be {f:.2g}x its calibrated value to swap them"


def _fmt(v: float) -> str:
    if pd.isna(v):
        return "n/a"
    if float(v).is_integer() and abs(v) >= 1:
        return f"{int(v):,}"
    return f"{v:.3g}"


def decision_table(figure: dict, results: pd.DataFrame, sensitivity: bool = False) -> list[Cell]:
    """The cells of the figure's decision table (see the module)."""
    spec = figure.get("decision") or {}
    rows = _scalars(figure, results, sensitivity)
    exclude = set(spec.get("exclude") or [])
    order = [s for s in figure["series"] if s not in exclude]
    cells = []
    for x in sorted(rows["x"].unique()) if len(rows) else []:
        at = rows[rows["x"] == x]
        x_label = str(at["x_label"].iloc[0])
        wide_seed = at.pivot_table(index=["base", "rep"], columns="metric", values="value",
                                   aggfunc="mean")
        wide = wide_seed.groupby(level="base").mean()
        for m in spec.get("metrics") or []:
            metric, better = m["metric"], m.get("better", "lower")
            if metric not in wide.columns:
                continue
            cand = [s for s in order if s in wide.index and pd.notna(wide.loc[s, metric])]
            if m.get("among") == "distributed" and "units" in wide.columns:
                cand = [s for s in cand if wide.loc[s, "units"] > 1]
            if len(cand) < 2:  # one operator ranked (arena/three_inputs' load: D-CAPE alone
                continue  # is distributed) decides nothing
            sign = 1.0 if better == "lower" else -1.0
            means = wide.loc[cand, metric]
            ranked = sorted(cand, key=lambda s: (sign * means[s], order.index(s)))
            best = ranked[0]
            tied = [s for s in ranked[1:] if _tied(means[s], means[best])]
            # the second: the best of the operators not tied with the best
            rest = [s for s in ranked[1:] if s not in tied]
            second = rest[0] if rest else None
            per_seed = {}
            for rep, block in wide_seed.loc[wide_seed.index.get_level_values("base")
                                            .isin(cand), metric].groupby(level="rep"):
                vals = block.droplevel("rep").dropna()
                if len(vals) < 2:
                    continue
                top = (vals.min() if better == "lower" else vals.max())
                per_seed[int(rep)] = [s for s in cand if s in vals.index and _tied(vals[s], top)]
            stable = all(best in names for names in per_seed.values())
            kind = m.get("margin", "ratio")
            sv = float(means[second]) if second else float("nan")
            cells.append(Cell(
                x=float(x), x_label=x_label, metric=metric, best=best, second=second,
                best_value=float(means[best]), second_value=sv,
                margin=_margin(float(means[best]), sv, better, kind) if second else float("nan"),
                margin_kind=kind, stable=stable, seeds=len(per_seed), per_seed_best=per_seed,
                tied=tied, why=_why(figure, m, wide, best, second)))
    return cells


def _margin_text(cell: Cell) -> str:
    tie = f"tie ({len(cell.tied) + 1} operators)" if cell.tied else ""
    if cell.second is None:
        return tie or "–"
    if cell.margin_kind == "difference":
        margin = f"+{cell.margin:.3g}"
    else:
        margin = "∞" if np.isinf(cell.margin) else f"{100 * cell.margin:.3g}%"
    return f"{tie}, {margin}" if tie else margin


def markdown(figure: dict, cells: list[Cell]) -> list[str]:
    """The table as Markdown lines: x, metric, best (and ties), margin over the second,
    seeds (stable or unstable with every seed's best), why."""
    if not cells:
        return ["No finished points yet: no decision table."]
    xname = figure.get("x", {}).get("name", "x")
    lines = [f"| {xname} | metric | best | value | margin over the second | seeds | why |",
             "|---|---|---|---|---|---|---|"]
    for c in cells:
        best = _label(figure, c.best)
        if c.tied:
            best += " (tied: " + ", ".join(_label(figure, s) for s in c.tied) + ")"
        second = f" over {_label(figure, c.second)}" if c.second else ""
        if c.stable:
            seeds = f"stable ({c.seeds} seed{'' if c.seeds == 1 else 's'})"
        else:
            seeds = "**unstable**: " + "; ".join(
                f"seed {k}: {', '.join(_label(figure, s) for s in names)}"
                for k, names in sorted(c.per_seed_best.items()))
        lines.append(f"| {c.x_label} | {c.metric} | {best} | {_fmt(c.best_value)} | "
                     f"{_margin_text(c)}{second} | {seeds} | {c.why} |".replace("\n", " "))
    return lines


def sensitivity_changes(figure: dict, results: pd.DataFrame) -> list[str]:
    """Where the sensitivity series (e.g. the other equal-resources rule) change a cell's best:
    each sensitivity series stands in for the series it runs the same operator as
    (``algorithm``, seed 0 only). One line per changed cell."""
    sens = {n: spec for n, spec in figure["series"].items() if (spec or {}).get("sensitivity")}
    if not sens or results.empty:
        return []
    stand_in = {}
    for name, spec in sens.items():
        twin = [s for s, sp in figure["series"].items() if s not in sens and
                not (sp or {}).get("replicate_of") and
                (sp or {}).get("algorithm", s) == spec.get("algorithm", name) and
                {k: v for k, v in ((sp or {}).get("overrides") or {}).items()} ==
                {k: v for k, v in (spec.get("overrides") or {}).items()
                 if k != "run.resources"}]
        if twin:
            stand_in[name] = twin[0]
    base = results[(results["seed"] == 0) & ~results["series"].isin(
        [s for s, sp in figure["series"].items() if (sp or {}).get("replicate_of")])]
    swapped = base[~base["series"].isin(list(stand_in.values()))].copy()
    swapped = pd.concat([swapped, base[base["series"].isin(list(stand_in))].assign(
        series=lambda f: f["series"].map(stand_in))])
    plain = {**figure, "series": {s: {k: v for k, v in (sp or {}).items()
                                      if k != "sensitivity"}
                                  for s, sp in figure["series"].items()}}
    before = {(c.x, c.metric): c for c in decision_table(plain, base[~base["series"].isin(
        list(sens))])}
    lines = []
    for c in decision_table(plain, swapped):
        old = before.get((c.x, c.metric))
        if old is not None and old.best != c.best and c.best not in old.tied:
            lines.append(f"{figure.get('x', {}).get('name', 'x')} = {c.x_label}, {c.metric}: "
                         f"{_label(figure, old.best)} under the primary rule, "
                         f"{_label(figure, c.best)} under the sensitivity rule")
    return lines
