"""The online operators (registry kind "online"): factories returning a routing policy.

Every factory takes ``joiners`` and the keywords ``n_r, n_s, seed, controller, band`` (the
engine passes them; static_opt needs the final sizes, dynamic the controller mode) plus its own
parameters. Squall's operators: ``dynamic`` (Algorithms 1-3), ``static_mid`` ((sqrt J, sqrt J)),
``static_opt`` (the optimal mapping for the final |R|, |S|, known in advance: "practically
unattainable" online, the paper's yardstick), ``shj`` (parallel symmetric hash join on the key).
BiStream's ``join_biclique`` (random routing, resizable without renumbering, or ContRand) and
its ``join_matrix`` baseline (a static square grid),
``mjoin`` (an n-way symmetric hash join: DINER's MJoin baseline and D-CAPE's per-machine join),
and the extension operator ``relocating_shj`` (not registered: hash with partition groups and
D-CAPE-style relocation, for tests and the D-CAPE reproduction).
"""

from __future__ import annotations

import math

import numpy as np

from joins.online.controller import DynamicGrid, RelocatingHash, Static, best_mapping
from joins.online.layouts import (
    BicliqueLayout,
    ContRandLayout,
    GridLayout,
    HashLayout,
    OneSiteLayout,
    square_mapping,
)

_ONE_SITE_PARAMS = ("tups_per_block", "wait_thresh", "c_read", "c_write", "c_join", "c_arrive")


def _unused(name: str, extra: dict) -> None:
    if extra:
        raise ValueError(f"operator {name!r} got unknown parameters: {sorted(extra)}")


def _one_site(name: str, joiners: int, band: float | None, extra: dict, *,
              hash_based: bool, **params) -> Static:
    """A single-site operator of the DINER paper: one worker running program ``name``."""
    _unused(name, extra)
    if joiners != 1:
        raise ValueError(f"{name} is a single-site operator: joiners=1")
    if hash_based and band is not None:
        raise ValueError(f"{name} joins on equality only: it cannot run a band join")
    return Static(OneSiteLayout(), program=name, program_params=params)


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
                  r_units: int | None = None, contrand: int | None = None,
                  key_range: tuple[float, float] | None = None, elastic: str | None = None,
                  capacity: float | None = None, tuple_bytes: tuple | None = None,
                  t_high: float = 0.8, t_low: float = 0.3, psi: float = 0.6,
                  check_every: float = 60.0, confirmations: int = 3, warmup: float = 0.0,
                  full_history: bool = False, scaling_scope: str = "subgroup",
                  **extra):
    """BiStream's join-biclique: ``r_units`` units store R (default J/2, the larger half for
    an odd J going to S), the rest store S; every tuple is stored once. Random routing
    ("JBx") probes the whole other side; ``contrand=y`` ("JBx-CRy") splits each side into y
    subgroups and probes one (:class:`ContRandLayout`; a band join's subgroups split
    ``key_range``, which the stream gives). ``elastic="2ps"``: two-phase scaling against a unit
    ``capacity`` in bytes (the run's ``tuple_bytes`` per stored tuple;
    :mod:`joins.online.elastic`): a windowed join drains, a ``full_history`` one migrates;
    ``scaling_scope``: Eq. 7's k counts a subgroup's units (``subgroup``) or the cluster's
    (``cluster``)."""
    _unused("join_biclique", extra)
    if joiners < 2:
        raise ValueError("a join-biclique needs at least 2 joiners")
    a = r_units or joiners // 2
    if not 1 <= a < joiners:
        raise ValueError(f"r_units must be in 1..{joiners - 1}, got {a}")
    if elastic is not None:
        if elastic != "2ps":
            raise ValueError(f"elastic must be 2ps, got {elastic!r}")
        if capacity is None or tuple_bytes is None:
            raise ValueError("elastic=2ps needs capacity= (bytes per unit) and tuple_bytes=")
        from joins.online.elastic import TwoPhaseScaling

        layout = BicliqueLayout(a, joiners - a) if contrand is None or int(contrand) == 1 \
            else ContRandLayout.even(a, joiners - a, int(contrand), int(contrand), band,
                                     key_range)
        return TwoPhaseScaling(layout, capacity=capacity,
                               tuple_bytes=tuple_bytes, t_high=t_high, t_low=t_low, psi=psi,
                               check_every=check_every, confirmations=confirmations,
                               warmup=warmup, migrate=full_history,
                               scope=scaling_scope)
    if contrand is None or int(contrand) == 1:
        return Static(BicliqueLayout(a, joiners - a))
    return Static(ContRandLayout.even(a, joiners - a, int(contrand), int(contrand), band,
                                      key_range))


