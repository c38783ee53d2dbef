"""The one registry of join algorithms: name -> implementation, imported lazily.

A new algorithm is one module plus one entry here. Batch entries point at a function
``run(ctx: BatchContext, left, right, spec: JoinSpec) -> JoinResult``; online entries point at
an operator factory in ``joins.online``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Algorithm:
    name: str
    kind: str  # "batch" or "online"
    paper: str  # short name of the paper that defines it ("spark" for Spark built-ins)
    target: str  # "module:function"
    join_types: tuple[str, ...] = ("inner",)
    description: str = ""

    def load(self) -> Callable[..., Any]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


_ALL = ("inner", "left", "right", "full")

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in [
        # Spark's own joins (baselines of the AM-Join paper)
        Algorithm("hash_join", "batch", "amjoin", "joins.batch.spark_builtin:hash_join", _ALL,
                  "Shuffle hash join, adaptive execution off"),
        Algorithm("spark3_join", "batch", "amjoin", "joins.batch.spark_builtin:spark3_join", _ALL,
                  "Spark's join with adaptive execution and skew-join handling on"),
        Algorithm("spark_aqe_no_skew", "batch", "amjoin",
                  "joins.batch.spark_builtin:spark_aqe_no_skew", _ALL,
                  "Adaptive execution on, skew-join split off"),
        Algorithm("broadcast_join", "batch", "amjoin", "joins.batch.spark_builtin:broadcast_join",
                  ("inner", "left", "right"),
                  "Broadcast the smaller relation (the right one for inner joins)"),
        # Skew-join and Small-Large outer-join baselines of the AM-Join paper
        Algorithm("full_skew_join", "batch", "amjoin", "joins.batch.full_skew_join:run",
                  ("inner",),
                  "Full-SkewJoin (PRPD family): hot keys round-robin + broadcast, rest hashed"),
        Algorithm("fgsd_join", "batch", "amjoin", "joins.batch.fgsd_join:run", ("inner",),
                  "FGSD-Join: sampled cross-relation histogram, load-balanced key ranges"),
        Algorithm("der", "batch", "amjoin", "joins.batch.der:run", _ALL,
                  "DER Small-Large outer join: broadcast small side, redistribute unjoined ids"),
        Algorithm("ddr", "batch", "amjoin", "joins.batch.ddr:run", _ALL,
                  "DDR Small-Large outer join: broadcast small side, redistribute unjoined records"),
        # The AM-Join paper's own algorithms
        Algorithm("tree_join_basic", "batch", "amjoin", "joins.batch.tree_join:tree_join_basic",
                  _ALL, "Tree-Join-Basic: multi-stage chunking of hot keys, whole keys grouped first"),
        Algorithm("tree_join", "batch", "amjoin", "joins.batch.tree_join:tree_join", _ALL,
                  "Tree-Join: keys hot in both relations unraveled, no task holds a whole hot key"),
        Algorithm("ib_join", "batch", "amjoin", "joins.batch.ib_join:ib_join", _ALL,
                  "Index-Broadcast-Join family (right relation indexed); right/full = IB-FO"),
        Algorithm("am_join_basic", "batch", "amjoin", "joins.batch.am_join:am_join_basic", _ALL,
                  "AM-Join-Basic: AM-Join with Tree-Join-Basic for keys hot in both relations"),
        Algorithm("am_join", "batch", "amjoin", "joins.batch.am_join:am_join", _ALL,
                  "AM-Join: Tree-Join (HH), IB-Joins (HC, CH), Shuffle-Join (CC)"),
        # Online operators of the Squall paper (joins.online engine)
        Algorithm("dynamic", "online", "squall", "joins.online.operators:dynamic", ("inner",),
                  "Squall DYNAMIC: adaptive (n,m) grid, doubling trigger, pairwise migration"),
        Algorithm("static_mid", "online", "squall", "joins.online.operators:static_mid",
                  ("inner",), "Squall STATICMID: fixed (sqrt J, sqrt J) grid"),
        Algorithm("static_opt", "online", "squall", "joins.online.operators:static_opt",
                  ("inner",), "Squall STATICOPT: fixed grid optimal for the final sizes"),
        Algorithm("shj", "online", "squall", "joins.online.operators:shj", ("inner",),
                  "Parallel symmetric hash join, hash-partitioned on the key (equi only)"),
        # The online engine's operators shared by the BiStream, DINER and D-CAPE papers
        Algorithm("join_biclique", "online", "bistream", "joins.online.operators:join_biclique",
                  ("inner",), "BiStream join-biclique: R units and S units, random routing, "
                  "each tuple stored once and probing the other side (random or ContRand "
                  "routing)"),
        Algorithm("join_matrix", "online", "bistream", "joins.online.operators:join_matrix",
                  ("inner",), "BiStream's JM baseline: static sqrt(x) x sqrt(x) join-matrix, "
                  "each tuple stored along a row (R) or a column (S)"),
        Algorithm("mjoin", "online", "diner", "joins.online.operators:mjoin", ("inner",),
                  "MJoin: n-way symmetric hash join (DINER's baseline, D-CAPE's per-machine "
                  "join)"),
        Algorithm("diner", "online", "diner", "joins.online.operators:diner", ("inner",),
                  "DINER: single-site join under a memory budget, Up/Md/Lw flushing, "
                  "ReactiveNL between arrivals, clean-up"),
        Algorithm("hmj", "online", "diner", "joins.online.operators:hmj", ("inner",),
                  "Hash-Merge Join: hash buckets, largest bucket pair flushed as sorted "
                  "segments, merges of F segments between arrivals (DINER's baseline)"),
        Algorithm("rpj", "online", "diner", "joins.online.operators:rpj", ("inner",),
                  "Rate-based Progressive Join: flushes the buckets least likely to be "
                  "probed, reactive passes or merges by expected output rate (DINER's "
                  "baseline)"),
        Algorithm("xjoin", "online", "diner", "joins.online.operators:xjoin", ("inner",),
                  "XJoin: hash buckets, the largest flushed whole, disk buckets joined with "
                  "memory buckets between arrivals (DINER's baseline)"),
        Algorithm("pmj", "online", "diner", "joins.online.operators:pmj", ("inner",),
                  "Progressive Merge Join: loads sorted and joined when the memory is full, "
                  "run pairs merged after the last arrival; band joins too (DINER's "
                  "baseline)"),
        Algorithm("miner", "online", "diner", "joins.online.operators:miner", ("inner",),
                  "MINER: DINER for chain, star and snowflake joins of n inputs on different "
                  "attributes, an index "
                  "and Up/Md/Lw areas per attribute, odometer ReactiveNL, clean-up"),
        Algorithm("dcape", "online", "dcape", "joins.online.operators:dcape", ("inner",),
                  "D-CAPE: n-way hash join over machines in 300 partition groups, state "
                  "spill by productivity, relocation, lazy-disk and active-disk, clean-up"),
    ]
}


class UnknownAlgorithm(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def get(name: str, kind: str | None = None) -> Algorithm:
    algo = ALGORITHMS.get(name)
    if algo is None or (kind is not None and algo.kind != kind):
        valid = ", ".join(sorted(n for n, a in ALGORITHMS.items() if kind in (None, a.kind)))
        raise UnknownAlgorithm(f"unknown {kind + ' ' if kind else ''}algorithm {name!r}; valid: {valid}")
    return algo


def names(kind: str | None = None) -> list[str]:
    return sorted(n for n, a in ALGORITHMS.items() if kind in (None, a.kind))
