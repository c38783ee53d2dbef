"""The Index-Broadcast-Join family (inner, left-outer, right-outer, IB-FO) against the oracle."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.batch import amjoin_common
from joins.batch.sql_conf import sql_conf
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import get
from tests.examples import examples
from tests.frames import to_spark
from tests.strategies import frames, keyed_rows

# large relation: keys 1..6 (key 1 hot) and nulls; small relation: keys 1, 2 joinable,
# 8, 9 unjoinable, a null key, duplicate rows
LARGE = pd.DataFrame({"key": [1] * 8 + [2, 2, 3, 4, 5, 6, None], "a": range(15)})
SMALL = pd.DataFrame({"key": [1, 1, 2, 8, 8, 9, None], "b": ["x", "x", "y", "z", "w", "v", "n"]})


def run(spark, left: pd.DataFrame, right: pd.DataFrame, how: str, key_type: str | None = "Int64",
        **ctx_kw):
    ctx = BatchContext(spark, executors=3, partitions=4, **ctx_kw)
    if key_type is not None:
        left, right = left.astype({"key": key_type}), right.astype({"key": key_type})
    sl, sr = to_spark(spark, left), to_spark(spark, right)
    result = get("ib_join").load()(ctx, sl, sr, JoinSpec("key", how))
    with sql_conf(spark, result.sql_conf):
        out = result.output.toPandas()
    amjoin_common.release_all()
    return out, result.extra


@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_matches_oracle(spark, how):
    out, extra = run(spark, LARGE, SMALL, how)
    assert_same_rows(out, oracle_join(LARGE, SMALL, "key", how))
    # the broadcast index: 4 non-null keys, 6 records
    assert (extra["index_keys"], extra["index_records"]) == (4, 6)
    if how in ("right", "full"):
        # keys 1, 2 joinable, 8, 9 not; a tie ships the unjoinable set (2 keys)
        assert (extra["keys_joined"], extra["keys_unjoinable"], extra["keys_shipped"]) == (2, 2, 2)
        assert extra["unjoinable_detection_bytes"] == 8 * 3 * (2 + 2)  # m_b x n x (collected + shipped)


def test_ships_the_smaller_key_set(spark):
    # optimization 1: one joinable key against three unjoinable ones -> ship the joinable one
    small = pd.DataFrame({"key": [1, 7, 8, 9], "b": ["a", "b", "c", "d"]})
    out, extra = run(spark, LARGE, small, "right")
    assert_same_rows(out, oracle_join(LARGE, small, "key", "right"))
    assert (extra["keys_joined"], extra["keys_unjoinable"], extra["keys_shipped"]) == (1, 3, 1)


@pytest.mark.parametrize("how", ["right", "full"])
def test_key_sets_beyond_the_literal_limit_go_by_broadcast_join(spark, monkeypatch, how):
    from joins.batch import ib_join

    monkeypatch.setattr(ib_join, "LITERAL_KEYS_MAX", 0)  # every key set by broadcast join
    out, extra = run(spark, LARGE, SMALL, how)
    assert_same_rows(out, oracle_join(LARGE, SMALL, "key", how))
    assert (extra["keys_joined"], extra["keys_unjoinable"], extra["keys_shipped"]) == (2, 2, 2)


def test_string_keys_right_outer(spark):
    large = pd.DataFrame({"key": ["a", "a", "b", None], "x": range(4)})
    small = pd.DataFrame({"key": ["a", "c", "c", None], "y": range(4)})
    out, extra = run(spark, large, small, "right", key_type=None)
    assert_same_rows(out, oracle_join(large, small, "key", "right"))
    assert (extra["keys_joined"], extra["keys_unjoinable"]) == (1, 1)


def test_empty_sides(spark):
    out, _ = run(spark, LARGE, SMALL.iloc[:0], "full")
    assert_same_rows(out, oracle_join(LARGE, SMALL.iloc[:0], "key", "full"))
    out, _ = run(spark, LARGE.iloc[:0], SMALL, "right")
    assert_same_rows(out, oracle_join(LARGE.iloc[:0], SMALL, "key", "right"))


def test_broadcast_index_must_fit(spark):
    with pytest.raises(BudgetExceeded, match="broadcast index"):
        run(spark, LARGE, SMALL, "inner", memory_budget_bytes=50, record_bytes=10)
    out, extra = run(spark, LARGE, SMALL, "inner", memory_budget_bytes=200, record_bytes=10)
    assert extra["broadcast_bytes"] == 6 * 10 + 4 * 8  # records x m_S + keys x m_b


rows = keyed_rows(max_key=5, max_size=20)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(left=rows, right=rows, how=st.sampled_from(["inner", "left", "right", "full"]))
def test_random_inputs_match_oracle(spark, left, right, how):
    lf, rf = frames(left, right)
    out, _ = run(spark, lf, rf, how)
    assert_same_rows(out, oracle_join(lf, rf, "key", how))
