"""Keys as users write them (``on=a,b``, ``on=left_col=right_col``): every batch algorithm is
exact against DuckDB, with a hot composite key on both sides, nulls in either key column, and
duplicates; a null in any key column matches nothing (as in SQL)."""

from __future__ import annotations

import pandas as pd
import pytest

from joins.api import BatchContext
from joins.batch.sql_conf import sql_conf
from joins.keys import KeySpec, KeySpecError, parse_on, run_on_keys
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import ALGORITHMS, get
from tests.frames import to_spark

BATCH = sorted(n for n, a in ALGORITHMS.items() if a.kind == "batch")
PARAMS = {"hot_threshold": 4, "max_hot_keys": 3}


def test_parse_on():
    assert parse_on("key") == KeySpec(("key",), ("key",)) and parse_on("key").simple
    assert parse_on("a, b") == KeySpec(("a", "b"), ("a", "b"))
    assert parse_on("x=y,a=b") == KeySpec(("x", "a"), ("y", "b"))
    assert not parse_on("x=y").simple
    for bad in ("", "a,,b", "a=b=c", "a,a", "=b"):
        with pytest.raises(KeySpecError):
            parse_on(bad)


def _inputs():
    # (1, 1) hot on both sides, (2, null) and (null, 1) never match, duplicate rows
    left = pd.DataFrame({"a": pd.array([1] * 6 + [2, 2, None, 3, 3], dtype="Int64"),
                         "b": pd.array([1] * 6 + [None, 5, 1, 7, 7], dtype="Int64"),
                         "v": [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8]})
    right = pd.DataFrame({"x": pd.array([1] * 5 + [2, None, 3, 4], dtype="Int64"),
                          "y": pd.array([1] * 5 + [None, 1, 7, 4], dtype="Int64"),
                          "w": [9, 9, 1, 2, 3, 4, 5, 6, 7]})
    return left, right


@pytest.mark.spark
@pytest.mark.parametrize("how", ["inner", "full"])
@pytest.mark.parametrize("name", BATCH)
def test_every_algorithm_on_a_two_column_key_with_other_names(spark, name, how):
    algo = get(name)
    if how not in algo.join_types:
        how = "inner"
    left, right = _inputs()
    ctx = BatchContext(spark, executors=2, partitions=5, params=PARAMS)
    result = run_on_keys(algo.load(), ctx, to_spark(spark, left), to_spark(spark, right),
                         "a=x,b=y", how)
    with sql_conf(spark, result.sql_conf):
        got = result.output.toPandas()
    assert sorted(got.columns) == ["l_a", "l_b", "l_v", "r_w", "r_x", "r_y"]
    assert_same_rows(got, oracle_join(left, right, "a=x,b=y", how))


@pytest.mark.spark
def test_negative_zero_matches_zero_in_a_composite_key(spark):
    """SQL equality holds -0.0 = 0.0; the composite key's text must too."""
    left = pd.DataFrame({"a": [0.0, -0.0, 1.5], "b": ["x", "x", "y"]})
    right = pd.DataFrame({"a": [-0.0, 1.5], "b": ["x", "y"]})
    ctx = BatchContext(spark, executors=2, partitions=3)
    result = run_on_keys(get("hash_join").load(), ctx, to_spark(spark, left),
                         to_spark(spark, right), "a,b", "inner")
    got = result.output.toPandas()
    assert len(got) == 3
    assert_same_rows(got, oracle_join(left, right, "a,b", "inner"))
