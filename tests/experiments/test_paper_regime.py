"""The paper's regime of a batch point: the rule's factors and the regime's modeled time."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.paper_regime import (
    expected_output,
    factors,
    grown_params,
    paper_factors,
    regime_metrics,
)
from runtime.cost_model import BatchCosts, scaled_counts


def _tasks() -> pd.DataFrame:
    return pd.DataFrame({
        "stage_id": [0, 0, 1, 1, 1], "stage_attempt": 0, "task_index": [0, 1, 0, 1, 2],
        "records_in": [1, 1, 2, 0, 0], "rows_produced": [0, 0, 1, 1, 3],
        "shuffle_read_bytes": [0, 0, 1, 0, 0], "shuffle_write_bytes": [1, 0, 0, 0, 0],
    })


def test_scaled_counts_multiply_records_and_shuffle_by_f_in_and_rows_by_f_out():
    t = scaled_counts(_tasks(), 2.0, 3.0)
    assert t.records_in.tolist() == [2, 2, 4, 0, 0]
    assert t.shuffle_read_bytes.tolist() == [0, 0, 2, 0, 0]
    assert t.shuffle_write_bytes.tolist() == [2, 0, 0, 0, 0]
    assert t.rows_produced.tolist() == [0, 0, 3, 3, 9]
    assert len(t) == 5  # the tasks stay


def test_regime_time_and_shares_by_hand():
    costs = BatchCosts(per_task=1.0, per_record_in=1.0, per_row_produced=1.0,
                       per_shuffle_byte=1.0)
    m = {k: v for k, (v, _) in regime_metrics(_tasks(), 2, costs, "list", 2.0, 3.0).items()}
    # as run: stage 0 tasks 3 | 2 -> 3; stage 1 tasks 5, 2, 4 on 2 slots -> 5 | 2 + 4 = 6
    # constants: one wave (1) + two waves (2) = 3 of 3 + 6
    assert m["per_task_share"] == pytest.approx(3 / 9)
    # the rule, records x2, rows x3: stage 0 tasks 1+2+2 = 5 | 1+2 = 3 -> 5; stage 1:
    # 1+4+3+2 = 10, 1+3 = 4, 1+9 = 10 after the 4 -> 14; constants 3 of 5 + 14
    assert m["modeled_time_regime"] == pytest.approx(19.0)
    assert m["per_task_share_regime"] == pytest.approx(3 / 19)
    # rows x2 too: stage 1: 1+4+2+2 = 9, 1+2 = 3, 1+6 = 7 after the 3 -> 10; + 5
    assert m["modeled_time_regime_records"] == pytest.approx(15.0)
    assert (m["regime_records_factor"], m["regime_output_factor"]) == (2.0, 3.0)


def test_expected_output_of_the_generators():
    # dpair at alpha 0: N_z^2 / K + 2 N_z N_u / U + N_u^2 / U
    p = {"alpha": 0.0, "rows": 100, "keys": 10, "uniform_rows": 1000, "uniform_range": 2000}
    assert expected_output("dpair", p) == pytest.approx(100**2 / 10 + 2 * 100 * 1000 / 2000
                                                        + 1000**2 / 2000)
    # all Zipf mass on one key: alpha large
    one = {**p, "alpha": 60.0, "uniform_rows": 0}
    assert expected_output("dpair", one) == pytest.approx(100**2)
    assert expected_output("smalllarge", {"small_rows": 10, "large_rows": 400,
                                          "key_range": 20}) == pytest.approx(100.0)


def test_factors_per_partition_and_an_x_that_is_a_size():
    run = {"large_rows": 1_000_000, "small_rows": 1000, "key_range": 10_000}
    paper = grown_params("smalllarge", run, {"large_rows": 100_000_000, "key_range": 100_000})
    assert paper["small_rows"] == pytest.approx(100_000)  # x grows as the large relation
    f_in, f_out = factors("smalllarge", run, paper, 64, 1000)
    assert f_in == pytest.approx(100 * 0.064)
    assert f_out == pytest.approx(100 * 100 / 10 * 0.064)


def test_paper_factors_of_an_amjoin_figure():
    sizes = {"small": {"rows": 100_000, "keys": 10_000, "uniform_rows": 1_000_000,
                       "uniform_range": 2_147_000},
             "paper": {"rows": 10_000_000, "keys": 100_000, "uniform_rows": 1_000_000_000,
                       "uniform_range": 2_147_483_647}}
    figure = {"workload": {"sizes": sizes}, "run": {"executors": {"small": 64, "paper": 1000}}}
    params = {"alpha": 0.65, "size": 100, **sizes["small"]}
    f_in, f_out = paper_factors(figure, "small", "dpair", params)
    assert f_in == pytest.approx(1.01e9 / 1.1e6 * 64 / 1000)  # 58.8: 337K vs 5.7K per task
    assert f_out > f_in  # hot keys' pairs grow as the square of their records
    assert paper_factors({"workload": {"sizes": {"small": {}}}}, "small", "dpair", params) is None
    assert paper_factors(figure, "small", "tpch", params) is None


def test_stages_regime_table_sums_to_the_points_regime_time():
    """``python -m experiments.stages ... regime=true`` prints the stages whose makespans make
    the point's modeled_time_regime; a figure without a regime prints none."""
    from types import SimpleNamespace

    from experiments.stages import regime_table

    costs = BatchCosts(per_task=1.0, per_record_in=1.0, per_row_produced=1.0,
                       per_shuffle_byte=1.0)
    metrics = {"executors": (2, "executors"), **regime_metrics(_tasks(), 2, costs, "list", 2.0, 3.0)}
    outcome = SimpleNamespace(tasks=_tasks(), metrics=metrics)
    table = regime_table({"run": {}}, outcome, SimpleNamespace(batch=costs))
    assert table.modeled_s.sum() == pytest.approx(19.0)
    assert table.constants_s.sum() == pytest.approx(3.0)
    plain = SimpleNamespace(tasks=_tasks(), metrics={"executors": (2, "executors")})
    assert regime_table({"run": {}}, plain, SimpleNamespace(batch=costs)) is None


def test_bench_time_goals_read_the_metric_they_are_given():
    from benchmarks.bench_amjoin import time_checks

    def point(small: float, regime: float) -> dict:
        return {"modeled_time": small, "modeled_time_regime": regime}

    measured = {"0.0": {"am_join": point(2, 1), "hash_join": point(1, 1)},
                "0.3": {"am_join": point(1, 1), "hash_join": point(1, 2)},
                "0.65": {"am_join": point(1, 1), "hash_join": point(2, 4)},
                "1.0": {"am_join": point(1, 2), "hash_join": point(1, 1),
                        "spark3_join": point(20, 30), "spark3_join_split": point(2, 2)}}
    small = time_checks(measured, "modeled_time")
    regime = time_checks(measured, "modeled_time_regime")
    assert small["alpha0_am_over_hash"][0] == 2.0 and regime["alpha0_am_over_hash"][0] == 1.0
    assert regime["alpha0.65_am_over_hash"][0] == 0.25
    assert (small["alpha1_spark3_over_am"][0], regime["alpha1_spark3_over_am"][0]) == (20, 15)
    assert regime["alpha1_spark3_split_over_am"] == (1.0, 1.25, ">=")