def join_matrix(joiners: int, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
                controller: str = "exact", band: float | None = None, **extra):
    """BiStream's JM baseline ("JMx"): a static sqrt(x) x sqrt(x) join-matrix, each R tuple
    stored at every unit of a random row, each S tuple at every unit of a random column (the
    grid of Squall's STATICMID, required square here)."""
    _unused("join_matrix", extra)
    side = math.isqrt(joiners)
    if side * side != joiners:
        raise ValueError(f"join_matrix runs on a square number of units (4, 9, 16, ...), "
                         f"got {joiners}")
    return Static(GridLayout.initial(side, side))


def mjoin(joiners: int, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
          controller: str = "exact", band: float | None = None, graph=None,
          groups: int | None = None, flushing: str | None = None, **extra):
    """MJoin: an n-way symmetric hash join - a new tuple probes the other inputs' stored tuples
    (the smallest candidate first: a stand-in for selectivity, the paper's order), then is
    stored. Hash-partitioned on the shared attribute when every edge uses one (``groups``
    partition groups over the J workers); on one worker otherwise (a join on several
    attributes cannot be split on one of them without replication). ``flushing="coordinated"``:
    the DINER paper's MJoin baseline, one site under the memory budget whose largest hash
    bucket (``n_part`` of them) leaves every input at once
    (:class:`joins.online.programs.miner.MJoinCoordinated`)."""
    if flushing is not None:  # DINER's Fig 22 baseline: one site under a memory budget
        if flushing != "coordinated":
            raise ValueError(f"mjoin's flushing is 'coordinated' or none, got {flushing!r}")
        if graph is not None and not graph.shared:
            raise ValueError("mjoin's coordinated flushing needs one shared join attribute")
        params = {k: extra.pop(k) for k in _ONE_SITE_PARAMS + ("n_part",) if k in extra}
        return _one_site("mjoin_flush", joiners, band, extra, hash_based=True, seed=seed,
                         **params)
    _unused("mjoin", extra)
    if graph is not None and not graph.shared:
        if joiners != 1:
            raise ValueError("mjoin on several attributes runs on one worker: joiners=1")
        return Static(OneSiteLayout(), program="mjoin")
    if band is not None and joiners > 1:
        raise ValueError("a band join cannot be hash-partitioned: mjoin with band needs "
                         "joiners=1")
    return Static(HashLayout.initial(joiners, groups), program="mjoin")


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


