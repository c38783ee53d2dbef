"""Squall's joiner that kills its executor's JVM (``kill -9``) once, at a chosen tick: the loss
of an executor mid-run, deterministic (a test that kills from outside after a delay hits
different micro-batches on a loaded machine). The first task to reach the tick creates
``marks/killed`` (exclusively) and kills the JVM it runs under, found by walking up its
parent processes to Spark's executor backend; the task is lost with the executor and Spark
schedules it, and every lost cached partition, again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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
            jvm = executor_jvm(os.getpid())
            if jvm is not None:
                try:
                    fd = os.open(os.path.join(self.marks, "killed"),
                                 os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return over  # killed once already
                with os.fdopen(fd, "w") as f:
                    f.write(f"tick={ctx.batch} jvm={jvm}\n")
                os.kill(jvm, signal.SIGKILL)
        return over
