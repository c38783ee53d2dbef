"""The paper's regime by each stage's measured growth (experiments.regime_fit): the line to the
paper's sizes, the affine fit per stage, the tasks carrying it, and a plan mismatch refused."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.regime_fit import (
    PlanMismatch,
    extrapolated_tasks,
    fit_table,
    fitted_counts,
    path_sizes,
    t_at,
)
from runtime.cost_model import BatchCosts

UNIT = BatchCosts(per_task=1.0, per_record_in=1.0, per_row_produced=1.0, per_shuffle_byte=1.0)


def _tasks(scale: float = 1.0, extra: float = 0.0) -> pd.DataFrame:
    """Two stages (2 and 3 tasks); every count times ``scale``, stage 0's records in plus
    ``extra`` per task (an intercept that keeps each task's share)."""
    return pd.DataFrame({
        "stage_id": [0, 0, 1, 1, 1], "stage_attempt": 0, "task_index": [0, 1, 0, 1, 2],
        "records_in": [v * scale + e for v, e in zip((1, 1, 2, 0, 0), (extra,) * 2 + (0,) * 3,
                                                      strict=True)],
        "rows_produced": [v * scale for v in (0, 0, 1, 1, 2)],
        "shuffle_read_bytes": [0, 0, 2 * scale, 0, 0],
        "shuffle_write_bytes": [2 * scale, 0, 0, 0, 0],
    })


def _table(records, rows, shuffle, tasks) -> pd.DataFrame:
    return pd.DataFrame({"records_in": records, "rows_produced": rows, "shuffle_bytes": shuffle,
                         "tasks": tasks})


def test_the_line_reaches_the_papers_sizes_and_its_records_are_affine_in_t():
    run = {"large_rows": 1_000_000, "small_rows": 10_000, "key_range": 10_000}
    paper = {"large_rows": 100_000_000, "small_rows": 1_000_000, "key_range": 100_000}
    assert path_sizes("smalllarge", run, paper, 0.0) == run
    assert path_sizes("smalllarge", run, paper, 1.0) == paper
    t = t_at("smalllarge", run, paper, 2.0)
    assert t == pytest.approx(1 / 99)  # both relations grow 100x: 2x the records is 1/99
    two = path_sizes("smalllarge", run, paper, t)
    assert (two["large_rows"], two["small_rows"]) == (2_000_000, 20_000)
    assert two["key_range"] == 10_909  # the key range moves toward its own paper value


def test_each_stage_count_is_affine_through_the_two_runs():
    run = _table([10, 4], [0, 100], [5, 0], [2, 3])
    larger = _table([20, 4], [0, 160], [5, 2], [2, 3])  # at t = 0.5
    got = fitted_counts(run, larger, 0.5, 2.0)
    assert got.records_in.tolist() == [50, 4]  # 10 + 20 t
    assert got.rows_produced.tolist() == [0, 340]  # 100 + 120 t
    assert got.shuffle_bytes.tolist() == [5, 8]  # a count the run lacked: 0 + 4 t
    shrinking = _table([10, 4], [0, 100], [5, 0], [2, 3])
    assert fitted_counts(run, shrinking.assign(records_in=[2, 4]), 0.5, 2.0).records_in[0] == 0


def test_plans_of_another_shape_are_refused():
    run = _table([10, 4], [0, 100], [5, 0], [2, 3])
    with pytest.raises(PlanMismatch, match="does not apply"):
        fitted_counts(run, _table([10, 4], [0, 100], [5, 0], [2, 4]), 0.5, 1.0)
    with pytest.raises(PlanMismatch):
        fitted_counts(run, _table([10], [0], [5], [2]), 0.5, 1.0)
    with pytest.raises(PlanMismatch):
        fit_table(_tasks(), _tasks().iloc[:4], 2, UNIT, "list", 0.5, 1.0)


def test_tasks_keep_their_share_of_the_stage_and_the_per_partition_factor():
    target = _table([8.0, 4.0], [0.0, 8.0], [4.0, 6.0], [2, 3])
    got = extrapolated_tasks(_tasks(), target, per_partition=0.5)
    assert len(got) == 5  # the tasks as run
    assert got.records_in.tolist() == [2, 2, 2, 0, 0]  # stage 0: 8 x 0.5 in shares 1:1
    assert got.rows_produced.tolist() == [0, 0, 1, 1, 2]  # stage 1: 8 x 0.5 in shares 1:1:2
    assert (got.shuffle_read_bytes + got.shuffle_write_bytes).tolist() == [2, 0, 3, 0, 0]
    # a count a stage did not have as run is spread evenly over its tasks
    lacking = _table([8.0, 4.0], [6.0, 8.0], [4.0, 6.0], [2, 3])
    assert extrapolated_tasks(_tasks(), lacking, 1.0).rows_produced.tolist()[:2] == [3, 3]


def test_a_workload_that_grows_affinely_is_extrapolated_exactly():
    """Counts a + b t per task: the fit through t = 0 and t = 0.25 gives t = 1's real run."""
    base, quarter, full = _tasks(1.0, 3.0), _tasks(2.0, 4.0), _tasks(5.0, 7.0)
    got = fit_table(base, quarter, 2, UNIT, "list", 0.25, 1.0)
    from runtime.cost_model import stage_table

    real = stage_table(full, 2, UNIT, "list")
    for c in ("records_in", "rows_produced", "shuffle_bytes", "modeled_s", "constants_s"):
        assert got[c].tolist() == pytest.approx(real[c].tolist())