def dcape(joiners: int, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
          controller: str = "exact", band: float | None = None, graph=None,
          groups: int = 300, by: str = "mod", assign: str = "contiguous",
          skew_share: float = 2 / 3, adapt: str = "none", push: str = "low_output",
          push_percent: float = 30.0, theta_m: float = 1.0, theta_t: float | None = None,
          theta_d: float = 0.8, min_span: float = 45_000.0, theta_f: float = 2.0,
          active_from: float = 0.0, msg_seconds: float = 0.001, bandwidth: float = 125e6, state_bytes: float = 100.0,
          **extra):
    """D-CAPE (paper ``dcape``): an n-way symmetric hash join on one attribute over
    ``joiners`` machines, partitioned into ``groups`` partition groups (``by="mod"``: key mod
    groups, D-CAPE's generator; ``hash``) assigned ``contiguous``, ``round_robin`` or
    ``skewed`` (``skew_share`` of the groups on machine 0, the rest shared by the others).
    ``adapt``: ``none`` (memory past the budget stops the run), ``disk`` (push
    ``push_percent`` of a machine's state by ``push`` when it passes ``theta_m`` x the budget),
    ``relocate`` (the manager moves groups when M_l/M_m < ``theta_d``, at least ``min_span``
    apart, no disk), ``lazy_disk`` (both, a spilled group never moves), ``active_disk``
    (lazy-disk, and the slowest machine pushes when Max_Rate/Min_Rate > ``theta_f``; with
    ``active_from`` > 0 only once a machine holds that share of its budget). Times
    (``theta_t``, ``min_span``) in the event-time column's unit; the modeled relocation
    latency uses ``msg_seconds``, ``bandwidth`` (bytes/s) and ``state_bytes``
    (:mod:`joins.online.programs.dcape`, :mod:`joins.online.dcape_manager`)."""
    from joins.online.dcape_manager import RELOCATING, DCapeManager
    from joins.online.programs.dcape import ADAPT, DCape

    _unused("dcape", extra)
    if band is not None:
        raise ValueError("dcape is an equi-join operator (hash partition groups)")
    if graph is not None and not graph.shared:
        raise ValueError("dcape joins its inputs on one shared attribute (the paper's "
                         "footnote 2: joins on several columns are out of scope)")
    if adapt not in ADAPT:
        raise ValueError(f"adapt must be one of {', '.join(ADAPT)}, got {adapt!r}")
    if groups < joiners:
        raise ValueError(f"groups ({groups}) must be >= joiners ({joiners})")
    g = np.arange(groups)
    if assign == "contiguous":
        owner = g * joiners // groups
    elif assign == "round_robin":
        owner = g % joiners
    elif assign == "skewed":
        if joiners < 2 or not 0 < skew_share < 1:
            raise ValueError("assign=skewed needs joiners >= 2 and 0 < skew_share < 1")
        first = int(round(skew_share * groups))
        owner = np.where(g < first, 0, 1 + (g - first) * (joiners - 1) // max(1, groups - first))
    else:
        raise ValueError(f"assign must be contiguous, round_robin or skewed, got {assign!r}")
    layout = HashLayout(owner, by)
    params = dict(groups=groups, by=by, adapt=adapt, push=push, push_percent=push_percent,
                  theta_m=theta_m, theta_t=theta_t, seed=seed)
    DCape(**params)  # its checks (push, push_percent, theta_m) before any run starts
    for name, v in (("theta_d", theta_d), ("theta_f", theta_f)):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if not 0 <= active_from <= 1:
        raise ValueError(f"active_from must be in [0, 1], got {active_from}")
    if not min_span >= 0:
        raise ValueError(f"min_span must be >= 0, got {min_span}")
    if adapt not in RELOCATING:
        return Static(layout, program="dcape", program_params=params)
    return DCapeManager(layout, params, adapt=adapt, theta_d=theta_d, min_span=min_span,
                        theta_f=theta_f, push_percent=push_percent, total_tuples=n_r + n_s,
                        msg_seconds=msg_seconds, bandwidth=bandwidth, tuple_bytes=state_bytes,
                        active_from=active_from)


def diner(joiners: int = 1, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
          controller: str = "exact", band: float | None = None, tups_per_block: int = 50,
          max_outer_mem: int = 19, max_new_arr: int = 1000, wait_thresh: float = 25.0,
          c_read: float = 0.2, c_write: float = 0.2, c_join: float = 0.05,
          c_arrive: float = 0.0, **extra):
    """DINER (paper ``diner``): one site under the memory budget (``budget=`` tuples), the
    Up/Md/Lw flushing policy, ReactiveNL when no tuple arrives for ``wait_thresh`` and the
    clean-up (:mod:`joins.online.programs.diner`). Costs in the arrival times' unit."""
    return _one_site("diner", joiners, band, extra, hash_based=False,
                     tups_per_block=tups_per_block, max_outer_mem=max_outer_mem,
                     max_new_arr=max_new_arr, wait_thresh=wait_thresh, c_read=c_read,
                     c_write=c_write, c_join=c_join, c_arrive=c_arrive, seed=seed)

def hmj(joiners: int = 1, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
        controller: str = "exact", band: float | None = None, n_part: int = 100,
        fan_in: int = 10, tups_per_block: int = 50, wait_thresh: float = 25.0,
        c_read: float = 0.2, c_write: float = 0.2, c_join: float = 0.05,
        c_arrive: float = 0.0, **extra):
    """Hash-Merge Join (DINER's baseline): ``n_part`` buckets, the largest bucket pair flushed
    as a sorted segment pair, merges of ``fan_in`` segments between arrivals and in the
    clean-up (:mod:`joins.online.programs.hmj`). Equi-joins only, one site."""
    return _one_site("hmj", joiners, band, extra, hash_based=True,
                     n_part=n_part, fan_in=fan_in, tups_per_block=tups_per_block,
                     wait_thresh=wait_thresh, c_read=c_read, c_write=c_write, c_join=c_join,
                     c_arrive=c_arrive, seed=seed)

def rpj(joiners: int = 1, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
        controller: str = "exact", band: float | None = None, n_part: int = 100,
        fan_in: int = 10, n_flush: int | None = None, tups_per_block: int = 50,
        wait_thresh: float = 25.0, c_read: float = 0.2, c_write: float = 0.2,
        c_join: float = 0.05, c_arrive: float = 0.0, **extra):
    """Rate-based Progressive Join (DINER's main baseline): ``n_part`` buckets, ``n_flush``
    tuples of the bucket least likely to be probed flushed, reactive memory-disk passes or
    merges of ``fan_in`` segment groups chosen by expected output rate, clean-up merges
    (:mod:`joins.online.programs.rpj`). Equi-joins only, one site."""
    return _one_site("rpj", joiners, band, extra, hash_based=True,
                     n_part=n_part, fan_in=fan_in, n_flush=n_flush,
                     tups_per_block=tups_per_block, wait_thresh=wait_thresh, c_read=c_read,
                     c_write=c_write, c_join=c_join, c_arrive=c_arrive, seed=seed)

def xjoin(joiners: int = 1, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
          controller: str = "exact", band: float | None = None, n_part: int = 100,
          fan_in: int = 10, tups_per_block: int = 50, wait_thresh: float = 25.0,
          c_read: float = 0.2, c_write: float = 0.2, c_join: float = 0.05,
          c_arrive: float = 0.0, **extra):
    """XJoin (DINER's baseline): ``n_part`` buckets, the largest bucket flushed whole, disk
    buckets passed against memory buckets between arrivals, clean-up merges of ``fan_in``
    segment groups (:mod:`joins.online.programs.xjoin`). Equi-joins only, one site."""
    return _one_site("xjoin", joiners, band, extra, hash_based=True,
                     n_part=n_part, fan_in=fan_in, tups_per_block=tups_per_block,
                     wait_thresh=wait_thresh, c_read=c_read, c_write=c_write, c_join=c_join,
                     c_arrive=c_arrive, seed=seed)

def pmj(joiners: int = 1, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
        controller: str = "exact", band: float | None = None, fan_in: int = 10,
        tups_per_block: int = 50, wait_thresh: float = 25.0, c_read: float = 0.2,
        c_write: float = 0.2, c_join: float = 0.05, c_arrive: float = 0.0, **extra):
    """Progressive Merge Join (DINER's band-join baseline): both relations' loads sorted and
    joined when the memory is full, written as run pairs, merged F/2 pairs at a time (F =
    ``fan_in`` runs) after the last arrival (:mod:`joins.online.programs.pmj`). Equi- and band joins, one site."""
    return _one_site("pmj", joiners, band, extra, hash_based=False,
                     fan_in=fan_in, tups_per_block=tups_per_block, wait_thresh=wait_thresh,
                     c_read=c_read, c_write=c_write, c_join=c_join, c_arrive=c_arrive,
                     seed=seed)


def miner(joiners: int = 1, *, n_r: int = 0, n_s: int = 0, seed: int = 0,
          controller: str = "exact", band: float | None = None, graph=None,
          tups_per_block: int = 50, max_outer_mem: int = 19, max_new_arr: int = 1000,
          wait_thresh: float = 25.0, c_read: float = 0.2, c_write: float = 0.2,
          c_join: float = 0.05, c_arrive: float = 0.0, **extra):
    """MINER (paper ``diner``, section 4): DINER for joins of n inputs on different attributes
    along a tree of edges - a chain (``on="R1.a1=R2.a1,R2.a2=R3.a2,..."``, inputs in chain
    order), a star on a hub's attributes or a snowflake - one site under the
    memory budget, an index and Up/Md/Lw areas per join attribute, the odometer reactive phase
    and the clean-up (:mod:`joins.online.programs.miner`). Equality joins."""
    return _one_site("miner", joiners, band, extra, hash_based=True,
                     tups_per_block=tups_per_block, max_outer_mem=max_outer_mem,
                     max_new_arr=max_new_arr, wait_thresh=wait_thresh, c_read=c_read,
                     c_write=c_write, c_join=c_join, c_arrive=c_arrive, seed=seed)
