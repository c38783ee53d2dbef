"""The one registry of join algorithms: name -> implementation, derived from declarations.

The batch entries are every listed :class:`~joins.declarations.BatchAlgorithm` declared in a
module of :mod:`joins.batch` (its function ``run(ctx: BatchContext, left, right, spec:
JoinSpec) -> JoinResult``, imported when used); the online entries every listed
:class:`~joins.online.operator_spec.Operator` declared in a module of
:mod:`joins.online.operators`; each with its paper, join types and description. Nothing is
added here for a new algorithm.
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

    def declaration(self) -> Any:
        """What the algorithm declares: its :class:`~joins.declarations.BatchAlgorithm` or
        :class:`~joins.online.operator_spec.Operator` (its parameters, with their defaults
        and meanings)."""
        if self.kind == "online":
            return self.load()
        from joins import batch

        return batch.declared()[self.name]


def _batch() -> dict[str, Algorithm]:
    """The listed algorithms declared in :mod:`joins.batch`'s modules (nothing to add here)."""
    from joins import batch

    return {name: Algorithm(name, "batch", algo.paper, algo.target, algo.join_types,
                            algo.description)
            for name, algo in batch.declared().items() if algo.listed}


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
    return {**_batch(), **_online()}


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
