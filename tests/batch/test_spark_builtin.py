"""Spark's own joins (the paper's baselines) against the DuckDB oracle."""

from __future__ import annotations

import pandas as pd
import pytest

from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.batch.sql_conf import sql_conf
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import get
from tests.frames import to_spark

LEFT = pd.DataFrame({"key": [1, 1, 1, 2, 3, None, 7], "a": [10, 11, 12, 13, 14, 15, 16]})
RIGHT = pd.DataFrame({"key": [1, 1, 2, 4, None, 7, 7], "b": ["x", "y", "z", "w", "v", "u", "t"]})


def _run(spark, name: str, how: str, left=LEFT, right=RIGHT, **ctx_kw):
    algo = get(name).load()
    ctx = BatchContext(spark, executors=2, partitions=4, **ctx_kw)
    sl = to_spark(spark, left.astype({"key": "Int64"}))
    sr = to_spark(spark, right.astype({"key": "Int64"}))
    result = algo(ctx, sl, sr, JoinSpec("key", how))
    with sql_conf(spark, result.sql_conf):
        return result.output.toPandas()


@pytest.mark.parametrize("name", ["hash_join", "spark3_join", "spark_aqe_no_skew", "broadcast_join"])
@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_matches_oracle(spark, name, how):
    if how not in get(name).join_types:
        pytest.skip(f"{name} does not do {how}")
    assert_same_rows(_run(spark, name, how), oracle_join(LEFT, RIGHT, "key", how))


def test_empty_inputs(spark):
    empty = LEFT.iloc[:0]
    assert len(_run(spark, "hash_join", "inner", left=empty)) == 0
    assert_same_rows(_run(spark, "hash_join", "right", left=empty),
                     oracle_join(empty, RIGHT, "key", "right"))


def test_broadcast_fails_over_budget(spark):
    with pytest.raises(BudgetExceeded):
        _run(spark, "broadcast_join", "inner", memory_budget_bytes=100, record_bytes=100)


def test_sql_conf_does_not_leak(spark):
    before = spark.conf.get("spark.sql.adaptive.enabled")
    _run(spark, "hash_join", "inner")
    assert spark.conf.get("spark.sql.adaptive.enabled") == before
