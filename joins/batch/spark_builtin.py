"""Spark's own joins as the AM-Join paper's baselines: Hash-Join, Spark3-Join, Broadcast-Join.

Spark evaluates these lazily, so each function returns a plan that carries its SQL options
with it only while the action runs. The caller runs the action inside
:func:`joins.batch.sql_conf.sql_conf` with ``result.sql_conf``; the settings are returned,
not applied globally, so one algorithm never leaks options into the next.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from joins.api import BatchContext, JoinResult, JoinSpec, prefixed
from joins.declarations import ALL_JOIN_TYPES, BatchAlgorithm, Param

_HOW = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer"}


def _plain_join(left: DataFrame, right: DataFrame, spec: JoinSpec, hint: str | None = None,
                side: str = "right") -> DataFrame:
    l_df, r_df = prefixed(left, "l_"), prefixed(right, "r_")
    if hint == "broadcast":
        if side == "right":
            r_df = F.broadcast(r_df)
        else:
            l_df = F.broadcast(l_df)
    elif hint is not None:
        l_df, r_df = l_df.hint(hint), r_df.hint(hint)
    cond = l_df[f"l_{spec.on}"] == r_df[f"r_{spec.on}"]
    return l_df.join(r_df, cond, _HOW[spec.how])


def hash_join(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec) -> JoinResult:
    """Shuffle hash join: each key's Cartesian product on one task (the hottest key's task)."""
    out = _plain_join(left, right, spec, hint="shuffle_hash")
    conf = {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.join.preferSortMergeJoin": "false",
        "spark.sql.shuffle.partitions": ctx.partitions,
    }
    return JoinResult(out, sql_conf=conf)


def _aqe_conf(ctx: BatchContext, skew: bool) -> dict:
    # Thresholds scaled down (catalogue amjoin 5.4) so the skew path triggers at small scale:
    # a partition is skewed if > factor x median and > threshold bytes.
    p = dict(ctx.params)
    return {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.skewJoin.enabled": str(skew).lower(),
        "spark.sql.adaptive.skewJoin.skewedPartitionFactor": p.get("skewed_partition_factor", 5.0),
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes":
            p.get("skewed_partition_threshold_bytes", "1MB"),
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": p.get("advisory_partition_bytes", "256KB"),
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.adaptive.autoBroadcastJoinThreshold": p.get("auto_broadcast_bytes", "-1"),
        "spark.sql.autoBroadcastJoinThreshold": p.get("auto_broadcast_bytes", "-1"),
        "spark.sql.shuffle.partitions": ctx.partitions,
    }


def spark3_join(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec) -> JoinResult:
    """Spark's sort-merge join with adaptive execution and skew-join splitting on."""
    return JoinResult(_plain_join(left, right, spec), sql_conf=_aqe_conf(ctx, skew=True))


def spark_aqe_no_skew(ctx: BatchContext, left: DataFrame, right: DataFrame,
                      spec: JoinSpec) -> JoinResult:
    """Adaptive execution on but skew splitting off: separates coalescing from skew handling."""
    return JoinResult(_plain_join(left, right, spec), sql_conf=_aqe_conf(ctx, skew=False))


def broadcast_relation_bytes(rows: int, record_bytes: float | None) -> float:
    """Broadcast-Join's need: the whole broadcast relation on every executor (catalogue 5.2);
    0 when the record size is not modeled."""
    return float(rows) * float(record_bytes or 0)


def broadcast_join(ctx: BatchContext, left: DataFrame, right: DataFrame,
                   spec: JoinSpec) -> JoinResult:
    """Replicate one whole relation to every executor; fails when it exceeds executor memory.

    The broadcast side is the right relation for inner and left-outer joins and the left one
    for right-outer joins (Spark cannot broadcast the preserved side).
    """
    side = "left" if spec.how == "right" else "right"
    if spec.how == "full":
        raise ValueError("broadcast_join cannot do full outer joins")
    small = left if side == "left" else right
    if ctx.memory_budget_bytes is not None:
        ctx.require_memory("broadcast relation",
                           broadcast_relation_bytes(small.count(), ctx.record_bytes))
    out = _plain_join(left, right, spec, hint="broadcast", side=side)
    conf = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": ctx.partitions}
    return JoinResult(out, sql_conf=conf)


# Spark's adaptive execution settings (Spark3-Join and its no-skew variant)
AQE_PARAMS = {
    "skewed_partition_factor": Param(5.0, "Spark AQE: a partition this many times the median "
                                          "is skewed"),
    "skewed_partition_threshold_bytes": Param("1MB", "Spark AQE: and larger than this (e.g. "
                                                     "1MB) to be split"),
    "advisory_partition_bytes": Param("256KB", "Spark AQE: target size of a split or coalesced "
                                               "partition"),
    "auto_broadcast_bytes": Param("-1", "Spark: broadcast a side smaller than this (-1: "
                                        "never)"),
}

HASH_JOIN = BatchAlgorithm("hash_join", "amjoin", "Shuffle hash join, adaptive execution off",
                           hash_join, {}, ALL_JOIN_TYPES)
SPARK3_JOIN = BatchAlgorithm(
    "spark3_join", "amjoin",
    "Spark's join with adaptive execution and skew-join handling on",
    spark3_join, AQE_PARAMS, ALL_JOIN_TYPES)
SPARK_AQE_NO_SKEW = BatchAlgorithm(
    "spark_aqe_no_skew", "amjoin", "Adaptive execution on, skew-join split off",
    spark_aqe_no_skew, AQE_PARAMS, ALL_JOIN_TYPES)
BROADCAST_JOIN = BatchAlgorithm(
    "broadcast_join", "amjoin",
    "Broadcast the smaller relation (the right one for inner joins)",
    broadcast_join, {}, ("inner", "left", "right"))
