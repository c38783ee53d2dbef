"""The online operators (registry kind "online"): factories returning a routing policy.

Every factory takes ``joiners`` and the keywords ``n_r, n_s, seed, controller, band`` (the
engine passes them; static_opt needs the final sizes, dynamic the controller mode) plus its own
parameters. Squall's operators: ``dynamic`` (Algorithms 1-3), ``static_mid`` ((sqrt J, sqrt J)),
``static_opt`` (the optimal mapping for the final |R|, |S|, known in advance: "practically
unattainable" online, the paper's yardstick), ``shj`` (parallel symmetric hash join on the key).
Extension operators (not registered here): ``join_biclique`` routing and ``relocating_shj``
(hash with partition groups and D-CAPE-style relocation).
"""

from __future__ import annotations

import math

from joins.online.controller import DynamicGrid, RelocatingHash, Static, best_mapping
from joins.online.layouts import BicliqueLayout, GridLayout, HashLayout, square_mapping


def _unused(name: str, extra: dict) -> None:
    if extra:
        raise ValueError(f"operator {name!r} got unknown parameters: {sorted(extra)}")


def dynamic(joiners: int, *, n_r: int, n_s: int, seed: int = 0, controller: str = "exact",
            band: float | None = None, eps: float = 1.0, warmup: int | None = None,
            decide_on: str = "updated", initial: tuple[int, int] | None = None,
            jump: str = "direct", **extra):
    """Squall's DYNAMIC, initialised with the (sqrt J, sqrt J) mapping (catalogue 2.12).

    ``warmup`` defaults to 1% of the whole stream (the paper: 500K tuples, "less than 1% of
    the total input"); ``eps`` is footnote 1's trigger fraction (paper default 1: doubling).
    """
    _unused("dynamic", extra)
    if warmup is None:
        warmup = math.ceil(0.01 * (n_r + n_s))
    return DynamicGrid(joiners, initial=tuple(initial) if initial else square_mapping(joiners),
                       eps=eps, warmup=warmup, controller=controller, seed=seed,
                       decide_on=decide_on, jump=jump)


def static_mid(joiners: int, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
               controller: str = "exact", band: float | None = None, **extra):
    """STATICMID: the fixed square grid (assumes equal stream sizes)."""
    _unused("static_mid", extra)
    return Static(GridLayout.initial(*square_mapping(joiners)))


def static_opt(joiners: int, *, n_r: int, n_s: int, seed: int = 0, controller: str = "exact",
               band: float | None = None, **extra):
    """STATICOPT: the grid minimising |R|/n + |S|/m for the final sizes (oracle knowledge)."""
    _unused("static_opt", extra)
    return Static(GridLayout.initial(*best_mapping(n_r, n_s, joiners)))


def shj(joiners: int, *, n_r: int = 0, n_s: int = 0, seed: int = 0, controller: str = "exact",
        band: float | None = None, groups: int | None = None, **extra):
    """Parallel SHJ: hash-partition both relations on the key (content-sensitive), each tuple
    to one joiner. Equi-joins only, as in the paper (not used for band joins)."""
    _unused("shj", extra)
    if band is not None:
        raise ValueError("shj is an equi-join operator; it cannot run a band join")
    return Static(HashLayout.initial(joiners, groups))


def join_biclique(joiners: int, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
                  controller: str = "exact", band: float | None = None,
                  r_units: int | None = None, **extra):
    """BiStream's join-biclique with random routing: ``r_units`` units store R (default
    J/2), the rest store S; every tuple is stored once and probes the whole other side."""
    _unused("join_biclique", extra)
    if joiners < 2:
        raise ValueError("a join-biclique needs at least 2 joiners")
    a = r_units or joiners // 2
    return Static(BicliqueLayout(a, joiners - a))


def relocating_shj(joiners: int, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
                   controller: str = "exact", band: float | None = None, groups: int = 300,
                   theta: float = 0.8, min_batches: int = 1, **extra):
    """Hash partitioning with partition groups relocated between workers when the least
    loaded holds less than ``theta`` of the most loaded (D-CAPE's distributed adaptation)."""
    _unused("relocating_shj", extra)
    if band is not None:
        raise ValueError("relocating_shj is an equi-join operator")
    return RelocatingHash(HashLayout.initial(joiners, groups), theta=theta,
                          min_batches=min_batches)
