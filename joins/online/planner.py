"""Planning one step on the driver: its ticks, the moves that start in it and the controller's
decisions that cut it.

The controller (a :class:`Policy`) scans the step's arrivals and may fire at an exact tuple:
a move that runs alongside the stream splits the step's tuples into two segments there; a
boundary move (D-CAPE's protocol) cuts the step at the trigger, or at the end of its tick,
and follows the step's deliveries whole.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from joins.online import migration
from joins.online.controller import Policy
from joins.online.driver import DriverState, StepPlan
from joins.online.layouts import Layout
from joins.online.source import Stream
from joins.online.ticks import Tick, Ticks, interleave, tick_end
from joins.online.worker import Cleanup, CleanupGather, Migrate, RunConfig, TickEnd

# (tick_next, pos, settled, cut) -> the step's ticks and its end tuple
PlanTicks = Callable[[int, int, bool, int], tuple[list[Tick], int]]


class Planner:
    """Plans each step of a run from the :class:`DriverState`, updating it with the moves and
    decisions the step holds."""

    def __init__(self, stream: Stream, policy: Policy, config: RunConfig, ticks: Ticks,
                 plan_ticks: PlanTicks) -> None:
        self.stream, self.policy, self.cfg = stream, policy, config
        self.ticks, self.plan_ticks = ticks, plan_ticks

    def plan(self, s: DriverState) -> StepPlan:
        """The next step, in the order its parts depend on each other."""
        step = self.step_ticks(s)
        self.cleanup(s, step)
        self.finalize(s, step)
        self.pending_move(s, step)
        self.scan(s, step)
        self.lay_out(step)
        return step

    def step_ticks(self, s: DriverState) -> StepPlan:
        """The step's ticks and end tuple; after the stream (moves draining, the clean-up),
        a tick of its own with no tuples."""
        n, ticks = len(self.stream), self.ticks
        if s.pos < n or s.tick_next < ticks.count:
            settled = s.fresh and s.transfer is None and s.boundary is None and \
                not s.finalize_next and not s.layout.drains
            group, z = self.plan_ticks(s.tick_next, s.pos, settled, s.cut)
            return StepPlan(group, s.pos, z)
        extra = -1 if ticks.tick is None else max(ticks.count, s.tick_next)
        if ticks.tick is not None:
            s.tick_next = extra + 1
        return StepPlan([Tick(extra, s.pos, s.pos, cut=s.cut)], s.pos, s.pos)

    def cleanup(self, s: DriverState, step: StepPlan) -> None:
        """Once the stream ended and no move is left: the clean-up of evicted state, after a
        step that gathers it where its partners are (unless it never moved)."""
        if s.pos < len(self.stream) or s.transfer is not None or s.boundary is not None or \
                s.tick_next < self.ticks.count:
            return
        if s.gather or (len(s.epochs) == 1 and not self.cfg.cleanup_log):
            step.ops.append(Cleanup())
            s.cleanup = False
        else:
            step.ops.append(CleanupGather(s.layout))
            s.gather = True

    @staticmethod
    def finalize(s: DriverState, step: StepPlan) -> None:
        """A move whose last tuples were sent in the last step ends with this one."""
        if s.finalize_next:
            step.finalize, s.transfer, s.finalize_next = s.layout, None, False
            s.old_layout = None
            s.epochs[-1]["migration_end_batch"] = s.b

    def pending_move(self, s: DriverState, step: StepPlan) -> None:
        """A move decided at the last step's end (from its statistics, or units retiring)
        starts at this step's first tuple, or after its deliveries for a boundary move."""
        due = s.boundary
        if due is None or s.transfer is not None:
            return
        if due.layout.move_mode == "boundary":
            # D-CAPE's protocol: the step routes by the old layout; the move follows its
            # deliveries, whole, so nothing arrives while state is in flight
            self.start_move(s, due.layout, step.z, due.info, step.tail)
            step.drain = True
        else:
            self.start_move(s, due.layout, s.pos, due.info, step.ops)
        s.decisions.append(dict(at=s.pos, migrated=True, **due.info))
        step.new_layout, s.boundary = due.layout, None
        if not step.drain:
            s.layout = step.new_layout

    def scan(self, s: DriverState, step: StepPlan) -> None:
        """The controller's decisions among the step's tuples, at most one move each step;
        then the step's segments of tuples by the layout in force over each."""
        st, pol = self.stream, self.policy
        a = seg0 = s.pos
        while a < step.z and s.transfer is None:
            f = pol.scan(st.is_r[a:step.z], a)
            if f is None:
                a = step.z
                break
            at = a + f
            dec = pol.decide(at)
            s.decisions.append(dict(at=at, migrated=dec.layout is not None, **dec.info))
            if dec.layout is not None:
                if dec.layout.move_mode == "boundary":
                    self.cut(s, step, at)
                    self.start_move(s, dec.layout, step.z, dec.info, step.tail)
                    step.drain, step.new_layout = True, dec.layout
                    break
                if at > seg0:
                    step.ops.append((seg0, at, s.layout, s.old_layout))
                self.start_move(s, dec.layout, at, dec.info, step.ops)
                s.layout, seg0 = dec.layout, at
            a = at + 1
        if s.transfer is not None and a < step.z:
            pol.observe(st.is_r[a:step.z], a)
        if hasattr(pol, "count_groups"):
            pol.count_groups(st.key[s.pos:step.z])
        if step.z > seg0:
            step.ops.append((seg0, step.z, s.layout, s.old_layout))

    def cut(self, s: DriverState, step: StepPlan, at: int) -> None:
        """A boundary move fired at tuple ``at`` ends the step: at the trigger (count-cut),
        or at the end of its tick."""
        if self.ticks.tick is not None:
            k = int(np.searchsorted(self.ticks.bounds, at, "right")) - 1
            step.ticks = [t for t in step.ticks if t.index <= k]
            step.z = step.ticks[-1].b
        else:
            step.ticks = [Tick(-1, s.pos, at, cut=s.cut)]
            step.z = at

    def start_move(self, s: DriverState, new: Layout, at: int, info: dict, ops: list) -> None:
        """Start moving from the layout in force to ``new`` at tuple ``at``: a new epoch.
        A rejoin move's transfers are planned here; otherwise the executors report them."""
        old, st, mode = s.layout, self.stream, new.move_mode
        program = self.cfg.program
        if program is not None and mode not in program.moves:
            raise ValueError(f"the {program.name} program cannot move state by {mode} (its "
                             f"moves: {', '.join(program.moves)})")
        ops.append(Migrate(old, new, at, mode))
        if mode == "rejoin":
            planned = migration.plan(old, new, st.is_r[:at], st.key[:at], st.u[:at])
            s.transfer = migration.Transfer(planned, mode)
        else:
            s.transfer = migration.Transfer(None, mode)
            s.old_layout = old if mode == "handoff" else None
        s.epoch += 1
        s.epochs.append(dict(epoch=s.epoch, start_tuple=at, start_batch=s.b, n=new.mapping[0],
                             m=new.mapping[1], joiners=new.joiners,
                             migration_tuples=s.transfer.total, migration_end_batch=-1, **info))

    def lay_out(self, step: StepPlan) -> None:
        """The step's operations cut at its tick ends, a boundary move right before the last
        tick end."""
        ops = interleave(step.ops, step.ticks, self.stream, partial(tick_end, self.stream))
        if step.tail:
            last = max(i for i, op in enumerate(ops) if isinstance(op, TickEnd))
            ops[last:last] = step.tail
        step.ops = ops
