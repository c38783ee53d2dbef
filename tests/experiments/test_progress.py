"""Progress lines of a long Spark action, read from the status tracker."""

from __future__ import annotations

import io
import time
from types import SimpleNamespace

from runtime.progress import StageProgress


class _Tracker:
    def __init__(self):
        self.calls = 0

    def getActiveStageIds(self):
        self.calls += 1
        return [3] if self.calls == 1 else [4]

    def getStageInfo(self, sid):
        return SimpleNamespace(numCompletedTasks=5, numTasks=8)


def _spark(tracker):
    return SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))


def test_lines_name_the_stages_done_and_the_running_ones():
    p = StageProgress(_spark(_Tracker()), label="am_join: ")
    p._t0 = time.perf_counter()
    assert p.line().endswith("0 stage(s) done; stage 3: 5/8 tasks")
    assert p.line().endswith("1 stage(s) done; stage 4: 5/8 tasks")


def test_nothing_is_printed_for_a_short_run():
    out = io.StringIO()
    with StageProgress(_spark(_Tracker()), every_s=0.01, after_s=5, out=out):
        pass
    assert out.getvalue() == ""
    with StageProgress(_spark(_Tracker()), every_s=0.01, after_s=0, out=out):
        time.sleep(0.1)
    assert "stage(s) done" in out.getvalue()


def test_reproduce_prints_the_time_left_at_the_pace_so_far():
    from experiments.reproduce import overall

    # half of the published point time done in twice the time: the rest takes twice as long
    line = overall(2, 4, elapsed=1200.0, done_expected=600.0, all_expected=1200.0)
    assert line == ("== overall: 2/4 figures, about 0h20m left (0h20m so far; 0h20m of "
                    "published point time in all)")
    assert overall(1, 4, 10.0, 0.0, float("nan")) is None  # nothing published (scale=tiny)


def test_a_figure_drawing_anothers_runs_costs_no_time():
    from experiments.reproduce import expected_seconds

    assert expected_seconds("diner/table3", "small", force=True) == 0.0
