"""Single-site operators under a memory budget that process arrivals one at a time on a
virtual clock (DINER and its baselines, paper ``diner``): the shared event loop.

Arrivals carry their event time (``time=``; without one, the arrival number) and are kept in
time order. The operator processes one when its time has come and it is free; while it is busy
(flushing, a reactive unit) later arrivals wait in the input buffer. When no tuple arrives for
``wait_thresh`` after it became free and it has reactive work, the reactive phase runs, one
non-interruptible unit at a time, until the operator's own handover rule (e.g. DINER's
MaxNewArr) sends it back to the arrivals. After the stream the engine's clean-up phase calls
:meth:`SingleSite.finish`. Decisions need only the arrivals up to the clock, so the loop
stops once its clock passes the newest delivered arrival time and resumes with the next
delivery, so every decision (and the input buffer it counts) sees every arrival up to the
clock: the result does not depend on how the engine cuts micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from joins.online.disk_blocks import BlockDisk
from joins.online.kernel import EMPTY_I
from joins.online.programs.base import Program, WorkerBase


@dataclass
class SingleSiteState(WorkerBase):
    pend_t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # arrived, unprocessed
    pend_rel: np.ndarray = field(default_factory=lambda: EMPTY_I)
    pend_key: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pend_tid: np.ndarray = field(default_factory=lambda: EMPTY_I)
    pend_attrs: np.ndarray | None = None  # n-way programs: every join attribute per arrival
    horizon: float = -np.inf  # arrivals before it are all delivered
    clock: float = -np.inf  # virtual time the operator is busy until
    reactive_mode: bool = False
    events: int = 0  # arrivals processed (the timestamps of the duplicate checks)
    disk: list = field(default_factory=list)  # per relation: BlockDisk (or per bucket)
    seed: int = 0
    stats: dict = field(default_factory=dict)


class SingleSite(Program):
    """The event loop; a subclass gives the arrival, the reactive unit and the clean-up."""

    inputs = 2
    moves = ()
    spill_modes = ("charge",)
    cleans_up = True  # the engine runs the clean-up phase after the stream
    uses_disk = True  # its disk blocks: files in the run's spill folder, removed after the run
    state = SingleSiteState
    stat_names: tuple[str, ...] = ()

    def __init__(self, *, tups_per_block: int, wait_thresh: float, c_read: float,
                 c_write: float, c_join: float, c_arrive: float, seed: int) -> None:
        if tups_per_block < 1 or wait_thresh < 0:
            raise ValueError("tups_per_block must be >= 1 and wait_thresh >= 0")
        if min(c_read, c_write, c_join, c_arrive) < 0:
            raise ValueError("the time model's costs must be >= 0")
        self.block, self.wait = tups_per_block, wait_thresh
        self.c_read, self.c_write, self.c_join, self.c_arrive = c_read, c_write, c_join, c_arrive
        self.seed = seed

    # --- what a subclass gives ------------------------------------------------------------------

    def arrive(self, ws, cfg, c, out, rel: int, key: float, tid: int) -> None:
        raise NotImplementedError

    def joins_nothing(self, ws, rel: int, key) -> bool:
        """A tuple with a null join attribute matches nothing: counted, never stored."""
        return bool(np.isnan(key))

    def work_left(self, ws) -> bool:
        """Whether a reactive unit has anything to do."""
        return False

    def hand_over(self, ws, cfg, buffered: int) -> bool:
        """Whether the reactive phase returns to the arrivals before its next unit."""
        return buffered > 0

    def on_hand_over(self, ws) -> None:
        """What leaves memory when the reactive phase ends."""

    def reactive_unit(self, ws, cfg, c, out, phase: str | None) -> bool:
        """One non-interruptible unit of reactive work; False when none is left."""
        return False

    def finish(self, ws, cfg, c, out) -> None:
        """The clean-up after the last arrival: emit every result not produced yet."""

    def in_memory(self, ws) -> tuple[int, int]:
        raise NotImplementedError

    def disk_tuples(self, ws) -> int:
        return sum(d.tuples for d in ws.disk)

    # --- the engine's contract ------------------------------------------------------------------

    def new_worker(self, wid):
        return self.state(wid, seed=self.seed,
                          stats=dict.fromkeys(("blocks_written", "blocks_read",
                                               "reactive_episodes", "handovers",
                                               "buffer_at_handover_max",
                                               "buffer_at_handover_sum", "buffer_max",
                                               "memory_max", *self.stat_names), 0))

    def new_disk(self, cfg, ws, name: str) -> BlockDisk:
        return BlockDisk(cfg.spill_dir, f"w{ws.wid}-{self.name}-{name}")

    def deliver(self, ws, d, ctx, c, out):
        cfg = ctx.config
        out.clock = lambda: ws.clock  # each result row keeps the virtual time it came at
        if not ws.disk:  # one disk partition per relation, in the run's spill folder
            ws.disk = [self.new_disk(cfg, ws, str(r)) for r in range(cfg.inputs)]
        order = np.argsort(d.seq, kind="stable")
        if self.inputs != 2:  # n-way: every join attribute of the arrivals
            attrs = (d.attrs if d.attrs is not None else d.key[:, None])[order].astype(float)
            ws.pend_attrs = attrs if ws.pend_attrs is None else \
                np.concatenate([ws.pend_attrs, attrs])
        t = (d.ts if d.ts is not None else d.seq.astype(float))[order]
        ws.pend_t = np.concatenate([ws.pend_t, t])
        ws.pend_rel = np.concatenate([ws.pend_rel, d.rel[order].astype(np.int64)])
        ws.pend_key = np.concatenate([ws.pend_key, d.key[order].astype(float)])
        ws.pend_tid = np.concatenate([ws.pend_tid, d.tid[order]])
        if len(t):
            ws.horizon = max(ws.horizon, float(t[-1]))
            if not np.isfinite(ws.clock):
                ws.clock = float(t[0])
        self.advance(ws, cfg, c, out, final=False)

    def stored(self, ws):
        return self.in_memory(ws)

    def outbox_sizes(self, ws):
        return {}  # one site: nothing ever moves

    def report(self, ws):
        return dict(ws.stats, clock=ws.clock, disk_tuples=self.disk_tuples(ws),
                    buffered=len(ws.pend_t))

    def cleanup(self, ws, pieces, ctx, c, out):
        cfg = ctx.config
        out.clock = lambda: ws.clock
        self.advance(ws, cfg, c, out, final=True)
        if ws.reactive_mode:
            self._end_reactive(ws, self.buffered(ws))
        self.finish(ws, cfg, c, out)

    # --- the loop -------------------------------------------------------------------------------

    def buffered(self, ws) -> int:
        """Arrivals whose time has come that wait for the operator (the input buffer)."""
        return int(ws.pend_t.searchsorted(ws.clock, "right"))

    def used(self, ws, extra: int = 0) -> int:
        """Memory in use (tuples, input buffer, ``extra``), kept as the high-water mark."""
        used = sum(self.in_memory(ws)) + self.buffered(ws) + extra
        ws.stats["memory_max"] = max(ws.stats["memory_max"], used)
        return used

    def _end_reactive(self, ws, buffered: int) -> None:
        ws.reactive_mode = False
        self.on_hand_over(ws)
        ws.stats["handovers"] += 1
        ws.stats["buffer_at_handover_max"] = max(ws.stats["buffer_at_handover_max"], buffered)
        ws.stats["buffer_at_handover_sum"] += buffered

    def advance(self, ws, cfg, c, out, final: bool) -> None:
        """Run the operator on its virtual clock as far as the delivered arrivals decide it."""
        while True:
            if not final and ws.clock > ws.horizon:
                return  # arrivals up to the clock may not be delivered yet: wait for them
            if ws.reactive_mode:
                buffered = self.buffered(ws)
                # once the clock passes the last arrival the disk work left is the clean-up's (a
                # choice: the papers' rule would run it unit by unit as "reactive" while the
                # last arrivals wait; results produced with no arrival to come are not online)
                done = final and ws.clock >= ws.horizon
                if done or not self.work_left(ws) or self.hand_over(ws, cfg, buffered):
                    self._end_reactive(ws, buffered)
                    continue
                if not final and ws.clock >= ws.horizon:
                    return  # arrivals past the horizon are not known yet
                self.reactive_unit(ws, cfg, c, out, phase="reactive")
                continue
            if len(ws.pend_t) and ws.pend_t[0] <= ws.clock:
                self._pop(ws, cfg, c, out)
                continue
            if len(ws.pend_t):
                nxt = float(ws.pend_t[0])
            elif final:
                return  # the stream ended: the clean-up follows
            else:
                nxt = None
            start = ws.clock + self.wait
            if (nxt is None or nxt > start) and (final or start < ws.horizon) and \
                    self.work_left(ws):
                ws.clock = start  # blocked for WaitThresh: the reactive phase
                ws.reactive_mode = True
                ws.stats["reactive_episodes"] += 1
                continue
            if nxt is None:
                return
            ws.clock = nxt

    def _pop(self, ws, cfg, c, out) -> None:
        rel, key, tid = int(ws.pend_rel[0]), float(ws.pend_key[0]), int(ws.pend_tid[0])
        ws.pend_t, ws.pend_rel, ws.pend_key, ws.pend_tid = (
            ws.pend_t[1:], ws.pend_rel[1:], ws.pend_key[1:], ws.pend_tid[1:])
        if ws.pend_attrs is not None:  # n-way: the arrival's join attributes
            key, ws.pend_attrs = ws.pend_attrs[0], ws.pend_attrs[1:]
        ws.stats["buffer_max"] = max(ws.stats["buffer_max"], self.buffered(ws) + 1)
        ws.events += 1
        ws.clock += self.c_arrive
        if self.joins_nothing(ws, rel, key):
            return  # a null key joins nothing: never stored
        c["probes"] += 1
        self.arrive(ws, cfg, c, out, rel, key, tid)
        self.used(ws)


class BlockNestedLoop(SingleSite):
    """A single-site operator with DINER's block nested-loop reactive phase (DINER, MINER):
    the outer batch and hand-over parameters, the in-memory relations ``ws.mem`` and flushing
    (the subclass's ``_flush``) to make room."""

    def __init__(self, tups_per_block: int = 50, max_outer_mem: int = 19,
                 max_new_arr: int = 1000, wait_thresh: float = 25.0, c_read: float = 0.2,
                 c_write: float = 0.2, c_join: float = 0.05, c_arrive: float = 0.0,
                 seed: int = 0) -> None:
        super().__init__(tups_per_block=tups_per_block, wait_thresh=wait_thresh,
                         c_read=c_read, c_write=c_write, c_join=c_join, c_arrive=c_arrive,
                         seed=seed)
        if max_outer_mem < 1 or max_new_arr < 0:
            raise ValueError("max_outer_mem must be >= 1 and max_new_arr >= 0")
        self.max_outer_mem, self.max_new_arr = max_outer_mem, max_new_arr

    def in_memory(self, ws):
        return tuple(len(m) for m in ws.mem)

    def _flush(self, ws) -> None:
        raise NotImplementedError

    def _make_room(self, ws, cfg, need: int) -> None:
        """Flush blocks while the tuples, the input buffer and ``need`` more would pass the
        budget (an arrival needs 1, a reactive unit its batch and blocks)."""
        budget = cfg.budget_tuples
        while budget is not None and sum(self.in_memory(ws)) + self.buffered(ws) + need > \
                budget and sum(self.in_memory(ws)):
            self._flush(ws)


def pairs_of(cfg, rel: int, tid: int, others) -> tuple:
    """The result tid columns (input 0, input 1) of one tuple of ``rel`` with ``others`` (any
    sequence of tids, converted only when the run collects rows), or nothing."""
    if not (cfg.want_pairs or cfg.pairs_dir):
        return ()
    others = np.asarray(others, np.int64)
    mine = np.full(len(others), tid, np.int64)
    return (mine, others) if rel == 0 else (others, mine)
