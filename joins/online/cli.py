"""``python -m joins stream key=value ...``: run an online operator on the user's Parquet files.

    python -m joins stream operator=dynamic r=R.parquet s=S.parquet on=key joiners=16 \\
        order=random|fluct k=4 [band=W] [controller=exact|sampled] out=OUT.parquet \\
        [metrics=METRICS.parquet] [batch_size=50000] [budget=TUPLES] [spill=charge|disk|evict] \\
        [seed=0] [partitions=P] [spark=local|local_cluster] [eps=.. warmup=.. (operator)]

Bad input (missing file or column, unknown operator or order, J < 1, ...) is reported with a
clear message and exit code 2 before Spark starts.
"""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = __doc__.split("\n\n")[1]
_ENGINE = {"operator", "r", "s", "on", "band", "joiners", "order", "k", "controller", "out",
           "metrics", "batch_size", "budget", "spill", "seed", "partitions", "spark",
           "progress", "checkpoint_every", "migration_rate"}
_SPARK = {"local": "local[2]", "local_cluster": "local-cluster[2,1,1024]"}


class UsageError(ValueError):
    pass


def _value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def parse(argv: list[str]) -> dict:
    args: dict = {}
    for a in argv:
        key, eq, val = a.partition("=")
        if not eq or not key:
            raise UsageError(f"expected key=value, got {a!r}")
        args[key] = val
    return args


def _parquet_columns(path: str, name: str) -> list[str]:
    import pyarrow.dataset as ds

    p = Path(path)
    if not p.exists():
        raise UsageError(f"{name}={path}: no such file or folder")
    try:
        return list(ds.dataset(str(p), format="parquet").schema.names)
    except Exception as e:  # noqa: BLE001 - any unreadable input is a usage error
        raise UsageError(f"{name}={path}: not readable as Parquet ({e})") from e


def validate(args: dict) -> dict:
    """Check everything that can be checked without Spark; returns typed options."""
    from datagen import orders
    from joins import registry

    for req in ("operator", "r", "s", "joiners"):
        if req not in args:
            raise UsageError(f"missing {req}=")
    op = args["operator"]
    if op not in registry.names("online"):
        raise UsageError(f"unknown operator {op!r}; valid: {', '.join(registry.names('online'))}")
    try:
        joiners = int(args["joiners"])
    except ValueError as e:
        raise UsageError(f"joiners must be an integer, got {args['joiners']!r}") from e
    if joiners < 1:
        raise UsageError(f"joiners must be >= 1, got {joiners}")
    on = args.get("on", "key")
    for side in ("r", "s"):
        cols = _parquet_columns(args[side], side)
        if on not in cols:
            raise UsageError(f"{side}={args[side]} has no column {on!r}; columns: {cols}")
    order = args.get("order", "random")
    if order not in orders.names():
        raise UsageError(f"unknown order {order!r}; valid: {', '.join(orders.names())}")
    band = None
    if args.get("band") not in (None, "", "none"):
        try:
            band = float(args["band"])
        except ValueError as e:
            raise UsageError(f"band must be a number, got {args['band']!r}") from e
        if band < 0:
            raise UsageError(f"band must be >= 0, got {band}")
        if op == "shj":
            raise UsageError("shj is an equi-join operator; drop band= or pick a grid operator")
    controller = args.get("controller", "exact")
    if controller not in ("exact", "sampled"):
        raise UsageError(f"controller must be exact or sampled, got {controller!r}")
    spill = args.get("spill", "charge")
    if spill not in ("charge", "disk", "evict"):
        raise UsageError(f"spill must be charge, disk or evict, got {spill!r}")
    spark = args.get("spark", "local")
    if spark not in _SPARK:
        raise UsageError(f"spark must be one of {', '.join(_SPARK)}, got {spark!r}")
    opts = dict(operator=op, joiners=joiners, on=on, band=band, order=order,
                controller=controller, spill=spill, seed=int(args.get("seed", 0)),
                batch_size=int(args.get("batch_size", 50_000)),
                k=float(args["k"]) if "k" in args else None,
                progress=bool(_value(args.get("progress", "true"))))
    if opts["batch_size"] < 1:
        raise UsageError("batch_size must be >= 1")
    if "budget" in args:
        opts["memory_budget_tuples"] = int(args["budget"])
    for key in ("partitions", "checkpoint_every"):
        if key in args:
            opts[key] = int(args[key])
    if "migration_rate" in args:
        opts["migration_rate"] = float(args["migration_rate"])
    extra = {k: _value(v) for k, v in args.items() if k not in _ENGINE}
    import inspect

    params = inspect.signature(registry.get(op, "online").load()).parameters
    unknown = sorted(set(extra) - set(params))
    if unknown:
        raise UsageError(f"unknown parameters for {op}: {unknown}")
    opts.update(extra)
    return opts


def _print_batches(metrics) -> None:
    if metrics.empty:
        print("no micro-batches (empty input)")
        return
    g = metrics.groupby("batch").agg(
        epoch=("epoch", "last"), n=("n", "last"), m=("m", "last"), tuples=("tuples", "first"),
        r_seen=("r_seen", "first"), s_seen=("s_seen", "first"), outputs=("outputs", "sum"),
        max_stored=("r_stored", lambda x: int((x + metrics.loc[x.index, "s_stored"]).max())),
        migrated=("migrated", "sum"), modeled_cost=("modeled_cost", "max"),
        wall_s=("batch_wall_seconds", "first"))
    print(g.to_string())


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    try:
        args = parse(argv)
        opts = validate(args)
    except UsageError as e:
        print(f"error: {e}\n\nusage:\n{USAGE}", file=sys.stderr)
        return 2
    from experiments.spark_session import get_spark
    from joins.online import run_stream

    spark = get_spark(_SPARK[args.get("spark", "local")])
    res = run_stream(spark, args["r"], args["s"], output=args.get("out"), **opts)
    _print_batches(res.metrics)
    for k, v in res.summary.items():
        if k != "cost_model":
            print(f"{k}: {v}")
    if "metrics" in args:
        Path(args["metrics"]).parent.mkdir(parents=True, exist_ok=True)
        res.metrics.to_parquet(args["metrics"], index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
