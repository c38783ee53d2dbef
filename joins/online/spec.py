"""One online run, as one value: :class:`StreamSpec`, built and validated once.

The Python API (:func:`joins.online.run_stream`, from keywords or a spec) and the stream CLI
(``python -m joins stream``, from ``key=value`` arguments, before Spark starts) build the same
spec. Building it checks everything its inputs' data does not decide, against what the
operator declares (:class:`~joins.online.operator_spec.Operator`: its parameters, inputs and
band joins); :meth:`StreamSpec.plan` builds the operator's policy and program for the inputs'
sizes and checks what the layout, program and policy declare (inputs, moves, spill and
eviction modes, predicates, a rescale schedule: :func:`joins.online.checks.check_run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from joins.online.cost import CostModel

SPILL_MODES = ("charge", "disk", "evict")
CONTROLLERS = ("exact", "sampled")


@dataclass(frozen=True, eq=False)
class StreamSpec:
    """What one run of the online engine is: its inputs, operator, parameters and options
    (also the keywords of :func:`joins.online.run_stream`).

    ``on``: one column shared by all inputs, or join edges ("A.x=B.x,B.y=C.y" or a list).
    ``time``: an event-time column (numeric or timestamp) present in every input: arrivals
    are ordered by (time, arrival number). ``tick``: cut micro-batches every ``tick`` units of
    event time (empty ticks included) instead of every ``batch_size`` tuples. ``window``: join
    only tuples whose event times differ by at most ``window``; older state expires.
    ``archive``: BiStream's chained index, expiry by whole subindexes of ``archive`` event
    time, each kept until the other relation is ``window + delay`` past its newest tuple.
    ``tuple_bytes``: bytes of one stored tuple per input (BiStream's chi_R, chi_S): the
    metrics then carry ``mlv_bytes``, each worker's stored tuples in bytes (its MLV).
    ``rescale``: [(arrival number, units), ...] changes a static operator's units there
    (a joiner count for grid and hash layouts, (R units, S units) for a join-biclique).
    ``partitions``: Spark partitions holding the J logical workers (default: the
    application's cores, at most J; about one per core is the efficient shape).
    ``step_tuples``: micro-batches (or ticks) where no decision can fall share one Spark step
    up to this many tuples (default: ``batch_size``, one count-cut micro-batch per step); every
    micro-batch still reports its own rows, with the same counts, and ``batch_wall_seconds``
    is then its step's local wall time split evenly among them.
    ``migration_rate``: migrated tuples a worker takes per new tuple it receives (Thm 4.4: 2).
    ``transport``: how a micro-batch's tuples reach the partitions: ``"broadcast"`` (one
    Spark stage per micro-batch) or ``"shuffle"`` (parallelize + partitionBy, two stages).
    ``backend="local"`` runs the same worker steps in this process (fast property tests
    only; never for measurements).
    ``predicate``: the local join kernel's predicate (:class:`joins.online.kernel.Predicate`,
    e.g. an inequality) instead of the equality or band of ``band``; content-insensitive
    routing (grid, biclique) only, since hash routing sends unequal keys apart.
    ``memory_budget_tuples``: per worker; exceeding it is recorded (status "overflow") and
    charged (``spill="charge"``), also really written to local disk (``spill="disk"``), or
    evicted to disk with a clean-up phase after the stream (``spill="evict"``, D-CAPE).
    ``checkpoint_dir``: a folder every executor can reach (a shared file system, HDFS): every
    ``checkpoint_every`` micro-batches the state is checkpointed there (Spark inputs once, on
    loading), so the run recovers exactly from the loss of an executor; without it the
    checkpoints are local (on the executors) and such a loss stops the run with one
    :class:`~joins.online.engine.StreamFailure`. The run deletes what it wrote there.
    ``cost``: the cost model of the modeled times (default: the uncalibrated
    :class:`~joins.online.cost.CostModel`). ``output``: write the result rows there as
    Parquet; ``collect_output``: return them as a pandas frame.
    """

    operator: Any  # a registry name (kind "online"), an Operator, or a function (tests)
    joiners: int
    r: Any = None  # two inputs R and S (pandas, Spark DataFrames or Parquet paths)...
    s: Any = None
    inputs: Mapping[str, Any] | None = None  # ... or any number, by name
    on: str | list = "key"
    band: float | None = None
    order: str = "random"
    k: float | None = None
    seed: int = 0
    controller: str = "exact"
    batch_size: int = 50_000
    memory_budget_tuples: int | None = None
    spill: str = "charge"
    cost: CostModel | None = None
    output: str | Path | None = None
    collect_output: bool = False
    progress: bool = True
    partitions: int | None = None
    checkpoint_every: int = 10
    migration_rate: float = 2.0
    order_params: dict | None = None
    backend: str = "spark"
    transport: str = "broadcast"
    predicate: Any = None
    time: str | None = None
    tick: float | None = None
    window: float | None = None
    archive: float | None = None
    delay: float = 0.0
    tuple_bytes: tuple[float, ...] | None = None
    rescale: list | None = None
    checkpoint_dir: str | Path | None = None
    step_tuples: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # the operator's own parameters

    def __post_init__(self) -> None:
        _check_sizes(self)
        _check_time(self)
        _check_inputs(self)
        _check_operator(self)

    @classmethod
    def of(cls, r=None, s=None, **given: Any) -> StreamSpec:
        """A spec from ``run_stream``'s keywords: its options, and the operator's parameters
        (every other keyword)."""
        own = {f.name for f in fields(cls)} - {"params", "r", "s"}
        params = {k: v for k, v in given.items() if k not in own}
        return cls(r=r, s=s, params=params, **{k: v for k, v in given.items() if k in own})

    # --- what the spec says, derived once ---------------------------------------------------

    @property
    def names(self) -> list[str]:
        return list(self.inputs) if self.inputs is not None else ["R", "S"]

    @property
    def prefixes(self) -> list[str]:
        """Output column prefixes: ``l_``/``r_`` for R and S, ``<name>_`` for named inputs."""
        return [f"{nm}_" for nm in self.names] if self.inputs is not None else ["l_", "r_"]

    @property
    def data(self) -> list[Any]:
        return list(self.inputs.values()) if self.inputs is not None else [self.r, self.s]

    @cached_property
    def graph(self):
        from joins.online.source import JoinGraph

        return JoinGraph.parse(self.names, self.on)

    @cached_property
    def factory(self):
        """A registry name's declared operator, or the callable given."""
        from joins import registry

        if callable(self.operator):
            return self.operator
        return registry.get(self.operator, "online").load()

    @property
    def operator_name(self) -> str:
        op = self.operator
        if isinstance(op, str):
            return op
        return getattr(op, "name", None) or getattr(op, "__name__", "custom")

    @property
    def cost_model(self) -> CostModel:
        return self.cost or CostModel()

    def reliable(self, spark) -> bool:
        """Checkpoints in ``checkpoint_dir`` (a run on Spark that recovers from a lost
        executor) rather than on the executors."""
        return self.checkpoint_dir is not None and spark is not None and self.backend == "spark"

    def facts(self, n_r: int, n_s: int, key_range: tuple[float, float] | None) -> dict:
        """The run's facts, the same for every operator (:class:`~joins.online.operator_spec.Run`)."""
        return dict(n_r=n_r, n_s=n_s, seed=self.seed, controller=self.controller,
                    band=self.band, graph=self.graph, tuple_bytes=self.tuple_bytes,
                    full_history=self.window is None,  # 2PS migrates state without a window
                    key_range=key_range if self.band is not None else None)

    def plan(self, n_r: int, n_s: int, key_range: tuple[float, float] | None = None):
        """The operator's policy (``rescale=`` applied) and the program it names, for inputs
        of ``n_r`` and ``n_s`` tuples; raises ValueError with one line for a combination the
        layout, program or policy cannot run."""
        return self.checked(self.policy(n_r, n_s, key_range))

    def policy(self, n_r: int, n_s: int, key_range: tuple[float, float] | None = None):
        """The operator's policy as it builds it (which checks its own parameters)."""
        return self.factory(self.joiners, **self.facts(n_r, n_s, key_range), **self.params)

    def checked(self, policy):
        """``policy`` checked against what its layout and program declare (inputs, edges,
        spill modes, predicate, rescale schedule), with the program: (policy, program)."""
        from joins.online import programs
        from joins.online.checks import check_run, rescaled

        program = programs.load(getattr(policy, "program", "joiner"))(
            **getattr(policy, "program_params", {}))
        check_run(policy, program, operator=self.operator_name, inputs=len(self.names),
                  shared=self.graph.shared, spill=self.spill, predicate=self.predicate,
                  rescale=self.rescale)
        return rescaled(policy, self.rescale), program

    def summary(self) -> dict:
        """The run's settings, as its summary carries them."""
        return dict(operator=self.operator_name, on=self.on, band=self.band, order=self.order,
                    k=self.k, seed=self.seed, controller=self.controller,
                    batch_size=self.batch_size, spill=self.spill, window=self.window,
                    archive=self.archive, delay=self.delay, tick=self.tick, inputs=self.names)


