"""What an online operator declares about itself, so that nothing else has to name it.

An operator is an :class:`Operator`: its name, its paper (None for a user's own), how many
inputs it joins, whether it runs band joins, its parameters (default, meaning, type) and the
function that builds its routing policy. The registry (:mod:`joins.registry`), ``python -m
joins describe``, the stream CLI's checks and ``run_stream`` read these fields; the build
function receives the run's facts as one :class:`Run` and exactly its declared parameters,
defaults filled, so it repeats no signature and checks no leftover keywords.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from joins.declarations import Param

__all__ = ["Operator", "Param", "Run", "RUN_FACTS"]


@dataclass(frozen=True)
class Run:
    """What the engine knows of the run a policy is built for (every operator gets it all)."""

    joiners: int
    n_r: int = 0  # R's tuples (two inputs; input 0 otherwise)
    n_s: int = 0  # S's tuples (the other inputs')
    seed: int = 0
    controller: str = "exact"  # DYNAMIC's statistics: exact or sampled
    band: float | None = None
    graph: Any = None  # the join graph (joins.online.source.JoinGraph)
    tuple_bytes: tuple[float, ...] | None = None  # bytes of one stored tuple per input
    full_history: bool = False  # no window: stored state never expires
    key_range: tuple[float, float] | None = None  # the inputs' key range (band joins)


RUN_FACTS = tuple(f.name for f in fields(Run))  # the keywords an operator is called with


@dataclass(frozen=True, eq=False, repr=False)
class Operator:
    """An online operator: callable as ``op(joiners, n_r=.., band=.., **params)``."""

    name: str
    paper: str | None  # a key of joins.param_docs.PAPERS; None: an operator of no paper
    description: str
    build: Callable[..., Any]  # build(run: Run, **params) -> a routing policy
    params: Mapping[str, Param] = field(default_factory=dict)
    inputs: int | None = 2  # inputs it joins; None: any number (n-way)
    band: bool = True  # runs band joins (False: equality only)
    join_types: tuple[str, ...] = ("inner",)
    listed: bool = True  # False: callable (tests, extensions), not in the registry

    def __repr__(self) -> str:
        return f"Operator({self.name!r})"

    @property
    def n_way(self) -> bool:
        return self.inputs is None

    def defaults(self) -> dict[str, Any]:
        return {n: p.default for n, p in self.params.items()}

    def __call__(self, joiners: int, **given: Any) -> Any:
        facts = {k: given.pop(k) for k in RUN_FACTS if k in given}
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            raise ValueError(f"operator {self.name!r} got unknown parameters: {unknown}")
        run = Run(joiners, **facts)
        if run.band is not None and not self.band:
            raise ValueError(f"{self.name} is an equi-join operator: it cannot run a band join")
        return self.build(run, **{**self.defaults(), **given})
