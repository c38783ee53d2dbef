"""AM-Join and AM-Join-Basic: Eqn. 4 splits (Fig. 4), the outer variants of Table 2, the
broadcast-or-shuffle rule, self-joins, approximate hot keys, against the DuckDB oracle."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.batch import amjoin_common
from joins.batch.am_join import use_broadcast
from joins.batch.sql_conf import sql_conf
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import get
from tests.examples import examples
from tests.frames import to_spark
from tests.strategies import frames, keyed_rows

# Fig. 4: with "hot" meaning "occurs more than once" (τ = 2), κ_R = {1:2, 2:2, 3:2, 4:2} and
# κ_S = {1:2, 6:2, 11:2, 12:2}. Fig. 1(a)'s rows are image-only; these are invented around those
# maps, with cold keys on both sides, keys on one side only and null keys.
FIG_R = pd.DataFrame({"key": [1, 1, 2, 2, 3, 3, 4, 4, 6, 11, 5, 7, None],
                      "a": [f"a{i}" for i in range(13)]})
FIG_S = pd.DataFrame({"key": [1, 1, 6, 6, 11, 11, 12, 12, 2, 3, 5, 8, None],
                      "c": [f"c{i}" for i in range(13)]})


def run(spark, name: str, left: pd.DataFrame, right: pd.DataFrame, how: str = "inner",
        self_join: bool = False, params: dict | None = None, partitions: int = 4, **ctx_kw):
    ctx = BatchContext(spark, executors=2, partitions=partitions,
                       params={"hot_threshold": 2, **(params or {})}, **ctx_kw)
    sl = to_spark(spark, left.astype({"key": "Int64"}))
    sr = to_spark(spark, right.astype({"key": "Int64"}))
    result = get(name).load()(ctx, sl, sr, JoinSpec("key", how, self_join))
    with sql_conf(spark, result.sql_conf):
        out = result.output.toPandas()
    amjoin_common.release_all()
    return out, result.extra


@pytest.mark.slow
@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_fig4_split_and_table2_variants(spark, how):
    out, extra = run(spark, "am_join", FIG_R, FIG_S, how)
    assert_same_rows(out, oracle_join(FIG_R, FIG_S, "key", how))
    assert (extra["hot_keys_left"], extra["hot_keys_right"], extra["hot_keys_both"]) == (4, 4, 1)
    # R: HH = key 1, HC = keys 2-4, CH = keys 6, 11 (hot in S), CC = 5, 7, null
    assert [extra[f"rows_{p}_left"] for p in ("hh", "hc", "ch", "cc")] == [2, 6, 2, 3]
    # S: HH = key 1, HC = keys 6, 11, 12, CH = keys 2, 3 (hot in R), CC = 5, 8, null
    assert [extra[f"rows_{p}_right"] for p in ("hh", "hc", "ch", "cc")] == [2, 6, 2, 3]


@pytest.mark.parametrize("rule", ["cost", "never"])
@pytest.mark.parametrize("how", ["inner", "right", "full"])
def test_sized_subjoins_keep_the_rows(spark, how, rule):
    params = {"subjoin_partitions": "sized", "broadcast_rule": rule}
    out, extra = run(spark, "am_join", FIG_R, FIG_S, how, params=params, partitions=16)
    assert_same_rows(out, oracle_join(FIG_R, FIG_S, "key", how))
    # 26 records over 16 partitions = 1.625 per task; HH: 2 + 2 records in, 2 x 2 pairs out
    assert extra["partitions_hh"] == 5
    # HC: 6 large + 2 small records in, at most 6 x min(2, τ=2) pairs out: 20 -> 13 of 16
    assert extra["partitions_hc"] == extra["partitions_ch"] == 13


def test_sized_partitions_rule():
    ctx = BatchContext(spark=None, partitions=192)
    # at 10_000 records per task (1.92M records over 192 partitions)
    assert amjoin_common.sized_partitions(ctx, 10, 10_000) == 1
    assert amjoin_common.sized_partitions(ctx, 25_000, 10_000) == 3
    assert amjoin_common.sized_partitions(ctx, 10**9, 10_000) == 192
    assert amjoin_common.sized_partitions(ctx, 10, 0.0) == 192  # "all"
    with pytest.raises(ValueError, match="subjoin_partitions"):
        amjoin_common.subjoin_partitions_mode(BatchContext(None, params={"subjoin_partitions": "x"}))


@pytest.mark.parametrize("how", ["left", "full"])
def test_shuffle_instead_of_broadcast(spark, how):
    out, extra = run(spark, "am_join", FIG_R, FIG_S, how, params={"broadcast_rule": "never"})
    assert_same_rows(out, oracle_join(FIG_R, FIG_S, "key", how))
    assert extra["hc_broadcast"] == 0 and extra["ch_broadcast"] == 0


def test_broadcast_rule():
    ctx = BatchContext(spark=None, executors=1000, params={"hot_threshold": 100})  # λ ≈ 20.54
    # Δ_split = |R_HC| m_R (1+λ) vs Δ_bcast = |S_CH| m_S (1 + λ log_{1+λ} n): log_{21.54} 1000 ≈ 2.25
    assert use_broadcast(ctx, 10**6, 100, 10**5, 100)
    assert not use_broadcast(ctx, 10**5, 100, 10**5, 100)
    assert use_broadcast(BatchContext(None, params={"broadcast_rule": "always"}), 1, 1, 10**9, 1)
    tight = BatchContext(spark=None, executors=1000, memory_budget_bytes=10**7 - 1,
                         params={"hot_threshold": 100})
    assert not use_broadcast(tight, 10**6, 100, 10**5, 100)  # 10 MB index > budget: shuffle


# key 1 hot in both (12 x 9), key 2 hot in the left only, key 4 in the right only
LEFT = pd.DataFrame({"key": [1] * 12 + [2] * 6 + [3, 5, None], "a": range(21)})
RIGHT = pd.DataFrame({"key": [1] * 9 + [2] + [4] * 5 + [3, 6, None], "b": range(18)})


def test_basic_fails_where_balanced_fits(spark):
    budget = {"memory_budget_bytes": 150, "record_bytes": 10, "params": {"hot_threshold": 3}}
    with pytest.raises(BudgetExceeded, match="largest key group"):
        run(spark, "am_join_basic", LEFT, RIGHT, **budget)
    amjoin_common.release_all()
    out, extra = run(spark, "am_join", LEFT, RIGHT, "full", **budget)
    assert_same_rows(out, oracle_join(LEFT, RIGHT, "key", "full"))
    assert extra["replicated_records"] == 12 * 3 + 9 * 3 and extra["iterations"] >= 1


@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_am_join_basic_matches_oracle(spark, how):
    out, extra = run(spark, "am_join_basic", LEFT, RIGHT, how, params={"hot_threshold": 3})
    assert_same_rows(out, oracle_join(LEFT, RIGHT, "key", how))
    assert extra["max_group_records"] == 21  # key 1's whole group in the Basic initial index


@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_empty_inputs(spark, how):
    """An empty side has no hot keys: each of Eqn. 4's parts is empty or passes through."""
    for left, right in ((LEFT.iloc[:0], RIGHT), (LEFT, RIGHT.iloc[:0]), (LEFT.iloc[:0], RIGHT.iloc[:0])):
        out, _ = run(spark, "am_join", left, right, how, params={"hot_threshold": 3})
        assert_same_rows(out, oracle_join(left, right, "key", how))


