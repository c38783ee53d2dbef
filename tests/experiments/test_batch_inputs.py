"""Batch points share their distributed inputs: x-major sweeps, reuse, release, same metrics."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.kinds import batch_inputs as bi
from experiments.run import x_major

TIME_UNITS = {"modeled s", "s", "local wall s"}
TIME_NAMES = ("_seconds", "_ms_total")  # times the algorithms report as counts


def test_x_major_puts_x_before_series():
    args = ["--multirun", "figure=amjoin/fig5", "point.series=a,b", "seed=0,1", "point.x=0,1"]
    assert x_major(args) == ["--multirun", "figure=amjoin/fig5", "point.x=0,1",
                             "point.series=a,b", "seed=0,1"]
    assert x_major(["figure=f", "point.x=0"]) == ["figure=f", "point.x=0"]


@pytest.fixture
def two_tables(spark, tmp_path):
    paths = []
    for name in ("R", "S"):
        path = str(tmp_path / f"{name}.parquet")
        spark.range(100).selectExpr("id % 7 AS key", "id AS v").write.parquet(path)
        paths.append(path)
    yield paths
    bi.forget_inputs(spark)


def _cached(spark) -> int:
    return spark._jsparkSession.sharedState().cacheManager().numCachedEntries()


@pytest.mark.spark
def test_inputs_are_reused_and_survive_a_registered_persist(spark, two_tables):
    from joins.batch import amjoin_common as C

    left, right = bi.distributed_inputs(spark, two_tables, 4)
    assert left.rdd.getNumPartitions() == 4 and _cached(spark) == 2
    C.persist(left.groupBy("key").count()).count()  # an algorithm's cached frame
    bi.release_cached(spark)
    assert _cached(spark) == 2 and len(spark.sparkContext._jsc.getPersistentRDDs()) == 2
    again = bi.distributed_inputs(spark, two_tables, 4)
    assert again[0] is left and again[1] is right
    # another point's inputs: the earlier ones are dropped
    (only,) = bi.distributed_inputs(spark, two_tables[:1], 8)
    assert only is not left and _cached(spark) == 1


@pytest.mark.spark
def test_an_unregistered_cache_clears_everything(spark, two_tables):
    left, _ = bi.distributed_inputs(spark, two_tables, 4)
    left.where("key = 1").persist().count()  # not through amjoin_common.persist
    bi.release_cached(spark)
    assert _cached(spark) == 0 and not spark.sparkContext._jsc.getPersistentRDDs()
    assert bi.distributed_inputs(spark, two_tables, 4)[0] is not left


def _counts(outcome) -> dict[str, float]:
    return {k: v for k, (v, unit) in outcome.metrics.items()
            if unit not in TIME_UNITS and not k.endswith(TIME_NAMES)}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("series", [  # the other two in make stress (a minute each here)
    "am_join", pytest.param("tree_join", marks=pytest.mark.stress),
    pytest.param("full_skew_join", marks=pytest.mark.stress)])
def test_a_point_on_reused_inputs_counts_as_on_fresh_ones(spark, series):
    """Every count of a point is the same whether an earlier series distributed its inputs."""
    from experiments.config import compose
    from experiments.figure_spec import plain
    from experiments.kinds.batch_join import run_point
    from experiments.run import point_context

    cfg = compose(["figure=amjoin/fig5", "scale=tiny"])
    spark_cfg = {"master": "local[2,2]", "master_env": None, "driver_memory": "2g",
                 "conf": {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"}}

    def point(name: str):
        ctx = point_context(cfg, plain(cfg.figure), name, 0.9)
        return run_point(dataclasses.replace(ctx, spark_cfg=spark_cfg, progress=False))

    bi.forget_inputs(spark)
    fresh = point(series)
    point("hash_join")
    reused = point(series)
    bi.forget_inputs(spark)
    assert fresh.status == reused.status == "ok"
    # the counts are equal; a ratio of float sums may differ in its last digit, as Spark adds
    # task metrics in the order the tasks finish
    assert _counts(reused) == pytest.approx(_counts(fresh), rel=1e-12)


def test_a_seed_replicate_draws_new_data_and_a_new_operator_seed():
    """Rule 3's replicates are series with ``workload.params.seed`` and ``run.seed``: both the
    inputs and the algorithm's own draws change; other series keep the point's seed."""
    from experiments.figures import load_figure
    from experiments.kinds import PointContext
    from experiments.kinds.batch_join import inputs, operator_seed

    figure = load_figure("amjoin/fig5", "tiny")
    figure["series"]["am_join_seed2"] = {
        "algorithm": "am_join", "overrides": {"workload.params.seed": 2, "run.seed": 2}}

    def pc(series: str) -> PointContext:
        return PointContext(figure=figure, series=series, x=0.5, scale="tiny", seed=0,
                            spark_cfg={}, calibration=None)

    assert (operator_seed(pc("am_join")), inputs(pc("am_join"))[1]["seed"]) == (0, 0)
    assert (operator_seed(pc("am_join_seed2")), inputs(pc("am_join_seed2"))[1]["seed"]) == (2, 2)
