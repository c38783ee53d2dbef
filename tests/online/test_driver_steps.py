"""The driver loop's named steps, each on its own (issue: the engine's shape): the step
planner's cuts and moves, routing, the move's quotas, the reports' collection and what the
driver applies from them; and the worker step's parts."""

from __future__ import annotations

import numpy as np
import pytest

from joins.online import migration
from joins.online.controller import Decision, Policy, Scripted, Static
from joins.online.driver import DriverState, StepPlan
from joins.online.engine import Engine
from joins.online.layouts import GridLayout, HashLayout
from joins.online.planner import Planner
from joins.online.routing import release_quotas, route
from joins.online.source import Stream
from joins.online.step_reports import Collected, Collector, advance, apply_step, sync_move
from joins.online.ticks import Tick, Ticks, interleave, tick_end
from joins.online.worker import Chunk, Migrate, RunConfig, TickEnd, _split_records


def _stream(n: int = 20, time: bool = False) -> Stream:
    is_r = np.arange(n) % 2 == 0
    return Stream(is_r, np.arange(n), (np.arange(n) % 5).astype(float),
                  np.linspace(0, 1, n, endpoint=False), int(is_r.sum()), int((~is_r).sum()),
                  time=np.arange(n, dtype=float) if time else None)


def _planner(stream: Stream, policy: Policy, tick: float | None = None, batch: int = 10,
             **cfg) -> tuple[Planner, DriverState]:
    eng = Engine(None, stream, policy, batch_size=batch, partitions=2, config=RunConfig(**cfg),
                 backend="local", progress=False, tick=tick)
    planner = Planner(stream, policy, eng.cfg, eng.ticks, eng._plan_ticks)
    return planner, DriverState.start(policy.layout, cleanup=cfg.get("spill") == "evict")


def _kinds(ops: list) -> list:
    return [op[:2] if isinstance(op, tuple) else type(op).__name__ for op in ops]


def test_a_move_alongside_the_stream_splits_the_step_at_its_trigger():
    grid = GridLayout.initial(2, 2)
    planner, s = _planner(_stream(), Scripted(grid, [(7, lambda lay: lay.halve_rows())]))
    step = planner.plan(s)
    assert (step.start, step.z, step.drain) == (0, 10, False)
    assert _kinds(step.ops) == [(0, 7), "Migrate", (7, 10), "TickEnd"]
    assert step.ops[0][2] is grid and step.ops[2][2] is s.layout is not grid
    assert s.epoch == 1 and s.transfer is not None and s.epochs[-1]["start_tuple"] == 7
    assert s.decisions == [dict(at=7, migrated=True, scripted=True)]


def test_a_boundary_move_cuts_a_count_cut_step_at_its_trigger():
    hashed = HashLayout.initial(4)
    planner, s = _planner(_stream(), Scripted(hashed, [(7, lambda lay: lay.relocate([0], 1))]))
    step = planner.plan(s)
    assert (step.z, step.drain, [(t.a, t.b) for t in step.ticks]) == (7, True, [(0, 7)])
    # the step routes by the old layout; the move follows its deliveries, before its tick end
    assert _kinds(step.ops) == [(0, 7), "Migrate", "TickEnd"]
    assert s.layout is hashed and step.new_layout is not hashed


def test_a_boundary_move_cuts_an_event_time_step_at_the_end_of_its_tick():
    hashed = HashLayout.initial(4)
    planner, s = _planner(_stream(time=True), Scripted(hashed, [(7, lambda lay: lay)]),
                          tick=4.0, batch=100)
    step = planner.plan(s)  # a scripted policy decides within steps: one tick each
    assert [t.index for t in step.ticks] == [0] and step.z == 4
    step2 = planner.plan(_advanced(s, step))
    assert [t.index for t in step2.ticks] == [1] and step2.z == 8 and step2.drain


def _advanced(s: DriverState, step: StepPlan) -> DriverState:
    advance(s, step, Ticks(_stream(time=True), 4.0))
    return s


def test_a_finished_move_is_finalised_by_the_next_step():
    planner, s = _planner(_stream(), Static(GridLayout.initial(2, 2)))
    s.finalize_next, s.transfer, s.b = True, migration.Transfer({}), 3
    s.epochs.append(dict(migration_end_batch=-1))
    step = planner.plan(s)
    assert step.finalize is s.layout and s.transfer is None and not s.finalize_next
    assert s.epochs[-1]["migration_end_batch"] == 3


def test_after_the_stream_evicted_state_is_gathered_then_cleaned_up():
    stream = _stream()
    planner, s = _planner(stream, Static(GridLayout.initial(2, 2)), spill="evict",
                          cleanup_log=True)
    s.pos = len(stream)
    first = planner.plan(s)
    assert _kinds(first.ops) == ["CleanupGather", "TickEnd"] and s.gather and s.cleanup
    assert (first.start, first.z) == (len(stream), len(stream))
    second = planner.plan(s)
    assert _kinds(second.ops) == ["Cleanup", "TickEnd"] and not s.cleanup
    assert not s.running(len(stream), 0)


