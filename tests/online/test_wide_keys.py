"""Integer keys beyond 2^53 (hashed 64-bit ids) join exactly in a stream, also with a null in
the column (Arrow's default conversion turned such a column into float64, where 2^53 + 1
and 2^53 match) and unsigned keys above 2^63; checked against DuckDB as a multiset, from
pandas frames and from Parquet read by Spark."""

from __future__ import annotations

import pandas as pd
import pytest

from joins.online import run_stream
from joins.online.source import to_float_keys
from joins.oracle import assert_same_rows, oracle_join

BIG = 2**53


def _inputs():
    # neighbours that float64 rounds together: 2^53 and 2^53 + 1, 2^62 and 2^62 + 1
    r = pd.DataFrame({"k": pd.array([BIG + 1, None, 2**62 + 1, 7, BIG + 1, -(2**60) - 1],
                                    dtype="Int64"), "a": range(6)})
    s = pd.DataFrame({"k": pd.array([BIG, 2**62, 7, BIG + 1, None, -(2**60), -(2**60) - 1],
                                    dtype="Int64"), "b": range(7)})
    return r, s


def test_neighbouring_wide_keys_stay_apart_with_nulls():
    r, s = _inputs()
    res = run_stream(None, r, s, operator="shj", joiners=2, on="k", batch_size=3,
                     collect_output=True, progress=False, backend="local")
    expected = oracle_join(r, s, "k", "inner")
    assert len(expected) == 4  # 7, two 2^53 + 1 on R, -(2^60) - 1
    assert_same_rows(res.output, expected)


def test_unsigned_keys_above_2_63_do_not_wrap():
    a = pd.array([2**64 - 1, 2**64 - 2, None], dtype="UInt64")
    b = pd.array([2**64 - 2, 5], dtype="UInt64")
    ka, kb = to_float_keys(a, b)
    assert ka[0] != ka[1] and ka[1] == kb[0] and pd.isna(ka[2]) and kb[1] not in ka


@pytest.mark.spark
def test_wide_keys_with_nulls_from_parquet_on_spark(spark, tmp_path):
    r, s = _inputs()
    r.to_parquet(tmp_path / "R.parquet")
    s.to_parquet(tmp_path / "S.parquet")
    res = run_stream(spark, str(tmp_path / "R.parquet"), str(tmp_path / "S.parquet"),
                     operator="shj", joiners=2, on="k", batch_size=3, collect_output=True,
                     progress=False, partitions=2)
    assert_same_rows(res.output, oracle_join(r, s, "k", "inner"))
