"""Pieces shared by the AM-Join paper's algorithms (Tree-Join, IB-Join, AM-Join).

Records travel inside the joined index as structs (one struct per input row), so a key's
record lists are ``array<struct>`` columns and the output is assembled by expanding the two
structs into the ``l_*``/``r_*`` convention of :mod:`joins.api`.

Every DataFrame these algorithms (and the DER/DDR baselines) persist goes through
:func:`persist`, so a caller can free the cached iterations with :func:`release_all` once the
output's action has run (the join output is lazy and reads those caches, so they cannot be
dropped inside ``run``) and keep what it cached itself (the runner's distributed inputs).
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    FloatType,
    IntegerType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

if TYPE_CHECKING:
    from joins.api import BatchContext

_PERSISTED: list[DataFrame] = []


def shuffle_conf(ctx: BatchContext) -> dict[str, str]:
    """SQL options for every action of these algorithms: plain shuffles, no adaptive re-planning.

    Adaptive execution would coalesce or split the partitions the algorithm chose (and turn the
    CC shuffle join into a broadcast), so it is off; explicit ``broadcast`` hints still apply.
    """
    return {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.join.preferSortMergeJoin": "false",
        "spark.sql.shuffle.partitions": str(ctx.partitions),
    }


def persist(df: DataFrame) -> DataFrame:
    """Cache an iteration so the driver loop and the final action do not recompute its lineage."""
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    _PERSISTED.append(df)
    return df


def release_all() -> int:
    """Unpersist everything these algorithms cached; returns how many frames were released."""
    n = len(_PERSISTED)
    while _PERSISTED:
        df = _PERSISTED.pop()
        with contextlib.suppress(Exception):  # the session may already be stopped
            df.unpersist()
    return n


def record(df: DataFrame) -> Column:
    """The whole row of ``df`` as one struct column."""
    return F.struct(*[df[c] for c in df.columns])


def null_record(df: DataFrame) -> Column:
    """A null of the row type of ``df`` (the missing side of an index entry or outer row)."""
    return F.lit(None).cast(df.schema)


def empty_records(df: DataFrame) -> Column:
    """An empty ``array<struct>`` of the row type of ``df``."""
    return F.array().cast(ArrayType(df.schema, True))


def pairs_to_output(pairs: DataFrame, left: DataFrame, right: DataFrame,
                    lcol: str = "_l", rcol: str = "_r") -> DataFrame:
    """Expand the two record structs of each joined pair into ``l_*`` and ``r_*`` columns."""
    return pairs.select(
        *[F.col(lcol).getField(c).alias("l_" + c) for c in left.columns],
        *[F.col(rcol).getField(c).alias("r_" + c) for c in right.columns],
    )


def pairs_schema(left: DataFrame, right: DataFrame) -> StructType:
    """The output schema: every left column as ``l_*``, every right column as ``r_*``."""
    fields = [StructField("l_" + f.name, f.dataType, True) for f in left.schema.fields]
    fields += [StructField("r_" + f.name, f.dataType, True) for f in right.schema.fields]
    return StructType(fields)


def pad_left_only(df: DataFrame, right: DataFrame) -> DataFrame:
    """Unmatched left rows: ``l_*`` from the row, ``r_*`` all null."""
    return df.select(
        *[df[c].alias("l_" + c) for c in df.columns],
        *[F.lit(None).cast(f.dataType).alias("r_" + f.name) for f in right.schema.fields],
    )


def pad_right_only(df: DataFrame, left: DataFrame) -> DataFrame:
    """Unmatched right rows: ``l_*`` all null, ``r_*`` from the row."""
    return df.select(
        *[F.lit(None).cast(f.dataType).alias("l_" + f.name) for f in left.schema.fields],
        *[df[c].alias("r_" + c) for c in df.columns],
    )


def union_all(frames: list[DataFrame]) -> DataFrame:
    """Union by position of frames that share one schema (the output convention)."""
    out = frames[0]
    for f in frames[1:]:
        out = out.union(f)
    return out


def split_null_keys(df: DataFrame, on: str) -> tuple[DataFrame, DataFrame]:
    """(rows with a key, rows with a null key): null keys never match, they only get padded."""
    return df.filter(df[on].isNotNull()), df.filter(df[on].isNull())


def _type_bytes(t: DataType) -> int:
    """Spark's own per-value size estimates (``DataType.defaultSize``)."""
    if isinstance(t, StructType):
        return sum(_type_bytes(f.dataType) for f in t.fields)
    if isinstance(t, StringType | BinaryType):
        return 20
    if isinstance(t, BooleanType | ByteType):
        return 1
    if isinstance(t, ShortType):
        return 2
    if isinstance(t, IntegerType | FloatType | DateType):
        return 4
    if isinstance(t, DecimalType):
        return 8 if t.precision <= 18 else 16
    return 8  # long, double, timestamps; nested values counted as one word


def row_bytes(ctx: BatchContext, df: DataFrame) -> float:
    """Modeled size of one record of ``df``: ``ctx.record_bytes`` when given, else a schema estimate."""
    if ctx.record_bytes is not None:
        return float(ctx.record_bytes)
    return float(sum(_type_bytes(f.dataType) for f in df.schema.fields))


def key_bytes(df: DataFrame, on: str) -> float:
    """Modeled size of one join key (the paper's m_b)."""
    return float(_type_bytes(df.schema[on].dataType))


def is_orderable(t: DataType) -> bool:
    """Whether Spark can sort values of this type (needed for the canonical list order)."""
    from pyspark.sql.types import MapType, VariantType

    if isinstance(t, MapType | VariantType):
        return False
    if isinstance(t, StructType):
        return all(is_orderable(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return is_orderable(t.elementType)
    return True


def lambda_from_threshold(threshold: float) -> float:
    """λ such that (1+λ)^(3/2) equals the hot-key threshold (paper: 100 -> λ ≈ 20.54)."""
    return max(threshold, 1.0) ** (2.0 / 3.0) - 1.0


def log_base(x: float, base: float) -> float:
    return math.log(x) / math.log(base) if base > 1 and x > 0 else 0.0


SUBJOIN_PARTITIONS = ("all", "sized")


def subjoin_partitions_mode(ctx: BatchContext) -> str:
    mode = str(ctx.params.get("subjoin_partitions", "sized"))
    if mode not in SUBJOIN_PARTITIONS:
        raise ValueError(f"subjoin_partitions must be one of {', '.join(SUBJOIN_PARTITIONS)}, "
                         f"got {mode!r}")
    return mode


def sized_partitions(ctx: BatchContext, work_records: float, per_task: float) -> int:
    """Partitions for a sub-join of ``work_records`` (records in plus pairs out) at ``per_task``
    work per task, at most ``ctx.partitions``, at least one; all of them if ``per_task`` <= 0."""
    if per_task <= 0:
        return ctx.partitions
    return int(min(ctx.partitions, max(1, math.ceil(work_records / per_task))))