# --- the checks made when a spec is built (each raises ValueError with one line) -------------


def _at_least(spec: StreamSpec, name: str, low: int) -> None:
    value = getattr(spec, name)
    if value is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")


def _check_sizes(spec: StreamSpec) -> None:
    """Workers, micro-batches, budget and engine options in their ranges."""
    if spec.joiners < 1:
        raise ValueError(f"joiners must be >= 1, got {spec.joiners}")
    if spec.seed < 0:
        raise ValueError(f"seed must be >= 0, got {spec.seed}")
    for name, low in (("batch_size", 1), ("memory_budget_tuples", 0), ("partitions", 1),
                      ("checkpoint_every", 0), ("step_tuples", 1)):
        _at_least(spec, name, low)
    if spec.spill not in SPILL_MODES:
        raise ValueError(f"spill must be charge, disk or evict, got {spec.spill!r}")
    if spec.controller not in CONTROLLERS:
        raise ValueError(f"controller must be exact or sampled, got {spec.controller!r}")
    if not 0 < spec.migration_rate < float("inf"):  # also refuses nan
        raise ValueError(f"migration_rate must be > 0 and finite, got {spec.migration_rate}")
    if spec.band is not None and not spec.band >= 0:  # also refuses nan
        raise ValueError(f"band must be >= 0, got {spec.band}")
    if spec.predicate is not None and spec.band is not None:
        raise ValueError("give band= or predicate=, not both")


