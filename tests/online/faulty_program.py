"""Squall's joiner that fails one Spark task's first attempt at a chosen point (fault tests).

The program travels pickled in the run's config, so the executors' Python workers import this
module (the project root is on their path, see ``runtime.spark_session``). The failure is
raised on a task's first attempt only (``TaskContext.attemptNumber() == 0``), after the
wrapped step of the joiner has run, so the failed attempt has already changed the worker
state it read: Spark's retry must start again from the persisted state, not from the failed
attempt's. One task fails per run, the first to reach the point: it creates the file
``marks/fired`` (exclusively), which says where it failed, so a test can check that the
failure really happened. (A retry here starts a new Python worker, about 3 s.) With
``always=True`` every attempt of that task fails: Spark gives up and the run must stop.

``where``:

- a hook of the program (``deliver``, ``end_tick``, ``receive``, ``begin_move``,
  ``cleanup_pieces``, ``cleanup``): fails right after it, at tick ``at`` (``at=None``: in every
  task that calls it; ``receive`` and ``begin_move`` run before the step's first tick, so
  they take ``at=None``);
- ``commit``: fails when the step's partition state is serialised for the cache, after the
  step wrote its result pairs (``pairs_dir``) and added its report: the last thing a task does.
"""

from __future__ import annotations

import os

from joins.online.programs.joiner import Joiner


class FaultInjected(RuntimeError):
    pass


HOOKS = ("deliver", "end_tick", "receive", "begin_move", "cleanup_pieces", "cleanup", "commit")


class FailingJoiner(Joiner):
    def __init__(self, where: str, marks: str, at: int | None = None,
                 always: bool = False) -> None:
        if where not in HOOKS:
            raise ValueError(f"where must be one of {HOOKS}, got {where!r}")
        if where in ("receive", "begin_move") and at is not None:
            raise ValueError(f"{where} runs before the step's first tick: at=None")
        self.where, self.marks, self.at, self.always = where, str(marks), at, always
        self._tick: int | None = None  # the tick of the running task (executor side)

    def _maybe_fail(self, hook: str, tick: int | None) -> None:
        """Raise on the task's first attempt if ``hook`` is the chosen point."""
        from pyspark import TaskContext

        if hook != self.where or (self.at is not None and tick != self.at):
            return
        tc = TaskContext.get()
        if tc is None or tc.attemptNumber() != 0 and not self.always:
            return  # the driver, or a retry: no failure
        fired = os.path.join(self.marks, "fired")
        if self.always and os.path.exists(fired):
            raise FaultInjected(f"injected failure: {hook} at tick {tick}, every attempt")
        try:
            fd = os.open(fired, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return  # another task failed already
        with os.fdopen(fd, "w") as f:
            f.write(f"{hook} tick={tick} stage={tc.stageId()} partition={tc.partitionId()}\n")
        raise FaultInjected(f"injected failure: {hook} at tick {tick}, first attempt")

    def deliver(self, ws, d, ctx, c, out):
        super().deliver(ws, d, ctx, c, out)
        self._tick = ctx.batch
        self._maybe_fail("deliver", ctx.batch)

    def end_tick(self, ws, ctx, c):
        over = super().end_tick(ws, ctx, c)
        self._tick = ctx.batch
        self._maybe_fail("end_tick", ctx.batch)
        return over

    def receive(self, ws, piece, ctx, c, out):
        n = super().receive(ws, piece, ctx, c, out)
        self._maybe_fail("receive", None)
        return n

    def begin_move(self, ws, old, new, start, mode):
        super().begin_move(ws, old, new, start, mode)
        self._maybe_fail("begin_move", None)

    def cleanup_pieces(self, ws, layout, ctx):
        out = super().cleanup_pieces(ws, layout, ctx)
        self._maybe_fail("cleanup_pieces", ctx.batch)
        return out

    def cleanup(self, ws, pieces, ctx, c, out):
        super().cleanup(ws, pieces, ctx, c, out)
        self._maybe_fail("cleanup", ctx.batch)

    def __getstate__(self):
        # pickled on the driver (the run's config) and, with the partition state, at the end
        # of every task: the latter is the "commit" failure point
        self._maybe_fail("commit", self._tick)
        state = dict(self.__dict__)
        state["_tick"] = None
        return state
