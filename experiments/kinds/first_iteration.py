"""amjoin Fig. 3: the per-partition load of Tree-Join's first iteration on the paper's toy
example, for one seed of the random sub-list ids (exact pair counts, no timing)."""

from __future__ import annotations

from datagen.amjoin_toy import FIG3_PARAMS, FIG3_PARTITIONS, FIG3_R, FIG3_S
from experiments.kinds import PointContext, PointOutcome, series_algorithm
from joins.api import BatchContext
from joins.batch.hot_keys import sublists
from joins.batch.tree_join import TreeOptions, TreeStats, initial_index_parts, partition_loads
from runtime.spark_session import get_spark

# The chunking arithmetic of the paper's worked examples (T1), computed by the same function
# Tree-Join uses: list length -> sub-list pairs.
CHUNKING_EXAMPLES = (10**5, 10**4, 10**3)


def run_point(pc: PointContext) -> PointOutcome:
    import pyarrow as pa

    spark = get_spark(**pc.spark_cfg)
    basic = series_algorithm(pc.figure, pc.series) == "tree_join_basic"
    ctx = BatchContext(spark, executors=FIG3_PARTITIONS, partitions=FIG3_PARTITIONS,
                       seed=int(pc.x), params=FIG3_PARAMS)
    opts = TreeOptions.of(ctx, "inner", self_join=False)
    left = spark.createDataFrame(pa.Table.from_pandas(FIG3_R, preserve_index=False))
    right = spark.createDataFrame(pa.Table.from_pandas(FIG3_S, preserve_index=False))
    parts = initial_index_parts(ctx, left, right, "key", opts, basic, TreeStats())
    loads = partition_loads(parts, FIG3_PARTITIONS)
    out = PointOutcome(status="ok", spark_version=spark.version,
                       spark_master=spark.sparkContext.master)
    out.metrics = {"max_partition_pairs": (max(loads), "pairs"),
                   "min_partition_pairs": (min(loads), "pairs"),
                   "total_pairs": (sum(loads), "pairs")}
    for n in CHUNKING_EXAMPLES:
        out.metrics[f"sublist_pairs_{n}"] = (sublists(n) ** 2, "pairs")
    out.series_rows = [{"metric": "partition_pairs", "value": n, "unit": "pairs", "t": i}
                       for i, n in enumerate(loads)]
    return out
