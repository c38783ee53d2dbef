"""DDR, Duplication and Direct Redistribution (Cheng et al., JPDC 2017), on Spark.

The AM-Join paper's other Small-Large outer-join baseline (catalogue amjoin 2.6, Fig. 9): like
DER, but each executor hashes the *entire* unjoined small record over the network instead of
its id, so no ids are needed and no second join: a record received from all n executors is
unjoinable and is output null-padded. Sides, executors and join types: see
:mod:`joins.batch.small_large`.

Spark realisation and accounting:

* The detection (scan of each R_i against the broadcast key index, shipping the unjoined S
  records by hash, counting copies per record) runs as one job inside :func:`run` for its exact
  counts; the per-record counts are persisted (at most |S| rows) and reused by the output. The
  joined records come from a Spark broadcast hash join over the same R_i in the caller's
  action, so R is scanned twice, as in the Spark code of [24] that the paper ran.
* Duplicate records. Copies of one S record share their key, so they are unjoined on the same
  executors, and a reducer that groups by the whole record receives (executors unjoined on) x
  (multiplicity) copies. Counting "== n" alone (as the code of [24] does) would lose or invent
  duplicated records, so the reducer compares with n x multiplicity, the multiplicity being
  known from S, which every executor holds anyway; nothing extra crosses the network for it.
* ``unjoinable_detection_bytes`` (catalogue T15) = records shipped x m_S (one item per unjoined
  record copy per executor); the paper's bound n|S| m_S (``unjoinable_detection_bytes_formula``)
  is reached when no S record joins anywhere.
"""

from __future__ import annotations

import time
from functools import reduce

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from joins.api import BatchContext, JoinResult, JoinSpec
from joins.batch import small_large as sl
from joins.batch.amjoin_common import persist
from joins.batch.sql_conf import sql_conf
from joins.declarations import ALL_JOIN_TYPES, BatchAlgorithm

_COPIES, _MULT, _REP = "_ddr_copies", "_ddr_mult", "_ddr_rep"


def _unjoined_records(index_bc, table_bc, key: str):
    """The per-executor detection scan: emits every S record unjoined on this R_i."""

    def scan(batches):
        unmatched = sl.unmatched_records(index_bc.value, batches, key)
        if len(unmatched):
            rows = table_bc.value.take(pa.array(unmatched, type=pa.int64()))
            yield from rows.to_batches()

    return scan


def _detect(ctx: BatchContext, small: DataFrame, large_n: DataFrame, key: str,
            n: int) -> tuple[DataFrame, float, float]:
    """Ship the unjoined records of each R_i by hash; keep those unjoined on all n executors.

    Returns the persisted unjoinable (record, multiplicity) rows, the record copies shipped and
    the unjoinable record count (with multiplicity).
    """
    table = small.toArrow()
    sc = ctx.spark.sparkContext
    index_bc = sc.broadcast(sl.build_key_index(table.column(key)))
    table_bc = sc.broadcast(table)
    cols = small.columns
    shipped = large_n.select(key).mapInArrow(_unjoined_records(index_bc, table_bc, key),
                                             small.schema)
    per_record = shipped.groupBy(*cols).agg(F.count(F.lit(1)).alias(_COPIES))
    mult = ctx.spark.createDataFrame(table, schema=small.schema).groupBy(*cols).agg(
        F.count(F.lit(1)).alias(_MULT))
    same = reduce(lambda a, b: a & b,
                  [per_record[c].eqNullSafe(mult[c]) for c in cols])
    judged = (per_record.join(F.broadcast(mult), same, "inner")
              .select(*[per_record[c] for c in cols], _COPIES, _MULT))
    judged = persist(judged)
    unjoinable = F.col(_COPIES) == F.col(_MULT) * n
    totals = judged.agg(
        F.sum(_COPIES).alias("items"),
        F.sum(F.when(unjoinable, F.col(_MULT)).otherwise(0)).alias("unjoinable"),
    ).collect()[0]
    return (judged.where(unjoinable), float(totals["items"] or 0),
            float(totals["unjoinable"] or 0))


def run(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec) -> JoinResult:
    r = sl.roles(ctx, spec)
    large, small = sl.split_inputs(left, right, r)
    _, m_s = sl.item_sizes(ctx)
    n = int(ctx.executors)

    with sql_conf(ctx.spark, sl.sql_options(ctx)):
        small_rows = small.count()
    ctx.require_memory("broadcast small relation", small_rows * m_s)
    large_n, shuffled = sl.layout_large(large, n)
    out = sl.first_join(large_n, small, spec, r)
    extra = {**sl.base_metrics(n, small_rows, m_s, shuffled), "detection_record_items": 0.0}
    if r.preserve_small:
        start = time.perf_counter()
        with sql_conf(ctx.spark, sl.sql_options(ctx)):
            unjoinable_df, items, unjoinable = _detect(ctx, small, large_n, spec.on, n)
        extra["detection_seconds"] = time.perf_counter() - start
        copies = unjoinable_df.select(
            *small.columns, F.explode(F.array_repeat(F.lit(1), F.col(_MULT).cast("int"))).alias(_REP))
        out = out.unionByName(sl.pad_large(copies.drop(_REP), large, r))
        extra.update({
            "detection_record_items": items,
            "unjoinable_small_rows": unjoinable,
            "unjoinable_detection_bytes": items * m_s,
            "unjoinable_detection_bytes_formula": n * small_rows * m_s,
        })
    return JoinResult(out, extra=extra, sql_conf=sl.sql_options(ctx))


DDR = BatchAlgorithm(
    "ddr", "amjoin",
    "DDR Small-Large outer join: broadcast small side, redistribute unjoined records",
    run, sl.SMALL_LARGE_PARAMS, ALL_JOIN_TYPES)
