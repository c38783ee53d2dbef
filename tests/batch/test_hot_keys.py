"""Hot-key collection (catalogue 2.5) and Tree-Join's chunk arithmetic (Eqn. 1, Ineq. 3; T1, T2)."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
from pyspark.sql import functions as F

from joins.batch.hot_keys import (
    HotKeyParams,
    get_hot_keys,
    get_hot_keys_of,
    hot_params,
    max_iterations_bound,
    merge_summaries,
    space_saving,
    sublist_length,
    sublist_length_col,
    sublists,
    sublists_col,
)
from tests.frames import to_spark


def test_worked_example_of_chunking():
    # T1: lists of 10^5 records -> 47 sub-lists of 2128, 2209 pairs; 10^4 -> 484; 10^3 -> 100
    assert (sublists(10**5), sublist_length(10**5)) == (47, 2128)
    assert sublists(10**5) ** 2 == 2209
    assert sublists(10**4) ** 2 == 484 and sublists(10**3) ** 2 == 100
    splitter_io = 47 * 47 * (2128 + 2128)
    subsequent_io = 2128 * 2128 * 2
    assert splitter_io == pytest.approx(9.4e6, rel=0.01)
    assert subsequent_io == pytest.approx(9.1e6, rel=0.01)
    assert splitter_io / (2 * 10**10) < 0.0005  # overhead < (1+λ) x 0.05%


def test_sublists_exact_at_perfect_cubes():
    # T2: δ = ⌈ℓ^(1/3)⌉ exactly (a float cube root of 27 is 3.0000000000000004)
    assert [sublists(n) for n in (1, 2, 8, 9, 27, 28, 64, 65, 1000, 1001)] == \
        [1, 2, 2, 3, 3, 4, 4, 5, 10, 11]
    for n in range(2, 3000):
        d, c = sublists(n), sublist_length(n)
        assert (d - 1) ** 3 < n <= d**3
        assert (d - 1) * c < n <= d * c  # δ non-empty sub-lists that cover the list


def test_spark_expressions_match_python(spark):
    df = spark.range(1, 3000).select(F.col("id").alias("n"))
    rows = df.select("n", sublists_col(F.col("n")), sublist_length_col(F.col("n"))).collect()
    assert all((d, c) == (sublists(n), sublist_length(n)) for n, d, c in rows)


def test_iteration_bound():
    # T2/Ineq. 3 with τ = 100 (λ ≈ 20.54) and ℓ_max ≈ 8.3e5 (α = 1.0 at paper scale): t < 2.68
    assert max_iterations_bound(8.3e5, 100) == pytest.approx(2.68, abs=0.01)


def test_params_validated():
    assert hot_params({}) == HotKeyParams(100.0, 1000, "exact", None)
    with pytest.raises(ValueError):
        hot_params({"hot_threshold": 1})
    with pytest.raises(ValueError):
        hot_params({"hot_key_method": "sample"})


def test_space_saving_counts():
    stream = [1] * 50 + [2] * 30 + list(range(100, 160)) + [1] * 10
    exact = space_saving(stream, capacity=1000)
    assert exact == Counter(stream)
    small = space_saving(stream, capacity=10)
    assert len(small) == 10
    # Space-Saving never under-estimates a monitored key and keeps every key above N/capacity
    assert small[1] >= 60 and small[2] >= 30
    merged = merge_summaries({1: 5, 2: 3}, {2: 4, 3: 1}, capacity=2)
    assert merged == {2: 7, 1: 5}


def _keys_frame(spark):
    keys = [1] * 6 + [2] * 5 + [3] * 5 + [4] * 2 + [None] * 9 + list(range(10, 30))
    return to_spark(spark, pd.DataFrame({"key": pd.array(keys, dtype="Int64"),
                                         "v": range(len(keys))}))


def test_exact_hot_keys_top_k_with_threshold(spark):
    df = _keys_frame(spark)
    # >= τ (5): keys 1, 2, 3; null keys are never hot; ties broken by key
    assert get_hot_keys(df, "key", HotKeyParams(5, 10)) == {1: 6, 2: 5, 3: 5}
    assert get_hot_keys(df, "key", HotKeyParams(5, 2)) == {1: 6, 2: 5}
    assert get_hot_keys(df, "key", HotKeyParams(7, 10)) == {}


def test_hot_keys_of_two_relations_in_one_job(spark):
    # κ_R and κ_S are counted independently: a key's records in S never make it hot in R
    left = _keys_frame(spark)
    right = to_spark(spark, pd.DataFrame({"key": pd.array([2] * 3 + [7] * 8 + [None] * 20,
                                                          dtype="Int64"), "v": range(31)}))
    for tasks in (None, 1, 3):
        kr, ks = get_hot_keys_of([left, right], "key", HotKeyParams(5, 10), tasks=tasks)
        assert kr == {1: 6, 2: 5, 3: 5} and list(kr) == [1, 2, 3]
        assert ks == {7: 8}
    # top-|κ|max is taken per relation, ties by key, across partitions merged on the driver
    kr, ks = get_hot_keys_of([left, right], "key", HotKeyParams(5, 2), tasks=3)
    assert kr == {1: 6, 2: 5} and ks == {7: 8}


def test_space_saving_hot_keys_on_spark(spark):
    df = _keys_frame(spark)
    hot = get_hot_keys(df, "key", HotKeyParams(5, 10, "space_saving", capacity=50))
    assert hot == {1: 6, 2: 5, 3: 5}  # capacity above the distinct count: exact
