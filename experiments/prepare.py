"""Generate (and cache) every input a figure's sweep needs, without running any join:
``python -m experiments.prepare figure=<paper>/<fig> [scale=..]`` (``make data``)."""

from __future__ import annotations

import importlib
import json
import sys

from experiments.config import compose, figure_of
from experiments.figure_spec import series_x_values
from experiments.kinds import KINDS, PointContext


def main(argv: list[str]) -> int:
    cfg = compose(argv)
    figure = figure_of(cfg)
    module = importlib.import_module(KINDS[figure["kind"]].partition(":")[0])
    if not hasattr(module, "inputs"):
        print(f"{figure['id']}: kind {figure['kind']} generates its inputs while running")
        return 0
    from datagen import materialize
    from runtime.spark_session import get_spark

    spark = get_spark(cfg.spark.master, cfg.spark.master_env, dict(cfg.spark.conf),
                      cfg.spark.driver_memory)
    seen = set()
    for series in figure["series"]:
        for x in series_x_values(figure, series, cfg.scale.name):
            pc = PointContext(figure=figure, series=series, x=x, scale=cfg.scale.name,
                              seed=int(cfg.seed), spark_cfg={}, calibration=None)
            generator, params = module.inputs(pc)
            key = (generator, json.dumps(params, sort_keys=True, default=str))  # nested dicts
            if key not in seen:
                seen.add(key)
                print(f"{figure['id']}: {generator} -> {materialize(generator, params, spark=spark)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
