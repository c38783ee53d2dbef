"""The one registry of join algorithms: name -> implementation.

A batch algorithm is one module plus one entry here, pointing at a function ``run(ctx:
BatchContext, left, right, spec: JoinSpec) -> JoinResult`` (imported when used). The online
entries are derived: every listed :class:`~joins.online.operator_spec.Operator` declared in a
module of :mod:`joins.online.operators`, with its paper, join types and description.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Algorithm:
    name: str
    kind: str  # "batch" or "online"
    paper: str | None  # a key of joins.param_docs.PAPERS; None: in no paper (a user's own)
    target: str  # "module:function"
    join_types: tuple[str, ...] = ("inner",)
    description: str = ""

    def load(self) -> Callable[..., Any]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


_ALL = ("inner", "left", "right", "full")

_BATCH: dict[str, Algorithm] = {
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
    ]
}


def _online() -> dict[str, Algorithm]:
    """The listed operators declared in :mod:`joins.online.operators` (nothing to add here)."""
    from joins.online import operators

    return {name: Algorithm(name, "online", op.paper, operators.target(name), op.join_types,
                            op.description)
            for name, op in operators.declared().items() if op.listed}


@functools.cache
def algorithms() -> dict[str, Algorithm]:
    """Every algorithm by name: the batch entries and the declared online operators, whose
    modules are imported on first use, not with the registry (it stays importable with no
    package installed, as ``make setup``'s path check imports it)."""
    return {**_BATCH, **_online()}


def __getattr__(name: str) -> Any:
    if name == "ALGORITHMS":  # the table, built on first use
        return algorithms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownAlgorithm(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def get(name: str, kind: str | None = None) -> Algorithm:
    algo = algorithms().get(name)
    if algo is None or (kind is not None and algo.kind != kind):
        valid = ", ".join(sorted(n for n, a in algorithms().items() if kind in (None, a.kind)))
        raise UnknownAlgorithm(f"unknown {kind + ' ' if kind else ''}algorithm {name!r}; valid: {valid}")
    return algo


def names(kind: str | None = None) -> list[str]:
    return sorted(n for n, a in algorithms().items() if kind in (None, a.kind))
