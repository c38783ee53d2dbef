"""Test helpers: pandas frames to Spark with exact types, also when empty; shared test streams."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa


def to_spark(spark, frame: pd.DataFrame):
    """A Spark DataFrame with the frame's Arrow types (nullable Int64 keys stay integers)."""
    return spark.createDataFrame(pa.Table.from_pandas(frame, preserve_index=False))


def hot_key_streams():
    """Two streams for engine tests: hot key 3 in both relations, hot key 7 only in R, nulls,
    duplicate rows."""
    rng = np.random.default_rng(11)
    rk = list(rng.integers(0, 25, 120)) + [3] * 30 + [7] * 25 + [None] * 4
    sk = list(rng.integers(0, 25, 300)) + [3] * 40 + [None] * 3
    r = pd.DataFrame({"key": pd.array(rk, dtype="Int64"), "a": np.arange(len(rk)) % 50})
    s = pd.DataFrame({"key": pd.array(sk, dtype="Int64"), "b": np.arange(len(sk)) % 80})
    return r, s