def test_space_saving_hot_keys_keep_eqn4_exact(spark):
    # 3 counters per summary: the hot-key estimates are rough, the join must still be exact
    params = {"hot_threshold": 3, "hot_key_method": "space_saving", "hh_capacity": 3}
    out, _ = run(spark, "am_join", LEFT, RIGHT, "full", params=params)
    assert_same_rows(out, oracle_join(LEFT, RIGHT, "key", "full"))


def test_self_join_reduces_to_tree_join(spark):
    rel = pd.DataFrame({"key": [1] * 9 + [2, 2, None], "a": range(12)})
    out, extra = run(spark, "am_join", rel, rel, self_join=True, params={"hot_threshold": 3})
    assert len(out) == 9 * 10 // 2 + 2 * 3 // 2
    pairs = Counter(tuple(sorted((a, b))) for a, b in zip(out["l_a"], out["r_a"], strict=True))
    assert pairs == Counter((i, j) for i in range(9) for j in range(i, 9)) + \
        Counter([(9, 9), (9, 10), (10, 10)])
    assert extra["hot_keys_both"] == 1


rows = keyed_rows()


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(left=rows, right=rows, how=st.sampled_from(["inner", "left", "right", "full"]),
       name=st.sampled_from(["am_join", "am_join_basic"]),
       rule=st.sampled_from(["cost", "always", "never"]))
def test_random_inputs_match_oracle(spark, left, right, how, name, rule):
    lf, rf = frames(left, right)
    out, _ = run(spark, name, lf, rf, how, params={"hot_threshold": 3, "broadcast_rule": rule})
    assert_same_rows(out, oracle_join(lf, rf, "key", how))


