"""Spark's own joins (the paper's baselines) against the DuckDB oracle."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.batch.sql_conf import sql_conf
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import get
from tests.examples import examples
from tests.frames import to_spark
from tests.strategies import frames, keyed_rows

LEFT = pd.DataFrame({"key": [1, 1, 1, 2, 3, None, 7], "a": [10, 11, 12, 13, 14, 15, 16]})
RIGHT = pd.DataFrame({"key": [1, 1, 2, 4, None, 7, 7], "b": ["x", "y", "z", "w", "v", "u", "t"]})
BUILTINS = ["hash_join", "spark3_join", "spark_aqe_no_skew", "broadcast_join"]


def _run(spark, name: str, how: str, left=LEFT, right=RIGHT, **ctx_kw):
    algo = get(name).load()
    ctx = BatchContext(spark, executors=2, partitions=4, **ctx_kw)
    sl = to_spark(spark, left.astype({"key": "Int64"}))
    sr = to_spark(spark, right.astype({"key": "Int64"}))
    result = algo(ctx, sl, sr, JoinSpec("key", how))
    with sql_conf(spark, result.sql_conf):
        return result.output.toPandas()


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_matches_oracle(spark, name, how):
    if how not in get(name).join_types:
        pytest.skip(f"{name} does not do {how}")
    assert_same_rows(_run(spark, name, how), oracle_join(LEFT, RIGHT, "key", how))


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_empty_inputs(spark, name, how):
    if how not in get(name).join_types:
        pytest.skip(f"{name} does not do {how}")
    for left, right in ((LEFT.iloc[:0], RIGHT), (LEFT, RIGHT.iloc[:0]), (LEFT.iloc[:0], RIGHT.iloc[:0])):
        assert_same_rows(_run(spark, name, how, left, right), oracle_join(left, right, "key", how))


@settings(max_examples=examples(8), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(left=keyed_rows(), right=keyed_rows(), name=st.sampled_from(BUILTINS),
       how=st.sampled_from(["inner", "left", "right", "full"]))
def test_random_inputs_match_oracle(spark, left, right, name, how):
    assume(how in get(name).join_types)
    lf, rf = frames(left, right)
    assert_same_rows(_run(spark, name, how, lf, rf), oracle_join(lf, rf, "key", how))


# Key 1 is 60 of the left's 66 rows: its shuffle partition dwarfs the median one. Each of the 4
# map tasks writes a block of it, so Spark can split it by map blocks (it never splits a block).
HOT_LEFT = pd.DataFrame({"key": [1] * 60 + [2, 3, 4, 5, 6, 7], "a": range(66)})
HOT_RIGHT = pd.DataFrame({"key": [1, 1, 2, 3, 4, 5, 6, 8], "b": list("abcdefgh")})
SKEW_PARAMS = {"skewed_partition_factor": 2, "skewed_partition_threshold_bytes": "1b",
               "advisory_partition_bytes": "1b"}


@pytest.mark.parametrize(("name", "split"), [("spark3_join", True), ("spark_aqe_no_skew", False)])
def test_spark3_join_splits_the_skewed_partition(spark, name, split):
    """Spark marks a join whose skewed partitions it split as ``SortMergeJoin(skew=true)`` in the
    final adaptive plan; with skew handling off the same plan has none."""
    ctx = BatchContext(spark, executors=2, partitions=4, params=SKEW_PARAMS)
    left = to_spark(spark, HOT_LEFT.astype({"key": "Int64"})).repartition(4)
    right = to_spark(spark, HOT_RIGHT.astype({"key": "Int64"})).repartition(4)
    result = get(name).load()(ctx, left, right, JoinSpec("key", "inner"))
    with sql_conf(spark, result.sql_conf):
        out = result.output.toPandas()
    plan = result.output._jdf.queryExecution().executedPlan().toString()
    assert "isFinalPlan=true" in plan
    assert ("SortMergeJoin(skew=true)" in plan) == split, plan
    assert_same_rows(out, oracle_join(HOT_LEFT, HOT_RIGHT, "key", "inner"))


def test_broadcast_fails_over_budget(spark):
    with pytest.raises(BudgetExceeded):
        _run(spark, "broadcast_join", "inner", memory_budget_bytes=100, record_bytes=100)


def test_sql_conf_does_not_leak(spark):
    before = spark.conf.get("spark.sql.adaptive.enabled")
    _run(spark, "hash_join", "inner")
    assert spark.conf.get("spark.sql.adaptive.enabled") == before
