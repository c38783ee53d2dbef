"""After a step on the driver: its per-worker reports become metric rows, and what they say
is applied: the move's progress, units that retire, the policy's decisions from the step's
statistics."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from joins.online.controller import Decision, Policy
from joins.online.driver import DriverState, StepPlan
from joins.online.source import Stream
from joins.online.ticks import Ticks


@dataclass
class Collected:
    """What a step's reports say beyond its rows: the outboxes left and the moved tuples."""

    first_row: int  # the step's first row in :attr:`DriverState.rows`
    outboxes: dict = field(default_factory=dict)  # (src, dest) -> per-input tuples left
    sent: int = 0  # tuples of a move sent in the step
    outgoing: int = 0  # pieces sent (moves, the clean-up's gathering)


class Collector:
    """Turns a step's reports into metric rows: each tick's row per worker, with the tuples
    seen of each input up to the tick's end."""

    def __init__(self, stream: Stream, inputs: int, parts: int) -> None:
        n = len(stream)
        self.inputs, self.parts = inputs, parts
        self.cum = np.zeros((inputs, n + 1), np.int64)
        for i in range(inputs):
            self.cum[i, 1:] = np.cumsum(stream.rel == i)

    def collect(self, s: DriverState, step: StepPlan, reports: dict, wall: float
                ) -> Collected:
        """Append the step's rows, pairs and phases to ``s``, partitions in order."""
        if len(reports) != self.parts:
            raise RuntimeError(f"batch {s.b}: {len(reports)} of {self.parts} partitions "
                               "reported")
        got = Collected(len(s.rows))
        tick_of = {t.number: t for t in step.ticks}
        for (_, pid), payload in sorted(reports.items()):
            for row in payload["rows"]:
                s.rows.append(self.row(s, step, tick_of, row, pid, wall))
                got.sent += row["sent"]
            got.outboxes.update(payload["outboxes"])
            got.outgoing += payload["outgoing"]
            for ph, tids in payload.get("pairs", {}).items():
                s.pairs.append(tuple(tids))
                s.phases.append(ph)
        return got

    def row(self, s: DriverState, step: StepPlan, tick_of: dict, row: dict, pid: int,
            wall: float) -> dict:
        """One worker's row of one tick, with the run's context."""
        k = row.pop("tick")
        tk = tick_of.get(k)
        a0, b0 = (tk.a, tk.b) if tk is not None else (step.start, step.z)
        seen = {f"seen@{i}": int(self.cum[i, b0]) for i in range(self.inputs)}
        return dict(batch=k, step=s.b, epoch=s.epoch, n=s.layout.mapping[0],
                    m=s.layout.mapping[1], r_seen=seen["seen@0"],
                    s_seen=int(b0 - seen["seen@0"]), tuples=b0 - a0,
                    migrating=s.transfer is not None,
                    batch_wall_seconds=wall / len(step.ticks), partition=pid, **seen, **row)


def apply_step(s: DriverState, step: StepPlan, got: Collected, quotas: dict, policy: Policy,
               n: int, ticks: Ticks) -> None:
    """What the step's reports say, applied to ``s``, then on to the next step."""
    sync_move(s, got)
    # the next step unions this one's outgoing pieces (moves, clean-up gathering)
    s.prev_sent = got.outgoing > 0 or bool(quotas)
    if step.drain:
        s.layout = step.new_layout
    if s.transfer is None and s.boundary is None:  # drained units leave once empty
        retire_units(s, step, got.first_row, policy)
    ask_policy(s, step, got, policy, n)
    for row in s.rows[got.first_row:]:  # the controller's private fields are not metrics
        for k in [k for k in row if k.startswith("_")]:
            del row[k]
    advance(s, step, ticks)


def sync_move(s: DriverState, got: Collected) -> None:
    """The executors' outboxes are the move's truth; once empty, the next step finalises it."""
    if s.transfer is None or s.finalize_next:
        return
    s.transfer.sync(got.outboxes, got.sent)
    if s.transfer.done:
        s.finalize_next = True
        s.epochs[-1]["migration_tuples"] = s.transfer.sent


def retire_units(s: DriverState, step: StepPlan, first_row: int, policy: Policy) -> None:
    """Units the layout drains leave once they hold nothing: a move at the next step."""
    held = {}
    for row in s.rows[first_row:]:
        held[row["worker"]] = row.get("outbox", 0) + sum(
            v for k, v in row.items() if k.startswith("stored@"))
    retired = s.layout.retire(held)
    if retired is None:
        return
    adopt = getattr(policy, "adopt", None)
    if adopt is not None:  # a policy that builds on its layout (2PS)
        adopt(retired)
    gone = sorted(set(s.layout.workers.tolist()) - set(retired.workers.tolist()))
    s.boundary = Decision(step.z, {"retired": gone}, retired)


def ask_policy(s: DriverState, step: StepPlan, got: Collected, policy: Policy, n: int) -> None:
    """A policy that decides from a step's statistics sees them when no move runs or is due
    and tuples are left; a move it decides starts at the next step."""
    uses_stats = type(policy).after_batch is not Policy.after_batch
    s.fresh = uses_stats and s.transfer is None and s.boundary is None and step.z < n
    if not s.fresh:
        return
    dec = policy.after_batch(pd.DataFrame(s.rows[got.first_row:]), step.z)
    if dec is None:
        return
    if dec.layout is not None:
        s.boundary = dec
    else:
        s.decisions.append(dict(at=step.z, migrated=False, **dec.info))


def advance(s: DriverState, step: StepPlan, ticks: Ticks) -> None:
    """On to the next step: past the step's ticks and tuples."""
    if ticks.tick is not None and step.ticks[0].index < ticks.count:
        s.tick_next += len(step.ticks)
    if ticks.tick is None:
        s.cut += len(step.ticks)
    s.pos, s.b = step.z, s.b + 1
