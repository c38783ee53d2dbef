"""Shared by the tests of ticks that share a step (issue 36): a run whose policy's quiet ticks
share steps against the same run at one tick per step."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from joins.oracle import assert_same_rows

# per-tick columns that are this machine's time or the step's number, not counts
LOCAL_TIME = ("step", "batch_wall_seconds", "seconds", "cpu_seconds")


def assert_steps_change_nothing(run: Callable[[], object], monkeypatch) -> tuple:
    """Run ``run()`` as the engine plans it, then with one tick per step (a static policy's
    grouping only): the same decisions, output and rows per tick, in fewer steps."""
    from joins.online.engine import Engine

    grouped = run()
    monkeypatch.setattr(Engine, "_shares_step", lambda self, *_: self._static())
    alone = run()
    pd.testing.assert_frame_equal(grouped.decisions, alone.decisions)
    assert_same_rows(grouped.output, alone.output)
    cols = [c for c in alone.metrics.columns if c not in LOCAL_TIME]
    key = ["batch", "worker"]
    pd.testing.assert_frame_equal(
        grouped.metrics[cols].sort_values(key).reset_index(drop=True),
        alone.metrics[cols].sort_values(key).reset_index(drop=True))
    assert grouped.metrics["step"].nunique() < alone.metrics["step"].nunique()
    return grouped, alone
