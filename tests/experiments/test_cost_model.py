"""Modeled makespan: list scheduling onto E slots, summed over stages; counts from Spark."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from runtime.cost_model import (
    BatchCosts,
    executor_imbalance,
    list_schedule,
    lpt_schedule,
    modeled_makespan,
    stage_table,
)
from runtime.spark_metrics import TaskMetricsCapture, union_parts


def test_list_schedule():
    assert list_schedule(np.array([]), 4) == 0.0
    assert list_schedule(np.array([3.0, 1, 1, 1]), 1) == 6.0
    assert list_schedule(np.array([3.0, 1, 1, 1]), 2) == 3.0
    assert list_schedule(np.array([1.0, 1, 1, 3]), 2) == 4.0  # the straggler launches last
    assert lpt_schedule(np.array([1.0, 1, 1, 3]), 2) == 3.0
    assert list_schedule(np.array([2.0, 2]), 100) == 2.0


def test_makespan_sums_stages_and_sees_the_straggler():
    costs = BatchCosts(per_task=0.0, per_record_in=1.0, per_row_produced=0.0, per_shuffle_byte=0.0)
    tasks = pd.DataFrame({
        "stage_id": [0, 0, 1, 1, 1, 1], "stage_attempt": 0, "task_index": [0, 1, 0, 1, 2, 3],
        "records_in": [5, 5, 1, 1, 1, 9], "rows_produced": 0,
        "shuffle_read_bytes": 0, "shuffle_write_bytes": 0,
    })
    assert modeled_makespan(tasks, 2, costs) == 5 + 10
    assert modeled_makespan(tasks, 64, costs) == 5 + 9


def test_executor_imbalance_of_the_costliest_stage():
    costs = BatchCosts(per_task=0.0, per_record_in=1.0, per_row_produced=0.0, per_shuffle_byte=0.0)

    def stage(records: list[int], stage_id: int = 0) -> pd.DataFrame:
        return pd.DataFrame({"stage_id": stage_id, "stage_attempt": 0,
                             "task_index": range(len(records)), "records_in": records,
                             "rows_produced": 0, "shuffle_read_bytes": 0, "shuffle_write_bytes": 0})

    # a big task and many small ones: task max/mean is 3.5 but the two slots are equally busy
    mixed = stage([6, 1, 1, 1, 1, 1, 1])
    loads = mixed["records_in"]
    assert loads.max() / loads.mean() > 3
    assert executor_imbalance(stage_table(mixed, 2, costs)) == 1.0
    # one hot task: the other slot idles; and the costliest stage is the one judged
    hot = pd.concat([stage([1, 1], 0), stage([9, 1], 1)])
    assert executor_imbalance(stage_table(hot, 2, costs)) == 9 / 5
    assert executor_imbalance(stage_table(stage([4]), 4, costs)) == 4.0  # three executors idle


@pytest.mark.spark
def test_capture_counts_exact_records(spark):
    from pyspark.sql import functions as F

    df = spark.range(10_000, numPartitions=4).select((F.col("id") % 10).alias("k"))
    with TaskMetricsCapture(spark) as cap:
        groups = df.repartition(4, "k").groupBy("k").count().collect()
    assert len(groups) == 10
    tasks = cap.result.tasks
    assert tasks.input_records.sum() == 10_000
    assert tasks.shuffle_write_records.sum() >= 10_000 > 0
    summary = cap.result.summary()
    assert summary["spark_jobs"] >= 1 and summary["shuffle_read_bytes"] > 0
    assert summary["task_imbalance"] >= 1.0


def test_union_parts_flatten_nested_unions():
    def rdd(i, name, n, parents):
        return {"RDD ID": i, "Name": name, "Number of Partitions": n, "Parent IDs": parents}

    info = [rdd(9, "MapPartitionsRDD", 12, [8]), rdd(8, "UnionRDD", 12, [5, 7]),
            rdd(7, "MapPartitionsRDD", 4, [6]), rdd(6, "ShuffledRowRDD", 4, [1]),
            rdd(5, "UnionRDD", 8, [3, 4]), rdd(4, "ZippedPartitionsRDD2", 2, [2, 3]),
            rdd(3, "ShuffledRowRDD", 6, [0])]
    assert union_parts(info, 12) == [6, 2, 4]
    assert union_parts(info[-1:], 6) == [6]  # no union: one part
    assert union_parts([], 5) == [5]


@pytest.mark.spark
def test_union_stage_is_judged_per_part(spark):
    heavy = spark.range(10_000, numPartitions=2).repartition(2, "id")
    tiny = spark.range(6, numPartitions=2).repartition(6, "id")
    with TaskMetricsCapture(spark) as cap:
        assert heavy.union(tiny).count() == 10_006
    summary = cap.result.summary()
    assert summary["stage_union_parts"] == 2
    # the two heavy tasks dwarf the six tiny ones, but split 10,000 ids between them evenly
    assert summary["task_imbalance"] > 3
    assert summary["largest_part_task_imbalance"] < 1.2


@pytest.mark.spark
def test_uncounted_jobs_are_left_out(spark):
    from joins.api import uncounted

    df = spark.range(1000, numPartitions=2)
    with TaskMetricsCapture(spark) as cap:
        with uncounted(spark, "preparation"):
            df.count()
        df.selectExpr("id * 2").count()
    counted = cap.result.tasks
    assert counted.input_records.sum() == 1000  # only the second job's scan
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def test_calibrate_rejects_unknown_parts(capsys):
    from experiments.calibrate import main

    assert main(["parts=everything"]) == 2  # before any Spark session starts
    assert "parts must be all, batch, online, spill or percount" in capsys.readouterr().err


def test_calibrate_runs_on_a_named_spark_preset_and_rejects_unknown_ones(capsys, monkeypatch):
    import experiments.calibrate as calibrate
    from experiments.calibrate import main

    class Started(Exception):
        pass

    def started(**kw):
        raise Started(kw["master"])

    monkeypatch.setattr(calibrate, "get_spark", started)
    with pytest.raises(Started, match=r"local-cluster\["):
        main(["spark=local_cluster", "parts=batch", "out=/nonexistent/never.json"])
    assert main(["spark=yarnn"]) == 2  # before any Spark session starts
    err = capsys.readouterr().err
    assert "unknown Spark preset 'yarnn'" in err and "local_cluster" in err


def test_calibrate_on_a_cluster_preset_needs_its_master_url(capsys, monkeypatch):
    from experiments.calibrate import main

    monkeypatch.delenv("SPARK_MASTER_URL", raising=False)
    assert main(["spark=standalone"]) == 2
    assert "SPARK_MASTER_URL" in capsys.readouterr().err


def test_r_squared():
    from runtime.cost_model import r_squared

    assert r_squared([1, 2, 3], [1, 2, 3]) == 1.0
    assert r_squared([1, 2, 3], [2, 2, 2]) == 0.0  # no better than the mean
    assert r_squared([5, 5], [4, 6]) == 1.0  # nothing to explain


def test_online_disk_costs_come_from_the_measured_spill_store_unless_a_factor_is_set():
    from types import SimpleNamespace

    from joins.calibrated import cost_model

    online = {"per_received": 1e-7, "per_probe": 2e-7, "per_spilled": 4e-6,
              "per_disk_probe": 3e-6, "spill_store": "sqlite"}
    cal = SimpleNamespace(id="x", online=online)
    measured = cost_model(cal, {"disk_cost_factor": None})
    assert (measured.per_spilled, measured.per_disk_probe) == (4e-6, 3e-6)
    assumed = cost_model(cal, {"disk_cost_factor": 10})
    assert assumed.per_spilled == pytest.approx(3e-6) and assumed.per_disk_probe == pytest.approx(3e-6)
    old = SimpleNamespace(id="old", online={k: v for k, v in online.items() if k != "spill_store"})
    with pytest.raises(ValueError, match="parts=spill"):
        cost_model(old, {})
    assert cost_model(old, {"disk_cost_factor": 100}).per_disk_probe == pytest.approx(3e-5)


def test_stage_table_counts_each_stage_and_its_makespans_sum_to_the_modeled_time():
    costs = BatchCosts(per_task=0.5, per_record_in=1.0, per_row_produced=0.0, per_shuffle_byte=0.0)
    tasks = pd.DataFrame({
        "stage_id": [3, 3, 7, 7, 7], "stage_attempt": 0, "task_index": [1, 0, 0, 1, 2],
        "records_in": [4, 2, 1, 1, 8], "rows_produced": [1, 1, 0, 0, 5],
        "shuffle_read_bytes": [10, 0, 0, 0, 0], "shuffle_write_bytes": [0, 0, 0, 0, 3],
    })
    table = stage_table(tasks, 2, costs)
    assert table.stage_id.tolist() == [3, 7] and table.tasks.tolist() == [2, 3]
    assert table.records_in.tolist() == [6, 10] and table.rows_produced.tolist() == [2, 5]
    assert table.shuffle_bytes.tolist() == [10, 3]
    assert table.max_task_s.tolist() == [4.5, 8.5]
    # stage 7 on 2 slots, in index order: 1.5 | 1.5, then 8.5 after the first -> 10
    assert table.modeled_s.tolist() == [4.5, 10.0]
    assert table.constants_s.tolist() == [0.5, 1.0]  # one wave, then two waves of 0.5
    # busy slots: 2.5 | 4.5, then 10 | 1.5; the costlier stage (7) is the one judged
    assert table.busy_s.tolist() == [7.0, 11.5]
    assert table.slot_imbalance.tolist() == pytest.approx([4.5 / 3.5, 10 / 5.75])
    assert executor_imbalance(table) == pytest.approx(10 / 5.75)
    assert table.modeled_s.sum() == modeled_makespan(tasks, 2, costs)
    assert stage_table(tasks.iloc[:0], 2, costs).empty


@pytest.mark.parametrize("args, message", [
    (["figure=amjoin/fig9"], "usage"),
    (["figure=amjoin/nofig", "series=der", "x=1000"], "unknown figure"),
    (["figure=amjoin/fig9", "series=nope", "x=1000"], "unknown series"),
    (["figure=amjoin/fig9", "series=der", "x=3"], "not an x value"),
    (["figure=amjoin/fig9", "series=der", "x=1000", "scale=huge"], "scale"),
    (["figure=squall/table2", "series=eq5_shj", "x=0"], "batch_join figures"),
])
def test_stages_cli_rejects_bad_input_before_spark(args, message, capsys):
    from experiments.stages import main

    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_weak_batches_scale_the_micro_batch_with_the_weak_factor():
    from experiments.kinds.online_join import weak_batch_size

    run = {"batch_size": 15000}
    assert weak_batch_size(run, 4.0) == 15000
    assert weak_batch_size({**run, "weak_batches": True}, 4.0) == 60000
    assert weak_batch_size({**run, "weak_batches": True}, 1.0) == 15000


def test_micro_batch_rule_divides_the_stream_and_scales_for_sensitivity():
    from experiments.kinds.online_join import stream_batch_size

    assert stream_batch_size({"micro_batches": 20}, 100_001) == 5001  # 20 batches, rounded up
    assert stream_batch_size({"micro_batches": 20, "batch_scale": 0.5}, 100_000) == 2500
    assert stream_batch_size({"micro_batches": 20, "batch_scale": 2}, 100_000) == 10000
    assert stream_batch_size({"batch_size": 700, "micro_batches": 20}, 100_000) == 700
    assert stream_batch_size({}, 0) == 1


def test_intensity_band_is_the_smallest_band_with_the_results_per_input(tmp_path):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from experiments.kinds.online_join import band_outputs, intensity_band

    r, s = np.array([10, 20, 30]), np.arange(0, 100)
    for name, keys in (("R", r), ("S", s)):
        (tmp_path / f"{name}.parquet").mkdir()
        pq.write_table(pa.table({"key": keys}), tmp_path / f"{name}.parquet" / "part-0.parquet")
    assert band_outputs(r, s, 1) == 9
    # 103 inputs: 0.5 per input needs >= 51.5 results, i.e. 3 x (2b + 1) >= 51.5: b = 9
    assert intensity_band(tmp_path, 1, 0.5) == 9
    assert band_outputs(r, s, 8) < 51.5 <= band_outputs(r, s, 9)
    assert intensity_band(tmp_path, 1, 0.05) == 1  # band 1 already has 9 >= 5.15
    assert intensity_band(tmp_path, 1, 1e6) == 99  # unreachable: every pair
