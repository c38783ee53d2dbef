"""The driver's state between steps, and one step's plan.

The engine's loop (:meth:`joins.online.engine.Engine.run`) runs named steps over these two
objects: plan the step (:mod:`joins.online.planner`), route it (:mod:`joins.online.routing`),
execute it (Spark or local), collect its reports and apply what they say
(:mod:`joins.online.step_reports`). Whatever one step leaves for the next lives in
:class:`DriverState`; what one step is made of lives in :class:`StepPlan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from joins.online import migration
from joins.online.controller import Decision
from joins.online.layouts import Layout
from joins.online.ticks import Tick


@dataclass
class DriverState:
    """The run on the driver: position in the stream, the layout in force, the running move
    and the results gathered so far."""

    layout: Layout
    old_layout: Layout | None = None  # while a handoff move runs: the layout moved from
    transfer: migration.Transfer | None = None  # the running move
    finalize_next: bool = False  # the move is done: the next step finalises it
    boundary: Decision | None = None  # a move to start when the next step starts
    epoch: int = 0
    pos: int = 0  # the next step's first tuple
    b: int = 0  # the next step's number
    tick_next: int = 0  # the next event-time tick
    cut: int = 0  # count-cut micro-batches cut so far
    cleanup: bool = False  # a clean-up phase is due after the stream
    gather: bool = False  # the clean-up's gathering step ran
    fresh: bool = False  # the policy saw the last step's statistics (after_batch)
    prev: object = None  # the last step's state RDD (Spark)
    prev_sent: bool = False  # the last step sent pieces: the next one unions them
    last_ckpt: object = None  # the last checkpointed state RDD
    epochs: list[dict] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    pairs: list[tuple] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)  # the phase of each of ``pairs``

    @classmethod
    def start(cls, layout: Layout, cleanup: bool) -> DriverState:
        """The state before the first step: epoch 0 under ``layout``."""
        return cls(layout, cleanup=cleanup, epochs=[dict(
            epoch=0, start_tuple=0, start_batch=0, n=layout.mapping[0], m=layout.mapping[1],
            joiners=layout.joiners, migration_tuples=0, migration_end_batch=0)])

    def running(self, n: int, ticks: int) -> bool:
        """Another step is due: tuples or ticks are left, a move runs or is due, or the
        clean-up."""
        return self.pos < n or self.transfer is not None or self.boundary is not None or \
            self.cleanup or self.tick_next < ticks


@dataclass
class StepPlan:
    """One Spark step: its ticks, its tuples [start, z) and its operations in order
    (segments ``(s0, s1, layout, moving_from)``, moves, tick ends, the clean-up)."""

    ticks: list[Tick]
    start: int
    z: int
    ops: list = field(default_factory=list)
    tail: list = field(default_factory=list)  # a boundary move: after the step's deliveries
    drain: bool = False  # send every outbox whole at the end of the step (boundary moves)
    finalize: Layout | None = None  # the layout a finished move leaves in force
    new_layout: Layout | None = None  # the layout a move started at this step moves to
