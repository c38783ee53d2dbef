"""BiStream's operators (paper ``bistream``): the join-biclique (random routing, resizable
without renumbering, or ContRand; two-phase scaling) and its join-matrix baseline (a static
square grid)."""

from __future__ import annotations

import math

from joins.online.controller import Static
from joins.online.layouts import BicliqueLayout, ContRandLayout, GridLayout
from joins.online.operator_spec import Operator, Param, Run


def _join_biclique(run: Run, *, r_units: int | None, contrand: int | None,
                   key_range: tuple[float, float] | None, elastic: str | None,
                   capacity: float | None, t_high: float, t_low: float, psi: float,
                   check_every: float, confirmations: int, warmup: float, scaling_scope: str):
    """``r_units`` units store R (default J/2, the larger half for an odd J going to S), the
    rest store S; every tuple is stored once. Random routing ("JBx") probes the whole other
    side; ``contrand=y`` ("JBx-CRy") splits each side into y subgroups and probes one (a band
    join's subgroups split ``key_range``, by default the inputs'). ``elastic="2ps"``: two-phase
    scaling against a unit ``capacity`` in bytes (the run's ``tuple_bytes`` per stored tuple;
    :mod:`joins.online.elastic`): a windowed join drains, a full history migrates."""
    joiners = run.joiners
    if joiners < 2:
        raise ValueError("a join-biclique needs at least 2 joiners")
    a = r_units or joiners // 2
    if not 1 <= a < joiners:
        raise ValueError(f"r_units must be in 1..{joiners - 1}, got {a}")
    key_range = key_range if key_range is not None else run.key_range
    random = contrand is None or int(contrand) == 1
    layout = BicliqueLayout(a, joiners - a) if random else \
        ContRandLayout.even(a, joiners - a, int(contrand), int(contrand), run.band, key_range)
    if elastic is None:
        return Static(layout)
    if elastic != "2ps":
        raise ValueError(f"elastic must be 2ps, got {elastic!r}")
    if capacity is None or run.tuple_bytes is None:
        raise ValueError("elastic=2ps needs capacity= (bytes per unit) and tuple_bytes=")
    from joins.online.elastic import TwoPhaseScaling

    return TwoPhaseScaling(layout, capacity=capacity, tuple_bytes=run.tuple_bytes,
                           t_high=t_high, t_low=t_low, psi=psi, check_every=check_every,
                           confirmations=confirmations, warmup=warmup,
                           migrate=run.full_history, scope=scaling_scope)


join_biclique = Operator(
    "join_biclique", "bistream",
    "BiStream join-biclique: R units and S units, random routing, each tuple stored once and "
    "probing the other side (random or ContRand routing)", _join_biclique,
    params={
        "r_units": Param(None, "join-biclique units that store R (the rest store S); none "
                               "means half", int | None),
        "contrand": Param(None, "ContRand subgroups per side (JBx-CRy: y); none or 1 is random "
                                "routing", int | None),
        "key_range": Param(None, "the key domain ContRand's range subgroups split (band joins; "
                                 "default: the inputs' keys)", tuple[float, float] | None),
        "elastic": Param(None, "2ps: BiStream's two-phase scaling of a join-biclique (needs "
                               "capacity=; a full history migrates state, a window drains)",
                         str | None),
        "capacity": Param(None, "2PS: a unit's memory capacity C in bytes (MLV = stored "
                                "tuples x tuple_bytes)", float | None),
        "t_high": Param(0.8, "2PS: load tau above which a side scales out (the paper's "
                             "T_h = 0.8)"),
        "t_low": Param(0.3, "2PS: load tau below which a side scales in (T_l = 0.3)"),
        "psi": Param(0.6, "2PS: the target load Psi of Eq. 7 (0.6)"),
        "check_every": Param(60.0, "2PS: event time between two load checks (the paper's 1 "
                                   "minute)"),
        "confirmations": Param(3, "2PS: identical decisions in a row before scaling (3)"),
        "warmup": Param(0.0, "2PS: event time before its first check"),
        "scaling_scope": Param("subgroup", "2PS: the units k of Eq. 7: subgroup (each side or "
                                           "ContRand subgroup checked and scaled on its own) "
                                           "or cluster (one tau and one Delta over all "
                                           "units)"),
    })


def _join_matrix(run: Run):
    side = math.isqrt(run.joiners)
    if side * side != run.joiners:
        raise ValueError(f"join_matrix runs on a square number of units (4, 9, 16, ...), "
                         f"got {run.joiners}")
    return Static(GridLayout.initial(side, side))


join_matrix = Operator(
    "join_matrix", "bistream",
    "BiStream's JM baseline: static sqrt(x) x sqrt(x) join-matrix, each tuple stored along a "
    "row (R) or a column (S)", _join_matrix)
