"""Full-SkewJoin and FGSD-Join (AM-Join paper baselines) against the DuckDB oracle."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.batch import fgsd_join, full_skew_join
from joins.batch.sql_conf import sql_conf
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import get
from tests.examples import examples
from tests.frames import to_spark

ALGOS = ["full_skew_join", "fgsd_join"]
PARAMS = {"hot_threshold": 4, "max_hot_keys": 3}


def _frame(keys, col):
    return pd.DataFrame({"key": pd.array(keys, dtype="Int64"), col: range(len(keys))})


def _run(spark, name, left, right, how="inner", **ctx_kw):
    ctx_kw.setdefault("params", PARAMS)
    ctx = BatchContext(spark, executors=2, partitions=5, **ctx_kw)
    result = get(name).load()(ctx, to_spark(spark, left), to_spark(spark, right),
                              JoinSpec("key", how))
    with sql_conf(spark, result.sql_conf):
        return result, result.output.toPandas()


SCENARIOS = {
    # key 1 hot in both, key 2 hot only left, key 3 hot only right, plus cold keys and nulls
    "hot_both": (_frame([1] * 6 + [2] * 5 + [3, 4, 5, None, None], "a"),
                 _frame([1] * 5 + [2, 3, 3, 3, 3, 3, 3, 4, 6, None], "b")),
    "hot_left_only": (_frame([7] * 8 + [1, 2, 3], "a"), _frame([7, 1, 1, 2, 9], "b")),
    "hot_right_only": (_frame([7, 1, 2, None], "a"), _frame([7] * 9 + [2, 2], "b")),
    "no_hot": (_frame([1, 2, 3, 4, None], "a"), _frame([2, 3, 3, 5], "b")),
    "empty_left": (_frame([], "a"), _frame([1, 1, 2], "b")),
    "empty_right": (_frame([1, 2, 2], "a"), _frame([], "b")),
    "all_null": (_frame([None, None], "a"), _frame([None], "b")),
}


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_matches_oracle(spark, name, scenario):
    left, right = SCENARIOS[scenario]
    _, got = _run(spark, name, left, right)
    assert_same_rows(got, oracle_join(left, right, "key", "inner"))


def test_duplicate_rows(spark):
    left = pd.DataFrame({"key": pd.array([1, 1, 1, 1, 1, 2, 2], dtype="Int64"),
                         "a": [0, 0, 0, 1, 1, 5, 5]})
    right = pd.DataFrame({"key": pd.array([1, 1, 2, 2, 2, 2, 2], dtype="Int64"),
                          "b": [3, 3, 4, 4, 4, 4, 9]})
    for name in ALGOS:
        _, got = _run(spark, name, left, right)
        assert_same_rows(got, oracle_join(left, right, "key", "inner"))


@pytest.mark.parametrize("name", ALGOS)
def test_outer_joins_rejected(spark, name):
    left, right = SCENARIOS["no_hot"]
    with pytest.raises(ValueError, match="outer"):
        _run(spark, name, left, right, how="left")


# ---- Full-SkewJoin specifics ------------------------------------------------------------

def test_doubly_hot_key_goes_to_the_side_with_more_records():
    high_l, high_r = full_skew_join.assign_high_side({1: 5, 2: 3, 3: 4, 8: 9}, {1: 3, 2: 6, 3: 4})
    assert high_l == {1, 3, 8}  # 3 is a tie: left wins
    assert high_r == {2}


def test_fsj_hot_key_metrics_are_exact(spark):
    left, right = SCENARIOS["hot_both"]
    result, _ = _run(spark, "full_skew_join", left, right, record_bytes=10)
    e = result.extra
    # left hot: 1 (6 rows), 2 (5); right hot: 1 (5), 3 (6); key 1 goes left (6 > 5)
    assert (e["hot_keys_left"], e["hot_keys_right"], e["hot_keys_both"]) == (2, 2, 1)
    assert (e["high_keys_left"], e["high_keys_right"]) == (2, 1)
    assert (e["rows_high_left"], e["rows_high_right"]) == (11, 6)
    # broadcast: right rows of keys {1, 2} = 5 + 1; left rows of key 3 = 1
    assert (e["rows_dup_right"], e["rows_dup_left"]) == (6, 1)
    assert e["broadcast_bytes"] == 70


def test_fsj_max_hot_keys_caps_the_top_list(spark):
    left, right = SCENARIOS["hot_both"]
    result, got = _run(spark, "full_skew_join", left, right,
                       params={"hot_threshold": 4, "max_hot_keys": 1})
    assert result.extra["hot_keys_left"] == 1 and result.extra["hot_keys_right"] == 1
    assert_same_rows(got, oracle_join(left, right, "key", "inner"))


def test_fsj_spreads_high_side_round_robin(spark):
    left = _frame([7] * 20 + [1, 2], "a")
    right = _frame([7, 1], "b")
    result, _ = _run(spark, "full_skew_join", left, right)
    with sql_conf(spark, result.sql_conf):
        per_task = (result.output.where(F.col("l_key") == 7)
                    .groupBy(F.spark_partition_id().alias("p")).count().collect())
    counts = sorted(r["count"] for r in per_task)
    assert len(counts) == 5 and sum(counts) == 20  # all 5 partitions share the hot key
    assert counts[-1] - counts[0] <= 2  # round-robin: within one record per input partition


def test_fsj_budget(spark):
    left, right = SCENARIOS["hot_both"]  # 7 broadcast hot-key rows
    with pytest.raises(BudgetExceeded, match="broadcast hot-key records"):
        _run(spark, "full_skew_join", left, right, record_bytes=10, memory_budget_bytes=69)
    _run(spark, "full_skew_join", left, right, record_bytes=10, memory_budget_bytes=70)


# ---- FGSD-Join specifics ----------------------------------------------------------------

def test_key_ranges_never_split_a_key_and_isolate_heavy_ones():
    loads = {1: 1.0, 2: 1.0, 3: 50.0, 4: 1.0, 5: 1.0, 6: 1.0}
    bounds, range_loads = fgsd_join.key_ranges(loads, 4)  # target load 55 / 4
    assert bounds == [2, 3]  # ranges (-inf, 2], (2, 3], (3, +inf)
    assert range_loads == [2.0, 50.0, 3.0]


def test_key_ranges_at_most_count():
    bounds, range_loads = fgsd_join.key_ranges({k: float(k % 3 + 1) for k in range(40)}, 5)
    assert len(range_loads) == len(bounds) + 1 <= 5
    assert sum(range_loads) == pytest.approx(sum(k % 3 + 1 for k in range(40)))


def test_key_ranges_equal_loads():
    loads = {k: 1.0 for k in range(8)}
    bounds, range_loads = fgsd_join.key_ranges(loads, 4)
    assert bounds == [1, 3, 5] and range_loads == [2.0, 2.0, 2.0, 2.0]


def test_assign_ranges_lpt():
    assert fgsd_join.assign_ranges([10.0, 1.0, 6.0, 5.0], 2) == [0, 0, 1, 1]  # p0: 10 + 1, p1: 6 + 5


def test_key_loads_scale_sample_to_relation_sizes():
    loads = fgsd_join.key_loads([1, 1, 2, 3], [1, 3], rows_l=40, rows_r=20, output_weight=1.0)
    # est_l = count * 10, est_r = count * 10
    assert loads == {1: 20 + 10 + 200, 2: 10 + 0 + 0, 3: 10 + 10 + 100}


def test_spark_hash_long_matches_spark(spark):
    values = [0, 1, -1, 42, 2**31, -(2**40) + 3, 2**63 - 1]
    df = spark.createDataFrame([(v,) for v in values], "v long")
    got = [r["h"] for r in df.select(F.hash("v").alias("h")).collect()]
    assert got == [fgsd_join.spark_hash_long(v) for v in values]


def test_partition_surrogates_address_each_partition(spark):
    values = fgsd_join.partition_surrogates(7)
    df = spark.createDataFrame([(p, v) for p, v in enumerate(values)], "p int, v long")
    landed = df.repartition(7, "v").select("p", F.spark_partition_id().alias("pid")).collect()
    assert sorted((r["p"], r["pid"]) for r in landed) == [(p, p) for p in range(7)]


def test_fgsd_sample_is_ten_times_partitions(spark):
    left = _frame(list(range(200)) + [None] * 5, "a")
    right = _frame(list(range(0, 280, 7)), "b")  # 40 rows: fewer than 10 x 5
    result, got = _run(spark, "fgsd_join", left, right)
    assert result.extra["sample_rows"] == 50 + 40
    assert result.extra["ranges"] <= 4 * 5
    assert_same_rows(got, oracle_join(left, right, "key", "inner"))


def test_fgsd_heavy_key_joins_in_one_partition(spark):
    left = _frame([3] * 30 + list(range(10, 40)), "a")
    right = _frame([3] * 10 + list(range(10, 40)), "b")
    result, _ = _run(spark, "fgsd_join", left, right)
    with sql_conf(spark, result.sql_conf):
        parts = (result.output.where(F.col("l_key") == 3)
                 .select(F.spark_partition_id().alias("p")).distinct().count())
    assert parts == 1  # a key is never split


# ---- property-based ---------------------------------------------------------------------

_keys = st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=25)


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lk=_keys, rk=_keys, name=st.sampled_from(ALGOS), threshold=st.integers(1, 5),
       top=st.integers(0, 3))
def test_random_inputs_match_oracle(spark, lk, rk, name, threshold, top):
    left, right = _frame(lk, "a"), _frame(rk, "b")
    _, got = _run(spark, name, left, right,
                  params={"hot_threshold": threshold, "max_hot_keys": top})
    assert_same_rows(got, oracle_join(left, right, "key", "inner"))


def test_fgsd_sample_is_per_record_deterministic(spark):
    df = to_spark(spark, _frame(list(range(60)), "a"))
    first = fgsd_join.sample_keys(df, "key", 10, seed=3)
    assert sorted(fgsd_join.sample_keys(df.repartition(3), "key", 10, seed=3)) == sorted(first)
    assert sorted(fgsd_join.sample_keys(df, "key", 10, seed=4)) != sorted(first)