def test_tick_ends_cut_segments_and_a_move_flushes_the_ticks_before_it():
    stream = _stream(time=True)
    ticks = Ticks(stream, 4.0)
    assert ticks.count == 5
    group = [ticks.get(0), ticks.get(1)]
    grid = GridLayout.initial(1, 1)
    ops = interleave([(0, 5, grid, None), Migrate(grid, grid, 5), (5, 8, grid, None)], group,
                     stream, lambda t: tick_end(stream, t))
    assert _kinds(ops) == [(0, 4), "TickEnd", (4, 5), "Migrate", (5, 8), "TickEnd"]
    assert (ops[1].tick, ops[1].last_seq, ops[1].watermark) == (0, 3, 3.0)


def test_routing_gives_every_partition_every_non_tuple_operation_and_counts_deliveries():
    stream = _stream()
    grid = GridLayout.initial(2, 2)
    end = TickEnd(0, 9)
    per_part, received = route([(0, 10, grid, None), end], stream, 2)
    assert all(ops[-1] is end for ops in per_part)
    dl = [ops[0] for ops in per_part if len(ops) == 2]
    assert all((d.worker % 2 == p).all() for p, d in enumerate(dl))  # a worker's partition
    assert received.sum() == sum(len(d.worker) for d in dl) and len(received) <= 4


def test_quotas_follow_each_workers_deliveries_until_the_stream_ends():
    transfer = migration.Transfer({(0, 1): [100, 0], (2, 3): [100, 0]})
    workers = np.arange(4)
    quotas = release_quotas(transfer, np.array([1, 5, 1, 1]), workers, 2.0, ended=False)
    assert quotas == {(0, 1): (10, 0), (2, 3): (4, 0)}  # 2 x max(own, mean = 2)
    assert release_quotas(transfer, np.zeros(0), workers, 2.0, ended=True) == \
        {(0, 1): (90, 0), (2, 3): (96, 0)}


def _report(worker: int, tick: int, sent: int = 0) -> dict:
    return dict(tick=tick, worker=worker, sent=sent, **{"stored@0": 1, "_private": 1})


def test_collection_makes_rows_in_partition_order_with_the_tuples_seen():
    stream = _stream()
    s = DriverState.start(GridLayout.initial(1, 2), cleanup=False)
    step = StepPlan([Tick(-1, 0, 10, cut=0)], 0, 10)
    reports = {(0, 1): dict(rows=[_report(1, 0, sent=2)], outboxes={(1, 0): (1, 0)},
                            outgoing=1),
               (0, 0): dict(rows=[_report(0, 0)], outboxes={}, outgoing=0,
                            pairs={"normal": [np.arange(2)]})}
    got = Collector(stream, 2, 2).collect(s, step, reports, 1.0)
    assert [r["partition"] for r in s.rows] == [0, 1]
    assert (s.rows[0]["r_seen"], s.rows[0]["s_seen"], s.rows[0]["tuples"]) == (5, 5, 10)
    assert (got.first_row, got.sent, got.outgoing, got.outboxes) == (0, 2, 1, {(1, 0): (1, 0)})
    assert s.phases == ["normal"]
    with pytest.raises(RuntimeError, match="1 of 2 partitions"):
        Collector(stream, 2, 2).collect(s, step, {(0, 0): reports[(0, 0)]}, 1.0)


def test_an_emptied_move_is_finalised_next_and_counts_what_it_sent():
    s = DriverState.start(GridLayout.initial(1, 2), cleanup=False)
    s.transfer = migration.Transfer({(0, 1): [3, 0]})
    s.epochs.append(dict(migration_tuples=3))
    sync_move(s, Collected(0, {(0, 1): (1, 0)}, sent=2))
    assert not s.finalize_next
    sync_move(s, Collected(0, {}, sent=1))
    assert s.finalize_next and s.epochs[-1]["migration_tuples"] == 3


class _Deciding(Static):
    """Decides a move from every step's statistics."""

    def after_batch(self, metrics, seq_next):
        self.seen = metrics
        return Decision(seq_next, {"why": 1}, self.layout)


def test_applying_a_step_asks_the_policy_strips_private_fields_and_moves_on():
    stream = _stream()
    pol = _Deciding(GridLayout.initial(1, 2))
    s = DriverState.start(pol.layout, cleanup=False)
    step = StepPlan([Tick(-1, 0, 10, cut=0)], 0, 10)
    got = Collector(stream, 2, 1).collect(s, step, {(0, 0): dict(
        rows=[_report(0, 0), _report(1, 0)], outboxes={}, outgoing=0)}, 1.0)
    apply_step(s, step, got, {}, pol, len(stream), Ticks(stream, None))
    assert "_private" in pol.seen.columns and all("_private" not in r for r in s.rows)
    assert s.fresh and s.boundary.at == 10 and s.boundary.info == {"why": 1}
    assert (s.pos, s.b, s.cut, s.prev_sent) == (10, 1, 1, False)


def test_a_worker_step_needs_its_chunk():
    chunk = Chunk(0, RunConfig(), [], {})
    assert _split_records(0, [(0, None), (0, chunk)]) == (None, chunk, [])
    with pytest.raises(RuntimeError, match="got no chunk"):
        _split_records(3, [(3, None)])
