"""What an algorithm declares about itself, so that nothing else has to name it.

A parameter is a :class:`Param` (default, meaning, type), for online operators
(:class:`joins.online.operator_spec.Operator`) and batch algorithms alike. A batch algorithm
is a :class:`BatchAlgorithm` declared in its module of :mod:`joins.batch`: its name, paper,
description, join types, parameters and run function. The registry (:mod:`joins.registry`),
``python -m joins describe``, the CLIs' parameter checks and :mod:`joins.param_docs` read
these declarations; a new batch algorithm is one module (and its test), with no registry line.

Importing this module imports nothing else of the project (nor pyspark).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

ALL_JOIN_TYPES = ("inner", "left", "right", "full")


@dataclass(frozen=True)
class Derived:
    """A default the code computes when the run starts, from other parameters or the run
    (``describe`` shows "derived"; the meaning says from what): the code's expression."""

    source: str


@dataclass(frozen=True)
class Param:
    """One parameter: of an online operator (``name=`` on the stream CLI, a keyword of
    ``run_stream``) or of a batch algorithm (``param.<name>=``, read as ``ctx.params``)."""

    default: Any
    meaning: str
    type: Any = None  # what the CLI converts a value to; None: the default's type

    @property
    def kind(self) -> Any:
        return self.type if self.type is not None else type(self.default)

    @property
    def default_source(self) -> str:
        """The default as source text: the literal, or a derived default's expression."""
        return self.default.source if isinstance(self.default, Derived) else repr(self.default)


@dataclass(frozen=True, eq=False, repr=False)
class BatchAlgorithm:
    """A batch join algorithm: ``run(ctx: BatchContext, left, right, spec: JoinSpec) ->
    JoinResult`` (:mod:`joins.api`), reading its parameters as ``ctx.params`` with the
    defaults declared here (a test checks the code's defaults against them)."""

    name: str
    paper: str | None  # a key of joins.param_docs.PAPERS; None: an algorithm of no paper
    description: str
    run: Callable[..., Any]
    params: Mapping[str, Param] = field(default_factory=dict)
    join_types: tuple[str, ...] = ("inner",)
    listed: bool = True  # False: callable (tests, extensions), not in the registry

    def __repr__(self) -> str:
        return f"BatchAlgorithm({self.name!r})"

    @property
    def target(self) -> str:
        """``module:function`` of its run function (the registry's lazy reference)."""
        return f"{self.run.__module__}:{self.run.__name__}"

    def defaults(self) -> dict[str, Any]:
        return {n: p.default for n, p in self.params.items()}
