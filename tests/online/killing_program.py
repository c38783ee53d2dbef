"""Squall's joiner that kills its executor's JVM (``kill -9``) once, at a chosen tick: the loss
of an executor mid-run, deterministic (a test that kills from outside after a delay hits
different micro-batches on a loaded machine). The first task to reach the tick creates
``marks/killed`` (exclusively) and kills the JVM it runs under, found by walking up its
parent processes to Spark's executor backend; the task is lost with the executor and Spark
schedules it, and every lost cached partition, again."""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path

from joins.online.programs.dcape import DCape
from joins.online.programs.joiner import Joiner

EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"


def executor_jvm(pid: int) -> int | None:
    """The executor JVM among ``pid``'s ancestors (None when not under one)."""
    while pid > 1:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if EXECUTOR_CLASS.encode() in cmdline:
            return pid
        pid = int(stat.rpartition(")")[2].split()[1])  # the parent's pid
    return None


class KillingJoiner(Joiner):
    def __init__(self, marks: str, at: int) -> None:
        self.marks, self.at = str(marks), at

    def end_tick(self, ws, ctx, c):
        over = super().end_tick(ws, ctx, c)
        if ctx.batch == self.at:
            _kill_once(self.marks, f"tick={ctx.batch}")
        return over


def _kill_once(marks: str, what: str) -> None:
    """Kill this task's executor JVM, once per run (the first task to get here)."""
    jvm = executor_jvm(os.getpid())
    if jvm is None:
        return
    try:
        fd = os.open(os.path.join(marks, "killed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(f"{what} jvm={jvm}\n")
    os.kill(jvm, signal.SIGKILL)


class _KillsOnce:
    """Kills its executor once: ``when="moving"`` at the first tick end of a worker with state
    in its outbox (a move in flight at a rate), ``"receive"`` when a worker takes moved state
    in (a boundary move's second half), ``"gather"`` in the clean-up's gathering step,
    ``"cleanup"`` in the clean-up itself. Module-level classes: Spark pickles the program by
    reference."""

    marks: str = ""
    when: str = ""

    def end_tick(self, ws, ctx, c):
        over = super().end_tick(ws, ctx, c)
        if self.when == "moving" and any(sum(v) for v in self.outbox_sizes(ws).values()):
            _kill_once(self.marks, f"moving tick={ctx.batch}")
        return over

    def receive(self, ws, piece, ctx, c, out):
        got = super().receive(ws, piece, ctx, c, out)
        if self.when == "receive":
            _kill_once(self.marks, f"receive tick={ctx.batch}")
        return got

    def cleanup_pieces(self, ws, layout, ctx):
        out = super().cleanup_pieces(ws, layout, ctx)
        if self.when == "gather":
            _kill_once(self.marks, "gather")
        return out

    def cleanup(self, ws, pieces, ctx, c, out):
        super().cleanup(ws, pieces, ctx, c, out)
        if self.when == "cleanup":
            _kill_once(self.marks, "cleanup")


class KillingMoveJoiner(_KillsOnce, Joiner):
    def __init__(self, marks: str, when: str) -> None:
        self.marks, self.when = str(marks), when


class KillingDCape(_KillsOnce, DCape):
    def __init__(self, marks: str, when: str, **params) -> None:
        super().__init__(**params)
        self.marks, self.when = str(marks), when


def killing(name: str, marks: str, when: str):
    """The factory of program ``name`` (joiner or dcape) that kills its executor once."""
    cls = {"joiner": KillingMoveJoiner, "dcape": KillingDCape}[name]
    return partial(cls, marks, when)
