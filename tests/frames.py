"""Test helpers: pandas frames to Spark with exact types, also when empty."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa


def to_spark(spark, frame: pd.DataFrame):
    """A Spark DataFrame with the frame's Arrow types (nullable Int64 keys stay integers)."""
    return spark.createDataFrame(pa.Table.from_pandas(frame, preserve_index=False))
