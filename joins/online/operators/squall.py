"""Squall's operators (paper ``squall``): ``dynamic`` (Algorithms 1-3), ``static_mid``
((sqrt J, sqrt J)), ``static_opt`` (the optimal mapping for the final |R|, |S|, known in
advance: "practically unattainable" online, the paper's yardstick) and ``shj`` (parallel
symmetric hash join on the key)."""

from __future__ import annotations

import math

from joins.online.controller import DynamicGrid, Static, best_mapping
from joins.online.layouts import GridLayout, HashLayout, square_mapping
from joins.online.operator_spec import Operator, Param, Run

GROUPS = Param(None, "partition groups over the joiners (relocation moves whole groups); "
                     "none means one per joiner", int | None)


def _dynamic(run: Run, *, eps: float, warmup: int | None, decide_on: str,
             initial: tuple[int, int] | None, jump: str):
    """``warmup`` defaults to 1% of the whole stream (the paper: 500K tuples, "less than 1%
    of the total input"); ``eps`` is footnote 1's trigger fraction (paper default 1)."""
    if warmup is None:
        warmup = math.ceil(0.01 * (run.n_r + run.n_s))
    return DynamicGrid(run.joiners,
                       initial=tuple(initial) if initial else square_mapping(run.joiners),
                       eps=eps, warmup=warmup, controller=run.controller, seed=run.seed,
                       decide_on=decide_on, jump=jump)


dynamic = Operator(
    "dynamic", "squall",
    "Squall DYNAMIC: adaptive (n,m) grid, doubling trigger, pairwise migration", _dynamic,
    params={
        "eps": Param(1.0, "DYNAMIC's trigger: a decision when a relation grew by this "
                          "fraction (1: doubling)"),
        "warmup": Param(None, "tuples before DYNAMIC's first decision (none: 1% of the "
                              "stream)", int | None),
        "decide_on": Param("updated", "sizes DYNAMIC decides on: updated (|R|+|dR|) or "
                                      "previous (|R|)"),
        "initial": Param(None, "DYNAMIC's first (n,m) mapping; none means (sqrt J, sqrt J)",
                         tuple[int, int] | None),
        "jump": Param("direct", "how DYNAMIC reaches a mapping several doublings away: direct "
                                "(one migration) or steps (one per doubling)"),
    })

static_mid = Operator(
    "static_mid", "squall", "Squall STATICMID: fixed (sqrt J, sqrt J) grid",
    lambda run: Static(GridLayout.initial(*square_mapping(run.joiners))))

static_opt = Operator(
    "static_opt", "squall", "Squall STATICOPT: fixed grid optimal for the final sizes",
    lambda run: Static(GridLayout.initial(*best_mapping(run.n_r, run.n_s, run.joiners))))

shj = Operator(
    "shj", "squall", "Parallel symmetric hash join, hash-partitioned on the key (equi only)",
    lambda run, *, groups: Static(HashLayout.initial(run.joiners, groups)),
    params={"groups": GROUPS}, band=False)