@settings(max_examples=examples(10), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(left=rows, right=rows, how=st.sampled_from(["inner", "left", "right", "full"]),
       rule=st.sampled_from(["cost", "never"]), fuse=st.booleans(),
       sized=st.sampled_from(["all", "sized"]))
def test_lean_split_keeps_sizes_and_rows(spark, left, right, how, rule, fuse, sized):
    """split=filter (sizes from the hot-key pass, sub-relations as key-set filters) and the
    fused shuffle of HC, CH and CC give the tagging split's sizes and the oracle's rows."""
    lf, rf = frames(left, right)
    base = {"hot_threshold": 3, "broadcast_rule": rule}
    out, extra = run(spark, "am_join", lf, rf, how, params={**base, "fuse_shuffles": fuse,
                                                          "subjoin_partitions": sized})
    _, tagged = run(spark, "am_join", lf, rf, how, params={**base, "split": "tag",
                                                          "fuse_shuffles": False})
    assert_same_rows(out, oracle_join(lf, rf, "key", how))
    sizes = sorted(k for k in tagged if k.startswith(("rows_", "hot_keys")))
    assert {k: extra[k] for k in sizes} == {k: tagged[k] for k in sizes}
    if rule == "never" and fuse and "rows_hh_left" in extra:
        assert extra["fused_shuffles"] == 1.0


def test_float_keys_keep_the_tagging_split(spark):
    """A literal key set compares -0.0 and NaN unlike the join's equality: float keys tag."""
    from joins.batch.am_join import _filter_split

    ctx = BatchContext(spark, params={})
    f = to_spark(spark, pd.DataFrame({"key": [0.0, -0.0, 1.5]}))
    i = to_spark(spark, pd.DataFrame({"key": [0, 1, 2]}))
    assert not _filter_split(ctx, f, f, "key") and _filter_split(ctx, i, i, "key")
    assert not _filter_split(BatchContext(spark, params={"split": "tag"}), i, i, "key")
    with pytest.raises(ValueError, match="split must be"):
        _filter_split(BatchContext(spark, params={"split": "x"}), i, i, "key")


def test_string_keys_and_mixed_columns(spark):
    left = pd.DataFrame({"key": ["a"] * 7 + ["b"] * 4 + ["c", None], "x": [0.5 * i for i in range(13)],
                         "flag": [i % 2 == 0 for i in range(13)]})
    right = pd.DataFrame({"key": ["a"] * 5 + ["b", "d", None], "y": [f"v{i}" for i in range(8)]})
    ctx = BatchContext(spark, executors=2, partitions=4, params={"hot_threshold": 3})
    result = get("am_join").load()(ctx, to_spark(spark, left), to_spark(spark, right),
                                   JoinSpec("key", "full"))
    with sql_conf(spark, result.sql_conf):
        out = result.output.toPandas()
    amjoin_common.release_all()
    assert_same_rows(out, oracle_join(left, right, "key", "full"))
    assert result.extra["hot_keys_both"] == 1 and result.extra["hot_keys_left"] == 2


@pytest.mark.parametrize("how", ["inner", "full"])
def test_no_hot_key_skips_the_split(spark, how):
    """τ above every key's frequency: AM-Join is the CC Shuffle-Join alone, still exact."""
    out, extra = run(spark, "am_join", FIG_R, FIG_S, how, params={"hot_threshold": 50})
    assert_same_rows(out, oracle_join(FIG_R, FIG_S, "key", how))
    assert extra["hot_keys_left"] == extra["hot_keys_right"] == 0
    assert "rows_hh_left" not in extra and extra["broadcast_bytes"] == 0


def test_consume_output_checksum_is_order_free_and_sees_payload(spark):
    from joins.api import consume_output

    a = to_spark(spark, FIG_R.astype({"key": "Int64"}))
    rows, checksum = consume_output(a)
    shuffled_rows, shuffled = consume_output(a.repartition(3).orderBy("a", ascending=False))
    changed = consume_output(to_spark(spark, FIG_R.assign(a=FIG_R.a.str.upper()).astype(
        {"key": "Int64"})))[1]
    assert rows == shuffled_rows == len(FIG_R)
    assert checksum == shuffled and checksum != changed


def test_consume_output_checksum_is_the_exact_sum_of_row_hashes(spark):
    """The checksum is the exact integer sum of the rows' hashes, with hashes of both signs
    (no overflow); empty output is 0."""
    from pyspark.sql import functions as F

    from joins.api import consume_output

    df = spark.range(5000).select(F.col("id"), (F.col("id") * 7919 % 101).alias("v"))
    hashes = [r[0] for r in df.select(F.xxhash64("id", "v")).collect()]
    assert min(hashes) < 0 < max(hashes)
    assert consume_output(df) == (5000, sum(hashes))
    assert consume_output(df.where("id < 0")) == (0, 0)
