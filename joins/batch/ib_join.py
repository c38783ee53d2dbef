"""The Index-Broadcast-Join family (AM-Join paper, Alg. 9-14) for Small-Large joins.

An *index* of the small relation (key -> its records, one ``array<struct>`` per key, built by a
groupBy) is broadcast to every executor, and each partition of the large relation probes it
locally (Spark's broadcast hash join on the unique index key, then an explode of the matched
list). Registered as one family, ``ib_join``, whose join type picks the paper's variant; the
**right** relation is the small, replicated one:

- ``inner``: Index-Broadcast-Join (Alg. 9, 10);
- ``left``: Index-Broadcast-Left-Outer-Join (Alg. 12), unmatched large records padded;
- ``right``: the paper's "right-outer variant" (Fig. 9): the inner join plus the right-anti
  records of the small relation, found as in IB-FO-Join;
- ``full``: IB-FO-Join (Alg. 11): left-outer plus right-anti.

Right-anti (Alg. 11 l. 7-13): the keys of the large relation present in the index are reduced to
a set (a filter on the index keys, then ``distinct``: per-partition set union and a merge,
standing in for combine + treeAggregate), collected at the driver, subtracted from the index
keys, and the smaller of the joinable/unjoinable key sets is broadcast back (optimization 1) to
filter the small relation. The index keys come to the driver with the index sizes, in one job;
a key set of up to ``LITERAL_KEYS_MAX`` keys reaches the executors inside the plan (no job). Optimizations 2-3 (one scan of R for both outputs) have no
DataFrame formulation: Spark cannot emit two outputs from one scan, so R is scanned twice.

Null keys never match: they are kept out of the index and padded directly when preserved.
Failure rule: the broadcast index must fit ``ctx.memory_budget_bytes`` (``BudgetExceeded``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from joins.api import BatchContext, JoinResult, JoinSpec
from joins.batch import amjoin_common as C
from joins.batch.sql_conf import sql_conf
from joins.declarations import ALL_JOIN_TYPES, BatchAlgorithm


@dataclass
class IBStats:
    index_keys: int = 0
    index_records: int = 0
    broadcast_bytes: float = 0.0
    keys_joined: int = 0
    keys_unjoinable: int = 0
    keys_shipped: int = 0
    # modeled cost of finding unjoinable keys: n x (keys collected + keys shipped back) x m_b,
    # the paper's 2n|S|m_b when every small key is both collected and shipped
    unjoinable_detection_bytes: float = 0.0

    def add(self, other: IBStats) -> None:
        for k, v in other.__dict__.items():
            setattr(self, k, getattr(self, k) + v)


def index_broadcast_join(ctx: BatchContext, large: DataFrame, small: DataFrame, on: str,
                         large_is_left: bool, keep_large: bool,
                         keep_small: bool) -> tuple[DataFrame, IBStats]:
    """Join ``large`` with the broadcast index of ``small``, in the ``l_*``/``r_*`` convention.

    ``large_is_left=False`` is the paper's swapJoinedRecords: ``small`` then supplies the ``l_*``
    columns. ``keep_large``/``keep_small`` preserve unmatched records of either side.
    """
    stats = IBStats()
    lpre, spre = ("l_", "r_") if large_is_left else ("r_", "l_")
    large_k, large_null = C.split_null_keys(large, on)
    small_k, small_null = C.split_null_keys(small, on)

    index = C.persist(
        small_k.groupBy(small_k[on].alias("_ik")).agg(F.collect_list(C.record(small_k)).alias("_recs")))
    index_keys: list | None = None
    if keep_small:  # one job gives the sizes and the key set the right-anti step subtracts from
        entries = index.select("_ik", F.size("_recs")).collect()
        index_keys = [e[0] for e in entries]
        stats.index_keys, stats.index_records = len(entries), sum(int(e[1]) for e in entries)
    else:
        row = index.agg(F.count(F.lit(1)), F.sum(F.size("_recs"))).collect()[0]
        stats.index_keys, stats.index_records = int(row[0]), int(row[1] or 0)
    m_b, m_s = C.key_bytes(small, on), C.row_bytes(ctx, small)
    index_bytes = stats.index_records * m_s + stats.index_keys * m_b
    ctx.require_memory("broadcast index", index_bytes)
    stats.broadcast_bytes = index_bytes

    probe = large_k.join(F.broadcast(index), large_k[on] == index["_ik"],
                         "left" if keep_large else "inner")
    explode = F.explode_outer if keep_large else F.explode
    joined = probe.select(*[large_k[c].alias(lpre + c) for c in large.columns],
                          explode("_recs").alias("_s"))
    joined = joined.select(*[lpre + c for c in large.columns],
                           *[F.col("_s").getField(c).alias(spre + c) for c in small.columns])
    frames = [joined]
    if keep_large:
        frames.append(_pad(large_null, lpre, large, spre, small))
    if keep_small:
        anti, anti_stats = _right_anti(ctx, large_k, small_k, on, index_keys or [])
        stats.keys_joined, stats.keys_unjoinable = anti_stats[0], anti_stats[1]
        stats.keys_shipped = anti_stats[2]
        stats.broadcast_bytes += stats.keys_shipped * m_b
        stats.unjoinable_detection_bytes = m_b * ctx.executors * (stats.keys_joined + stats.keys_shipped)
        frames.append(_pad(anti, spre, small, lpre, large))
        frames.append(_pad(small_null, spre, small, lpre, large))
    order = ["l_" + c for c in (large if large_is_left else small).columns]
    order += ["r_" + c for c in (small if large_is_left else large).columns]
    return C.union_all([f.select(*order) for f in frames]), stats


def _pad(df: DataFrame, pre: str, own: DataFrame, other_pre: str, other: DataFrame) -> DataFrame:
    """Records of ``df`` under ``pre`` with the other side's columns all null."""
    return df.select(*[df[c].alias(pre + c) for c in own.columns],
                     *[F.lit(None).cast(f.dataType).alias(other_pre + f.name)
                       for f in other.schema.fields])


