"""Progress of a long Spark action for a person waiting at a terminal: every ``every_s`` seconds
one line with the stages done and the running stages' tasks, read from Spark's status tracker
(no listener, nothing added to the run's own work)."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class StageProgress:
    """Context manager: report progress on ``out`` while the block runs, after ``after_s``."""

    def __init__(self, spark, every_s: float = 10.0, after_s: float = 10.0,
                 out: TextIO | None = None, label: str = "") -> None:
        self.spark, self.every_s, self.after_s = spark, every_s, after_s
        self.out, self.label = out or sys.stderr, label
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._seen: set[int] = set()

    def line(self) -> str | None:
        """The progress line now, or None if Spark runs no stage."""
        tracker = self.spark.sparkContext.statusTracker()
        active = sorted(tracker.getActiveStageIds())
        running = []
        for sid in active:
            info = tracker.getStageInfo(sid)
            if info is not None:
                running.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
        done = len(self._seen - set(active))
        self._seen |= set(active)
        if not running:
            return None
        elapsed = time.perf_counter() - self._t0
        return (f"  {self.label}{elapsed:.0f} s: {done} stage(s) done; " + ", ".join(running))

    def _loop(self) -> None:
        if self._stop.wait(self.after_s):
            return
        while not self._stop.is_set():
            try:
                text = self.line()
            except Exception:  # a stopping session cannot say: progress is best effort
                return
            if text:
                print(text, file=self.out, flush=True)
            self._stop.wait(self.every_s)

    def __enter__(self) -> StageProgress:
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="stage-progress")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
