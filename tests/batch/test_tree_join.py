"""Tree-Join-Basic and Tree-Join against the DuckDB oracle, the Fig. 2/3 toys, self-joins (T18),
the Basic failure rule and determinism under recomputation."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from datagen.amjoin_toy import FIG3_PARAMS, FIG3_R, FIG3_S
from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.batch import amjoin_common
from joins.batch.sql_conf import sql_conf
from joins.batch.tree_join import (
    TreeOptions,
    TreeStats,
    cold_pairs,
    initial_index_parts,
    partition_loads,
)
from joins.oracle import assert_same_rows, oracle_join
from joins.registry import get
from tests.examples import examples
from tests.frames import to_spark
from tests.strategies import frames, keyed_rows

# key 1 hot in both (12 x 9), key 2 hot only in the left, key 4 only in the right, 3 and 6 cold,
# 5/7 on one side, null keys on both sides, duplicate rows
LEFT = pd.DataFrame({"key": [1] * 12 + [2] * 6 + [3, 3, 5, None, None],
                     "a": list(range(12)) + [20, 20, 21, 22, 23, 24] + [30, 30, 31, 40, 41]})
RIGHT = pd.DataFrame({"key": [1] * 9 + [2] + [4] * 5 + [3, 6, 7, None],
                      "b": [f"s{i % 4}" for i in range(9)] + ["t"] + ["u"] * 5 + ["v", "w", "x", "y"]})


def frame(spark, df: pd.DataFrame):
    return to_spark(spark, df.astype({"key": "Int64"}))


def run(spark, name: str, left: pd.DataFrame, right: pd.DataFrame, how: str = "inner",
        self_join: bool = False, partitions: int = 4, **ctx_kw):
    params = {"hot_threshold": 3, **ctx_kw.pop("params", {})}
    ctx = BatchContext(spark, executors=2, partitions=partitions, params=params, **ctx_kw)
    result = get(name).load()(ctx, frame(spark, left), frame(spark, right),
                              JoinSpec("key", how, self_join))
    with sql_conf(spark, result.sql_conf):
        out = result.output.toPandas()
    amjoin_common.release_all()
    return out, result.extra


@pytest.mark.parametrize("name", ["tree_join_basic", "tree_join"])
@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_matches_oracle(spark, name, how):
    out, extra = run(spark, name, LEFT, RIGHT, how)
    assert_same_rows(out, oracle_join(LEFT, RIGHT, "key", how))
    assert extra["iterations"] >= 2  # key 1 (12 x 9) is chunked at least once
    if name == "tree_join":
        assert (extra["hot_keys_left"], extra["hot_keys_right"], extra["hot_keys_both"]) == (2, 2, 1)
        # unraveling key 1: 12 R records x δ_S(9)=3 + 9 S records x δ_R(12)=3
        assert extra["replicated_records"] == 12 * 3 + 9 * 3


@pytest.mark.parametrize("name", ["tree_join_basic", "tree_join"])
def test_empty_inputs(spark, name):
    empty = LEFT.iloc[:0]
    out, _ = run(spark, name, empty, RIGHT, "full")
    assert_same_rows(out, oracle_join(empty, RIGHT, "key", "full"))
    out, extra = run(spark, name, LEFT, RIGHT.iloc[:0], "inner")
    assert len(out) == 0 and extra["iterations"] == 1


# Fig. 2/3 reconstruction. The figures are images; the text fixes: keys 1, 2 hot and chunked into
# two sub-lists each (so 2..8 records per list), keys 3, 4 cold ("2 or fewer records in both"),
# keys 5, 6 on one side only, three partial results with joined_index_2 holding one key only, and
# (Fig. 3) a heaviest treeJoinBasic partition of 20 pairs. 4 x 5 records for key 1 give those 20
# pairs and a second chunking round ((2,3) sub-list pairs stay hot); 3 x 3 for key 2 give one
# round. isHotKey compares sqrt(ℓ1 ℓ2) with τ; τ = 2.2 makes exactly the lists above hot
# ((2,2) cold, (2,3) hot), matching the figure's rule on this data.
FIG_R, FIG_S, FIG_PARAMS = FIG3_R, FIG3_S, FIG3_PARAMS


def test_fig2_tree_join_basic_iterations(spark):
    out, extra = run(spark, "tree_join_basic", FIG_R, FIG_S, params=FIG_PARAMS)
    assert_same_rows(out, oracle_join(FIG_R, FIG_S, "key", "inner"))
    assert len(out) == 4 * 5 + 3 * 3 + 2 * 2 + 1 * 2
    # joined_index_0: keys 1..6; joined_index_1: 2x2 sub-list pairs of keys 1 and 2;
    # joined_index_2: the two hot (2,3) pairs of key 1, each chunked into 2x2
    assert extra["iterations"] == 3
    assert [extra[f"index_entries_it{i}"] for i in (1, 2, 3)] == [6, 8, 8]
    # Ineq. 3 on the toy: key 1's lists (4 x 5, ℓ = √20) are chunked twice, below
    # log_{3/2}(log_{1+λ} √20) ≈ 2.58 with 1+λ = 2.2^(2/3)
    assert extra["l_max"] == pytest.approx(20 ** 0.5)
    assert extra["chunking_rounds"] == 2
    assert extra["chunking_rounds_bound"] == pytest.approx(2.58, abs=0.01)


def test_chunking_rounds_follow_one_key(spark):
    """Rounds are the longest chain of chunkings of one key, not the iterations that chunk
    anything: key 1 (200 x 200, hot in both) is unraveled into sub-lists of ~33 that stay cold;
    key 2 (2000 x 5, hot in R only, so not unraveled) is chunked once in iteration 1."""
    left = pd.DataFrame({"key": [1] * 200 + [2] * 2000, "a": range(2200)})
    right = pd.DataFrame({"key": [1] * 200 + [2] * 5, "b": [f"s{i}" for i in range(205)]})
    out, extra = run(spark, "tree_join", left, right, params={"hot_threshold": 100})
    assert len(out) == 200 * 200 + 2000 * 5
    assert extra["hot_keys_both"] == 1 and extra["iterations"] == 2
    assert extra["chunking_rounds"] == 1
    assert extra["l_max"] == pytest.approx(200)  # key 1; key 2's sqrt(2000 x 5) = 100
    _, basic = run(spark, "tree_join_basic", left, right, params={"hot_threshold": 100})
    assert basic["chunking_rounds"] == basic["iterations"] - 1 == 1
    _, cold = run(spark, "tree_join", FIG_R, FIG_S, params={"hot_threshold": 100})
    assert cold["chunking_rounds"] == 0 and "chunking_rounds_bound" not in cold


def _first_iteration_loads(spark, basic: bool, seed: int) -> list[int]:
    ctx = BatchContext(spark, executors=6, partitions=6, seed=seed, params=FIG_PARAMS)
    opts = TreeOptions.of(ctx, "inner", self_join=False)
    parts = initial_index_parts(ctx, frame(spark, FIG_R), frame(spark, FIG_S), "key", opts,
                                basic, TreeStats())
    return partition_loads(parts, 6)


def test_fig3_first_iteration_balance(spark):
    # T3: treeJoinBasic's heaviest partition holds key 1's whole 20 pairs and some partitions
    # are idle (paper: 20/0). treeJoin spreads key 1 over sub-list pairs (paper: 10/4); its
    # loads depend on the random sub-list ids, so we check them over several seeds.
    basic = _first_iteration_loads(spark, basic=True, seed=0)
    assert sum(basic) == 35 and max(basic) >= 20 and min(basic) == 0
    maxima = []
    for seed in range(4):
        loads = _first_iteration_loads(spark, basic=False, seed=seed)
        assert sum(loads) == 35
        maxima.append(max(loads))
    assert max(maxima) < 20 and sum(maxima) / len(maxima) <= 14


def test_only_shared_hot_skips_the_cold_index(spark):
    # AM-Join's HH sub-relations: every key (here key 1, 12 x 9 records) is hot in both
    ctx = BatchContext(spark, executors=2, partitions=4, params={"hot_threshold": 3})
    left, right = frame(spark, LEFT[LEFT.key == 1]), frame(spark, RIGHT[RIGHT.key == 1])
    kr, ks = {1: 12}, {1: 9}
    full = TreeOptions.of(ctx, "inner", self_join=False)
    lean = replace(full, only_shared_hot=True)
    with_cold = initial_index_parts(ctx, left, right, "key", full, False, TreeStats(), kr, ks)
    hot_only = initial_index_parts(ctx, left, right, "key", lean, False, TreeStats(), kr, ks)
    assert len(with_cold) == 2 and len(hot_only) == 1
    assert with_cold[0].count() == 0  # the cold index it skips is empty
    assert sum(partition_loads(hot_only, 4)) == 12 * 9


@pytest.mark.parametrize("diagonal", [True, False])
def test_self_cold_pairs_in_one_pass(spark, diagonal):
    rec = "struct<v:int>"
    idx = spark.createDataFrame(
        [(1, 0, [(3,), (1,), (2,)], [], True),  # a self entry: its upper triangle
         (2, 5, [(4,), (5,)], [(6,)], False)],  # a two-list entry: every L1 x L2 pair
        f"_k long, _t long, _L1 array<{rec}>, _L2 array<{rec}>, _self boolean").repartition(3)
    opts = TreeOptions(threshold=3, partitions=3, seed=0, self_join=True, diagonal=diagonal)
    pairs = cold_pairs(idx, opts)
    assert pairs.rdd.getNumPartitions() == 3  # no union of the two kinds of entry
    got = sorted((r["_l"]["v"], r["_r"]["v"]) for r in pairs.collect())
    triangle = [(1, 2), (1, 3), (2, 3)] + ([(1, 1), (2, 2), (3, 3)] if diagonal else [])
    assert got == sorted(triangle + [(4, 6), (5, 6)])


def test_self_join_chunks_in_one_pass(spark):
    from joins.batch.tree_join import _chunk

    rec = "struct<v:int>"
    idx = spark.createDataFrame(
        [(1, 0, [(v,) for v in (8, 3, 5, 1, 7, 2, 6, 4)], [], True),  # δ = 2 sub-lists of 4
         (2, 5, [(v,) for v in range(10, 18)], [(20,)], False)],  # δ1 = 2, δ2 = 1
        f"_k long, _t long, _L1 array<{rec}>, _L2 array<{rec}>, _self boolean").repartition(3)
    opts = TreeOptions(threshold=3, partitions=3, seed=0, self_join=True)
    chunks = _chunk(idx, opts)
    assert chunks.rdd.getNumPartitions() == 3  # no union of the two kinds of entry
    got = sorted((r["_k"], [x["v"] for x in r["_L1"]], [x["v"] for x in r["_L2"]], r["_self"])
                 for r in chunks.collect())
    assert got == [(1, [1, 2, 3, 4], [], True), (1, [1, 2, 3, 4], [5, 6, 7, 8], False),
                   (1, [5, 6, 7, 8], [], True),
                   (2, [10, 11, 12, 13], [20], False), (2, [14, 15, 16, 17], [20], False)]


def self_join_expected(rel: pd.DataFrame, diagonal: bool = True) -> Counter:
    """Unordered pairs (i <= j within a key, positions) as canonical sorted row tuples."""
    rows = [tuple(r) for r in rel.itertuples(index=False, name=None)]
    out: Counter = Counter()
    by_key: dict = {}
    for r in rows:
        if not pd.isna(r[0]):
            by_key.setdefault(r[0], []).append(r)
    for recs in by_key.values():
        for i in range(len(recs)):
            for j in range(i if diagonal else i + 1, len(recs)):
                out[tuple(sorted((recs[i], recs[j])))] += 1
    return out


def self_join_actual(out: pd.DataFrame, cols: list[str]) -> Counter:
    lhs = out[["l_" + c for c in cols]].itertuples(index=False, name=None)
    rhs = out[["r_" + c for c in cols]].itertuples(index=False, name=None)
    return Counter(tuple(sorted((tuple(a), tuple(b)))) for a, b in zip(lhs, rhs, strict=True))


SELF = pd.DataFrame({"key": [1] * 14 + [2] * 4 + [3, None, None], "a": list(range(14)) + [5, 5, 6, 7, 8, 9, 9]})


@pytest.mark.parametrize("name", ["tree_join_basic", "tree_join"])
@pytest.mark.parametrize("diagonal", [True, False])
def test_self_join(spark, name, diagonal):
    out, extra = run(spark, name, SELF, SELF, self_join=True,
                     params={"self_join_diagonal": diagonal})
    # T18: n(n+1)/2 pairs per key with r-r once (n(n-1)/2 without), no reversed duplicates
    n_pairs = sum(n * (n + 1) // 2 if diagonal else n * (n - 1) // 2 for n in (14, 4, 1))
    assert len(out) == n_pairs
    assert self_join_actual(out, ["key", "a"]) == self_join_expected(SELF, diagonal)
    assert extra["iterations"] >= 2
    if name == "tree_join":
        assert extra["hot_keys_both"] == 2 and extra["replicated_records"] == 14 * 3 + 4 * 2


def test_basic_fails_where_balanced_fits(spark):
    # the largest key group (key 1: 12 + 9 records of 10 B) exceeds a 150 B task budget in the
    # Basic variant only; Tree-Join never groups a key of κ_RS whole
    budget = {"memory_budget_bytes": 150, "record_bytes": 10}
    with pytest.raises(BudgetExceeded, match="largest key group"):
        run(spark, "tree_join_basic", LEFT, RIGHT, **budget)
    amjoin_common.release_all()
    out, extra = run(spark, "tree_join", LEFT, RIGHT, **budget)
    assert extra["max_group_records"] * 10 <= 150
    assert_same_rows(out, oracle_join(LEFT, RIGHT, "key", "inner"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tree_join", "am_join"])
def test_coalesced_map_sides_keep_the_draws(spark, name):
    """coalesce_maps merges the unraveling's and chunking's map tasks above the own-id
    projection: every input partition keeps its index, so position-based sub-list ids, and with
    them every count of the index (entries per iteration, largest group), stay the same."""
    rng = np.random.default_rng(3)
    left = pd.DataFrame({"key": np.r_[np.full(300, 1), np.full(80, 2), rng.integers(3, 40, 200)],
                         "a": np.arange(580)})
    right = pd.DataFrame({"key": np.r_[np.full(250, 1), np.full(60, 2), rng.integers(3, 40, 150)],
                          "b": np.arange(460)})
    lf, rf = (frame(spark, df).repartition(7) for df in (left, right))  # 14 map partitions
    runs = []
    for c in (True, False):
        ctx = BatchContext(spark, executors=2, partitions=12,
                           params={"hot_threshold": 5, "coalesce_maps": c,
                                   "subjoin_partitions": "all"})
        result = get(name).load()(ctx, lf, rf, JoinSpec("key"))
        plan = result.output._jdf.queryExecution().executedPlan().toString()
        assert ("Coalesce" in plan) == c  # not collapsed into the shuffle that follows
        with sql_conf(spark, result.sql_conf):
            runs.append((result.output.toPandas(), result.extra))
        amjoin_common.release_all()
    (out, extra), (base_out, base) = runs
    assert_same_rows(out, oracle_join(left, right))
    assert_same_rows(base_out, out)
    counts = [k for k in base if k.startswith(("index_entries", "max_group", "iterations",
                                               "replicated", "chunking"))]
    assert len(counts) >= 5 and extra["iterations"] >= 2
    assert {k: extra[k] for k in counts} == {k: base[k] for k in counts}


def test_recomputation_gives_identical_rows(spark):
    ctx = BatchContext(spark, executors=2, partitions=4, seed=7, params={"hot_threshold": 3})
    result = get("tree_join").load()(ctx, frame(spark, LEFT), frame(spark, RIGHT), JoinSpec("key"))
    with sql_conf(spark, result.sql_conf):
        first = result.output.toPandas()
        assert amjoin_common.release_all() > 0  # drop every cached iteration: full recompute
        second = result.output.toPandas()
    key = list(first.columns)
    pd.testing.assert_frame_equal(first.sort_values(key, ignore_index=True),
                                  second.sort_values(key, ignore_index=True))


rows = keyed_rows()


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(left=rows, right=rows, how=st.sampled_from(["inner", "left", "right", "full"]),
       name=st.sampled_from(["tree_join_basic", "tree_join"]), seed=st.integers(0, 3))
# found by CI: seed 1 puts all three R records of hot key 1 in one of its two sub-lists, and
# the entries of the empty one were padded as if key 1 had no match
@example(left=[(1, 0), (1, 0), (1, 0)], right=[(1, 1), (1, 1), (1, 0)], how="left",
         name="tree_join", seed=1)
def test_random_inputs_match_oracle(spark, left, right, how, name, seed):
    lf, rf = frames(left, right)
    out, _ = run(spark, name, lf, rf, how, seed=seed)
    assert_same_rows(out, oracle_join(lf, rf, "key", how))
