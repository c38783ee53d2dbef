"""DER and DDR (Small-Large outer-join baselines of the AM-Join paper) against the oracle,
and their unjoinable-detection byte counts against hand counts and the paper's formulas (T15)."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.batch.sql_conf import sql_conf
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import get
from tests.examples import examples
from tests.frames import to_spark

ALGOS = ["der", "ddr"]

# Large relation R (left) and small relation S (right), as in the paper's Fig. 9 orientation.
LARGE = pd.DataFrame({"key": pd.array([1, 1, 2, 2, 3, None, 7, 8, 8], dtype="Int64"),
                      "a": range(9)})
SMALL = pd.DataFrame({"key": pd.array([1, 2, 4, 4, None, 9, 9, 8], dtype="Int64"),
                      "b": ["x", "y", "z", "z", "v", "u", "u", "w"]})  # duplicate rows (4, z)


def _ctx(spark, executors=3, **kw):
    kw.setdefault("record_bytes", 100)
    return BatchContext(spark, executors=executors, partitions=4, **kw)


def _run(ctx, name, left, right, how):
    spark = ctx.spark
    if isinstance(left, pd.DataFrame):
        left = to_spark(spark, left)
    if isinstance(right, pd.DataFrame):
        right = to_spark(spark, right)
    result = get(name).load()(ctx, left, right, JoinSpec("key", how))
    with sql_conf(spark, result.sql_conf):
        return result, result.output.toPandas()


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_matches_oracle_small_right(spark, name, how):
    _, got = _run(_ctx(spark), name, LARGE, SMALL, how)
    assert_same_rows(got, oracle_join(LARGE, SMALL, "key", how))


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("how", ["left", "full"])
def test_matches_oracle_small_left(spark, name, how):
    ctx = _ctx(spark, params={"small_side": "left"})
    result, got = _run(ctx, name, SMALL, LARGE, how)
    assert_same_rows(got, oracle_join(SMALL, LARGE, "key", how))
    assert result.extra["unjoinable_small_rows"] == 5  # keys 4, 4, null, 9, 9


@pytest.mark.parametrize("name", ALGOS)
def test_more_executors_than_partitions(spark, name):
    result, got = _run(_ctx(spark, executors=6), name, LARGE, SMALL, "right")
    assert result.extra["large_layout_shuffled"] == 1
    assert_same_rows(got, oracle_join(LARGE, SMALL, "key", "right"))


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("case", ["empty_large", "empty_small", "no_match", "all_null"])
def test_edge_inputs(spark, name, case):
    large, small = {
        "empty_large": (LARGE.iloc[:0], SMALL),
        "empty_small": (LARGE, SMALL.iloc[:0]),
        "no_match": (LARGE.assign(key=LARGE["key"] + 100), SMALL),
        "all_null": (LARGE.assign(key=pd.array([None] * 9, dtype="Int64")), SMALL),
    }[case]
    _, got = _run(_ctx(spark), name, large, small, "full")
    assert_same_rows(got, oracle_join(large, small, "key", "full"))


# ---- unjoinable-detection bytes (catalogue T15) -------------------------------------------

# R laid out by hand on n = 3 executors: R_0 keys {1, 2}, R_1 keys {2, 3}, R_2 keys {5, 6, null}.
R_PARTS = [[(1, 0), (1, 1), (2, 2)], [(2, 3), (3, 4), (3, 5)], [(5, 6), (None, 7), (6, 8)]]
# S: 6 records, (4, "z") twice; unjoined on R_0: 3, 4, 4, null (4); on R_1: 1, 4, 4, null (4);
# on R_2: all 6. Unjoinable: 4, 4, null (3 records). Records shipped: 4 + 4 + 6 = 14.
S_HAND = pd.DataFrame({"key": pd.array([1, 2, 3, 4, None, 4], dtype="Int64"),
                       "b": ["a", "b", "c", "z", "n", "z"]})


def _large_by_hand(spark):
    rows = [row for part in R_PARTS for row in part]
    rdd = spark.sparkContext.parallelize(rows, len(R_PARTS))  # slice i = R_PARTS[i]
    return spark.createDataFrame(rdd, "key long, a long")


def test_der_detection_bytes_by_hand(spark):
    ctx = _ctx(spark, executors=3, params={"id_bytes": 8, "small_record_bytes": 100})
    result, got = _run(ctx, "der", _large_by_hand(spark), S_HAND, "right")
    e = result.extra
    assert e["detection_id_items"] == 14
    assert e["unjoinable_small_rows"] == 3
    # (ids shipped + unjoinable ids) x m_id + |S| x m_S
    assert e["unjoinable_detection_bytes"] == (14 + 3) * 8 + 6 * 100
    # paper: (n + 1) |S| m_id + |S| m_S (small relation hashed in the second join)
    assert e["unjoinable_detection_bytes_formula"] == 4 * 6 * 8 + 6 * 100
    assert e["id_assign_seconds"] > 0
    large = pd.DataFrame({"key": pd.array([k for p in R_PARTS for k, _ in p], dtype="Int64"),
                          "a": [a for p in R_PARTS for _, a in p]})
    assert_same_rows(got, oracle_join(large, S_HAND, "key", "right"))


def test_ddr_detection_bytes_by_hand(spark):
    ctx = _ctx(spark, executors=3, params={"small_record_bytes": 100})
    result, _ = _run(ctx, "ddr", _large_by_hand(spark), S_HAND, "right")
    e = result.extra
    assert e["detection_record_items"] == 14
    assert e["unjoinable_small_rows"] == 3
    assert e["unjoinable_detection_bytes"] == 14 * 100
    assert e["unjoinable_detection_bytes_formula"] == 3 * 6 * 100  # n |S| m_S


@pytest.mark.parametrize("name", ALGOS)
def test_detection_bytes_reach_the_formula_when_nothing_joins(spark, name):
    result, _ = _run(_ctx(spark, executors=2), name, LARGE.iloc[:0], SMALL, "right")
    e = result.extra
    assert e["unjoinable_small_rows"] == len(SMALL)
    assert e["unjoinable_detection_bytes"] == e["unjoinable_detection_bytes_formula"]


@pytest.mark.parametrize("name", ALGOS)
def test_no_detection_when_small_side_not_preserved(spark, name):
    result, _ = _run(_ctx(spark), name, LARGE, SMALL, "left")
    assert result.extra["unjoinable_detection_bytes"] == 0


@pytest.mark.parametrize("name", ALGOS)
def test_budget(spark, name):
    with pytest.raises(BudgetExceeded, match="broadcast small relation"):
        _run(_ctx(spark, memory_budget_bytes=799), name, LARGE, SMALL, "right")  # 8 x 100 B


# ---- property-based ---------------------------------------------------------------------

_keys = st.lists(st.one_of(st.none(), st.integers(0, 5)), max_size=20)


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lk=_keys, sk=st.lists(st.one_of(st.none(), st.integers(0, 8)), max_size=8),
       name=st.sampled_from(ALGOS), how=st.sampled_from(["inner", "left", "right", "full"]),
       small_side=st.sampled_from(["left", "right"]), executors=st.integers(1, 5))
def test_random_inputs_match_oracle(spark, lk, sk, name, how, small_side, executors):
    large = pd.DataFrame({"key": pd.array(lk, dtype="Int64"), "a": [k or 0 for k in lk]})
    small = pd.DataFrame({"key": pd.array(sk, dtype="Int64"), "b": [str(k) for k in sk]})
    left, right = (large, small) if small_side == "right" else (small, large)
    ctx = _ctx(spark, executors=executors, params={"small_side": small_side})
    _, got = _run(ctx, name, left, right, how)
    assert_same_rows(got, oracle_join(left, right, "key", how))