def _check_time(spec: StreamSpec) -> None:
    """Event time: ticks, windows and BiStream's chained index (archive, delay)."""
    if spec.window is not None and not spec.window >= 0:
        raise ValueError(f"window must be >= 0, got {spec.window}")
    if spec.tick is not None and not spec.tick > 0:
        raise ValueError(f"tick must be > 0, got {spec.tick}")
    if (spec.tick is not None or spec.window is not None) and spec.time is None:
        raise ValueError("tick= and window= need an event-time column: time=COLUMN")
    if spec.archive is not None and (spec.window is None or not spec.archive > 0):
        raise ValueError("archive= (the chained index's period) needs a window= and must be > 0")
    if not spec.delay >= 0:
        raise ValueError(f"delay must be >= 0, got {spec.delay}")


def _check_inputs(spec: StreamSpec) -> None:
    """Two inputs or named ones, their join graph, sizes per input, and the order."""
    from datagen.errors import GeneratorError
    from joins.online.source import check_order

    if spec.inputs is not None:
        if spec.r is not None or spec.s is not None:
            raise ValueError("give r= and s=, or inputs=, not both")
        if len(spec.inputs) < 2:
            raise ValueError("a join needs at least two inputs")
    graph = spec.graph  # parsed here: a bad on= fails now
    if graph.composite and spec.band is not None:
        raise ValueError("a band join takes one key column, not a composite key")
    n = len(spec.names)
    if spec.tuple_bytes is not None and (len(spec.tuple_bytes) != n or min(spec.tuple_bytes) < 0):
        raise ValueError(f"tuple_bytes takes one size >= 0 per input ({n} inputs)")
    try:
        check_order(spec.order, spec.seed, spec.k, spec.order_params)
    except GeneratorError as e:
        raise GeneratorError(f"order {spec.order}: {e}") from e


def _check_operator(spec: StreamSpec) -> None:
    """A declared operator's parameters, inputs and band joins, as it declares them."""
    from joins.online.operator_spec import RUN_FACTS, Operator

    op = spec.factory
    if not isinstance(op, Operator):
        return
    unknown = sorted(set(spec.params) - (set(op.params) - set(RUN_FACTS)))
    if unknown:
        raise ValueError(f"operator {op.name!r} got unknown parameters: {unknown}")
    if spec.band is not None and not op.band:
        raise ValueError(f"{op.name} is an equi-join operator: it cannot run a band join; drop "
                         "band= or pick one that runs band joins (python -m joins describe)")
    n = len(spec.names)
    if op.inputs is not None and n != op.inputs:
        from joins.online import operators

        n_way = sorted(name for name, o in operators.declared().items() if o.n_way and o.listed)
        raise ValueError(f"{op.name} joins {op.inputs} inputs; operator="
                         f"{', '.join(n_way[:-1])} or {n_way[-1]} joins {n}")
