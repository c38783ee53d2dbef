"""Full-SkewJoin (FSJ; Bruno, Kwon & Wu, VLDB 2014), the AM-Join paper's PRPD-family baseline.

As the AM-Join paper describes it (catalogue amjoin 2.6): hot keys are collected per relation;
a key hot in both is assigned to one side only (PRPD's rule, needed for correctness); for the
keys assigned to R, R's records (R_high) are spread round-robin over all partitions and S's
records of those keys (S_dup) are broadcast to every executor; symmetrically for S; everything
else (R_hash, S_hash) is hash-joined. The output is the union of the three joins. Inner join
only: the outer variants of [19] need SCOPE's witness tuples, which the paper could not build.

Choices the paper leaves open:

* Hot keys: the top ``max_hot_keys`` (1000) keys of each relation with >= ``hot_threshold``
  (100) records (the paper's "100 records or more"), from ctx.params; counted exactly with a
  Spark aggregation (ties in the top-k cut broken by the smaller key). An approximate summary
  would only change which borderline keys count as hot.
* A key hot in both goes to the side with more records, so the bigger record list is the one
  spread round-robin and the smaller one is broadcast (ties go to the left relation R).
* Round-robin is Spark's own RoundRobinPartitioning (``repartition(P)``). It sorts each input
  partition before distributing, so a recomputed task sends every record to the same place; it
  has no random seed to take from ctx.seed.
* Failure rule (catalogue 5.2): FSJ fails when the broadcast hot-key records (S_dup and R_dup,
  both held on every executor) exceed executor memory:
  ``ctx.require_memory("broadcast hot-key records", rows * record_bytes)``. The rows are exact;
  ``broadcast_bytes`` is rows x ctx.record_bytes (0 when the record size is not given).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from joins.api import BatchContext, JoinResult, JoinSpec, prefixed
from joins.batch.hot_keys import HOT_THRESHOLD, HotKeyParams, key_counts, top_hot_keys
from joins.batch.sql_conf import sql_conf
from joins.declarations import BatchAlgorithm


def assign_high_side(hot_l: dict, hot_r: dict) -> tuple[set, set]:
    """PRPD: every hot key belongs to exactly one side, the one with more of its records."""
    high_l = {k for k, c in hot_l.items() if c >= hot_r.get(k, 0)}
    high_r = {k for k, c in hot_r.items() if k not in hot_l or c > hot_l[k]}
    return high_l, high_r


def broadcast_hot_rows(hot_l: dict, hot_r: dict, rows_l: Callable[[set], int],
                       rows_r: Callable[[set], int]) -> tuple[int, int]:
    """(R_dup, S_dup) record counts: each side's records of the keys assigned to the other
    side's high part (:func:`assign_high_side`), all broadcast to every executor. ``rows_l`` /
    ``rows_r`` count a relation's records with any of the given keys (a key may be hot on one
    side only, so its other side's count is not in κ)."""
    high_l, high_r = assign_high_side(hot_l, hot_r)
    return rows_l(high_r), rows_r(high_l)


def broadcast_hot_bytes(rows: int, record_bytes: float | None) -> float:
    """Full-SkewJoin's need (catalogue 5.2): the broadcast hot-key records, held on every
    executor; 0 when the record size is not modeled."""
    return float(rows) * float(record_bytes or 0)


def _rows_with_keys(counts: DataFrame, on: str, keys: set) -> int:
    if not keys:
        return 0
    total = counts.where(F.col(on).isin(list(keys))).agg(F.sum("n")).collect()[0][0]
    return int(total or 0)


def _high_dup_join(high: DataFrame, dup: DataFrame, on: str, partitions: int,
                   high_is_left: bool) -> DataFrame:
    """High-side records round-robin over all partitions, joined with the broadcast dup side."""
    spread = high.repartition(partitions)
    l_df, r_df = (spread, F.broadcast(dup)) if high_is_left else (F.broadcast(dup), spread)
    return l_df.join(r_df, l_df["l_" + on] == r_df["r_" + on], "inner")


def run(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec) -> JoinResult:
    if spec.how != "inner":
        raise ValueError("full_skew_join has no outer variant (the paper's FSJ is inner only)")
    on = spec.on
    # PRPD counts exactly; any τ >= 1 is valid here (no chunking that must terminate)
    hot = HotKeyParams(threshold=float(ctx.params.get("hot_threshold", 100)),
                       max_keys=int(ctx.params.get("max_hot_keys", 1000)))
    conf = {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.join.preferSortMergeJoin": "false",
        "spark.sql.shuffle.partitions": ctx.partitions,
    }

    with sql_conf(ctx.spark, conf):
        counts_l = key_counts(left, on, ctx.executors).persist(StorageLevel.MEMORY_AND_DISK)
        counts_r = key_counts(right, on, ctx.executors).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            hot_l = top_hot_keys(counts_l, on, hot)
            hot_r = top_hot_keys(counts_r, on, hot)
            high_l, high_r = assign_high_side(hot_l, hot_r)
            dup_l_rows, dup_r_rows = broadcast_hot_rows(  # R_dup, S_dup: broadcast
                hot_l, hot_r, lambda keys: _rows_with_keys(counts_l, on, keys),
                lambda keys: _rows_with_keys(counts_r, on, keys))
        finally:
            counts_l.unpersist()
            counts_r.unpersist()

    broadcast_rows = dup_l_rows + dup_r_rows
    record_bytes = ctx.record_bytes or 0
    ctx.require_memory("broadcast hot-key records", broadcast_hot_bytes(broadcast_rows, record_bytes))

    lp, rp = prefixed(left, "l_"), prefixed(right, "r_")
    lk, rk = F.col("l_" + on), F.col("r_" + on)
    high_keys = list(high_l | high_r)
    parts = []
    if high_l:
        parts.append(_high_dup_join(lp.where(lk.isin(list(high_l))),
                                    rp.where(rk.isin(list(high_l))), on, ctx.partitions, True))
    if high_r:
        parts.append(_high_dup_join(rp.where(rk.isin(list(high_r))),
                                    lp.where(lk.isin(list(high_r))), on, ctx.partitions, False))
    l_hash = lp.where(~lk.isin(high_keys)) if high_keys else lp
    r_hash = rp.where(~rk.isin(high_keys)) if high_keys else rp
    l_hash, r_hash = l_hash.hint("shuffle_hash"), r_hash.hint("shuffle_hash")
    parts.append(l_hash.join(r_hash, l_hash["l_" + on] == r_hash["r_" + on], "inner"))
    columns = lp.columns + rp.columns
    out = parts[0].select(*columns)
    for part in parts[1:]:
        out = out.unionByName(part.select(*columns))

    extra = {
        "hot_keys_left": float(len(hot_l)),
        "hot_keys_right": float(len(hot_r)),
        "hot_keys_both": float(len(hot_l.keys() & hot_r.keys())),
        "high_keys_left": float(len(high_l)),
        "high_keys_right": float(len(high_r)),
        "rows_high_left": float(sum(hot_l[k] for k in high_l)),
        "rows_high_right": float(sum(hot_r[k] for k in high_r)),
        "rows_dup_left": float(dup_l_rows),
        "rows_dup_right": float(dup_r_rows),
        "broadcast_rows": float(broadcast_rows),
        "broadcast_bytes": float(broadcast_rows * record_bytes),
    }
    return JoinResult(out, extra=extra, sql_conf=conf)


FULL_SKEW_JOIN = BatchAlgorithm(
    "full_skew_join", "amjoin",
    "Full-SkewJoin (PRPD family): hot keys round-robin + broadcast, rest hashed",
    run, HOT_THRESHOLD)
