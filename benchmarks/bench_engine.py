"""Benchmark of the online engine against a Spark SQL batch join of the same inputs (floor).

    python -m benchmarks.bench_engine [--sf 0.02] [--z 0.0 1.0] [--batch 40000]

E_Q5 at scale=small (squall table2's sf, micro-batch size and partitions), J = 16, for each z:
the Spark SQL batch join of the same R and S on the same session (same output count), then
the whole online run of static_mid and dynamic. Then the fixed cost per micro-batch at J = 16 vs
J = 64 (many small micro-batches). Prints and writes scratch/bench/engine.json. These are local
wall times on this machine (2 cores), not cluster times; not a timed test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import pandas as pd


def batch_join_floor(spark, r_path: str, s_path: str, expected: int, repeat: int) -> float:
    """Best local wall time of Spark SQL's own join of the two Parquet inputs (read included)."""
    walls = []
    for _ in range(max(2, repeat)):
        t = time.perf_counter()
        got = spark.read.parquet(r_path).join(spark.read.parquet(s_path), "key").count()
        walls.append(time.perf_counter() - t)
        assert got == expected, (got, expected)
    return min(walls)


def main(argv: list[str]) -> int:
    """Options as ``key=value`` like the other benchmarks (``z=0,1`` for a list)."""
    ap = argparse.ArgumentParser(prog="bench_engine", usage="bench_engine [sf=F] [z=Z,Z...] "
                                 "[batch=N] [partitions=N] [seed=N] [repeat=N]")
    ap.add_argument("--sf", type=float, default=0.02)  # squall table2 at scale=small
    ap.add_argument("--z", type=float, nargs="+", default=[0.0, 1.0])
    ap.add_argument("--batch", type=int, default=40_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    flags = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            ap.error(f"expected key=value, got {arg!r}")
        flags += [f"--{key}", *value.split(",")]
    a = ap.parse_args(flags)

    from datagen import materialize
    from joins.online import run_stream
    from joins.oracle import oracle_count
    from runtime.paths import SCRATCH
    from runtime.spark_session import get_spark

    cores = 2  # task slots of the local session below (its default.parallelism is set higher)
    spark = get_spark(f"local[{cores}]")
    out: dict = dict(query="eq5", sf=a.sf, batch_size=a.batch, joiners=16, cores=cores,
                     note=f"local wall time on {cores} cores of one machine, not cluster time", runs={})
    for z in a.z:
        folder = materialize("squall_query", {"query": "eq5", "sf": a.sf, "z": z,
                                              "seed": a.seed}, spark=spark, progress=False)
        r_path, s_path = f"{folder}/R.parquet", f"{folder}/S.parquet"
        r, s = pd.read_parquet(r_path), pd.read_parquet(s_path)
        expected = oracle_count(r, s)
        run = dict(tuples=len(r) + len(s), r_tuples=len(r), s_tuples=len(s), expected=expected,
                   batch_join_s=batch_join_floor(spark, r_path, s_path, expected, a.repeat))
        for op in ("static_mid", "dynamic"):
            walls_op = []
            for _ in range(a.repeat):  # the machine is shared: keep the best of a few runs
                t = time.perf_counter()
                res = run_stream(spark, r_path, s_path, operator=op, joiners=16,
                                 batch_size=a.batch, partitions=a.partitions, progress=False,
                                 seed=a.seed)
                walls_op.append(time.perf_counter() - t)
            wall = min(walls_op)
            assert res.summary["outputs"] == expected, (op, res.summary["outputs"], expected)
            per_batch = res.metrics.groupby("batch")["batch_wall_seconds"].first()
            run[op] = dict(wall_s=wall, walls_s=walls_op,
                           ratio_to_batch=wall / run["batch_join_s"],
                           tuples_per_s_per_core=run["tuples"] / wall / cores,
                           batches=res.summary["batches"],
                           median_batch_s=float(per_batch.median()),
                           migrations=res.summary["migrations"],
                           final_mapping=res.summary["final_mapping"],
                           max_ilf=res.summary["max_ilf"])
            print(f"z={z} {op}", json.dumps(run[op]))
        out["runs"][str(z)] = run

    # fixed cost per micro-batch: the last z's inputs in 5000-tuple micro-batches
    for j in (16, 64):
        res = run_stream(spark, r.iloc[: 50_000], s.iloc[: 50_000], operator="static_mid", joiners=j,
                         batch_size=5_000, progress=False)
        per_batch = res.metrics.groupby("batch")["batch_wall_seconds"].first()
        out[f"overhead_J{j}"] = dict(batches=len(per_batch),
                                     median_batch_s=float(per_batch.iloc[2:].median()),
                                     partitions=res.summary["partitions"])
    out["targets"] = {
        f"z={z}": dict(static_mid_le_5x=run["static_mid"]["ratio_to_batch"] <= 5,
                       dynamic_le_6x=run["dynamic"]["ratio_to_batch"] <= 6)
        for z, run in out["runs"].items()}
    path = SCRATCH / "bench" / "engine.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, default=str))
    print(json.dumps(out, indent=2, default=str))
    print(f"cores={cores}; written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