# Up to this many keys travel to the executors as a literal set in the plan (no Spark job);
# a larger set is a broadcast DataFrame joined semi or anti. Either way the set reaches every
# executor once: the paper's broadcast of the key set.
LITERAL_KEYS_MAX = 10_000


def _filter_keys(ctx: BatchContext, df: DataFrame, on: str, keys: list, keep: bool) -> DataFrame:
    """Rows of ``df`` (no null keys) whose key is in ``keys`` (``keep``) or is not."""
    if len(keys) <= LITERAL_KEYS_MAX:
        member = F.col(on).isin(keys) if keys else F.lit(False)
        return df.filter(member if keep else ~member)
    schema = StructType([StructField("_uk", df.schema[on].dataType, False)])
    ship = ctx.spark.createDataFrame([(k,) for k in keys], schema)
    return df.join(F.broadcast(ship), df[on] == ship["_uk"],
                   "left_semi" if keep else "left_anti")


def _right_anti(ctx: BatchContext, large_k: DataFrame, small_k: DataFrame, on: str,
                index_keys: list) -> tuple[DataFrame, tuple[int, int, int]]:
    """Small-side records whose key no large record has (Alg. 11 l. 7-13, Alg. 13-14)."""
    joined = {r[0] for r in _filter_keys(ctx, large_k, on, index_keys, keep=True)
              .select(on).distinct().collect()}
    index_set = set(index_keys)
    unjoinable = index_set - joined
    joinable = index_set & joined
    ship_joinable = len(joinable) < len(unjoinable)  # optimization 1: ship the smaller set
    shipped = joinable if ship_joinable else unjoinable
    anti = _filter_keys(ctx, small_k, on, list(shipped), keep=not ship_joinable)
    return anti.select(*small_k.columns), (len(joinable), len(unjoinable), len(shipped))


def ib_join(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec) -> JoinResult:
    """IB-Join family with the right relation indexed and broadcast; ``spec.how`` picks the variant."""
    if spec.self_join:
        raise ValueError("ib_join has no same-attribute self-join variant")
    conf = C.shuffle_conf(ctx)
    with sql_conf(ctx.spark, conf):
        out, stats = index_broadcast_join(
            ctx, left, right, spec.on, large_is_left=True,
            keep_large=spec.how in ("left", "full"), keep_small=spec.how in ("right", "full"))
    return JoinResult(out, extra={k: float(v) for k, v in stats.__dict__.items()}, sql_conf=conf)


IB_JOIN = BatchAlgorithm(
    "ib_join", "amjoin",
    "Index-Broadcast-Join family (right relation indexed); right/full = IB-FO",
    ib_join, {}, ALL_JOIN_TYPES)
