"""``python -m joins stream key=value ...``: run an online operator on the user's Parquet files.

    python -m joins stream operator=dynamic r=R.parquet s=S.parquet on=key joiners=16 \\
        order=random|fluct k=4 [band=W] [controller=exact|sampled] out=OUT.parquet \\
        [metrics=METRICS.parquet] [batch_size=50000] [budget=TUPLES] [spill=charge|disk|evict] \\
        [seed=0] [partitions=P] [spark=local|local_cluster] [eps=.. warmup=.. (operator)]

Bad input (missing file or column, key types that differ, a band on non-numeric keys, unknown
operator or order, J < 1, a parameter the operator or the order rejects, ...) is reported with
a clear message and exit code 2 before Spark starts. Modeled cost uses the machine's
calibration (``make calibrate``, else the committed default), printed as ``calibration``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from joins.cli_common import CliError, check_key, parquet_schema, spark_preset_or_usage_error

USAGE = __doc__.split("\n\n")[1]
_ENGINE = {"operator", "r", "s", "on", "band", "joiners", "order", "k", "controller", "out",
           "metrics", "batch_size", "budget", "spill", "seed", "partitions", "spark",
           "progress", "checkpoint_every", "migration_rate"}


class UsageError(CliError):
    pass


def parse(argv: list[str]) -> dict:
    args: dict = {}
    for a in argv:
        key, eq, val = a.partition("=")
        if not eq or not key:
            raise UsageError(f"expected key=value, got {a!r}")
        args[key] = val
    return args


def _typed(args: dict, name: str, tp, default=None):
    """``args[name]`` converted to ``tp`` (``1e5`` is an int), a usage error if it is not."""
    from datagen.errors import GeneratorError
    from datagen.params import coerce

    if name not in args:
        return default
    try:
        return coerce(name, args[name], tp)
    except GeneratorError as e:
        raise UsageError(str(e)) from e


def _check_keys(schemas: dict, on: str, band: float | None) -> None:
    """Same key type on both sides (as the batch CLI requires: the engine would otherwise
    factorise an int key against a string key); a band join needs numeric keys."""
    import pyarrow as pa

    check_key(schemas, on)
    t = schemas["r"].field(on).type
    numeric = (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
               or pa.types.is_null(t))
    if band is not None and not numeric:
        raise UsageError(f"a band join needs numeric keys; {on!r} is {t}")


def _policy_check(op: str, joiners: int, opts: dict, extra: dict, n_r: int, n_s: int) -> dict:
    """The operator's own parameters, typed by its signature and checked by building its
    policy once (e.g. DYNAMIC's eps, warmup, decide_on), all without Spark."""
    import typing

    from joins import registry

    factory = registry.get(op, "online").load()
    hints = typing.get_type_hints(factory)
    unknown = sorted(set(extra) - set(inspect.signature(factory).parameters))
    if unknown:
        raise UsageError(f"unknown parameters for {op}: {unknown}")
    typed = {k: _typed(extra, k, hints.get(k, typing.Any)) for k in extra}
    try:
        factory(joiners, n_r=n_r, n_s=n_s, seed=opts["seed"], controller=opts["controller"],
                band=opts["band"], **typed)
    except (ValueError, TypeError) as e:
        raise UsageError(f"{op}: {e}") from e
    return typed


def calibrated_cost():
    """The online cost model of the machine's calibration (the one the figures use)."""
    from joins.calibrated import cost_model
    from runtime.cost_model import load_calibration

    cal = load_calibration()
    try:
        return cal.id, cost_model(cal)
    except ValueError as e:
        raise UsageError(str(e)) from e


def validate(args: dict) -> dict:
    """Check everything that can be checked without Spark; returns typed options."""
    import pyarrow.dataset as ds

    from datagen.errors import GeneratorError
    from datagen.orders import names as order_names
    from joins import registry
    from joins.online.source import check_order

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
    schemas = {side: parquet_schema(args[side]) for side in ("r", "s")}
    band = None
    if args.get("band") not in (None, "", "none"):
        try:
            band = float(args["band"])
        except ValueError as e:
            raise UsageError(f"band must be a number, got {args['band']!r}") from e
        if not band >= 0:  # also refuses nan
            raise UsageError(f"band must be >= 0, got {band}")
        if op == "shj":
            raise UsageError("shj is an equi-join operator; drop band= or pick a grid operator")
    _check_keys(schemas, on, band)
    order = args.get("order", "random")
    if order not in order_names():
        raise UsageError(f"unknown order {order!r}; valid: {', '.join(order_names())}")
    controller = args.get("controller", "exact")
    if controller not in ("exact", "sampled"):
        raise UsageError(f"controller must be exact or sampled, got {controller!r}")
    spill = args.get("spill", "charge")
    if spill not in ("charge", "disk", "evict"):
        raise UsageError(f"spill must be charge, disk or evict, got {spill!r}")
    spark_preset_or_usage_error(args.get("spark", "local"))  # fails before Spark starts
    opts = dict(operator=op, joiners=joiners, on=on, band=band, order=order,
                controller=controller, spill=spill, seed=_typed(args, "seed", int, 0),
                batch_size=_typed(args, "batch_size", int, 50_000),
                k=_typed(args, "k", float), progress=_typed(args, "progress", bool, True))
    if opts["batch_size"] < 1:
        raise UsageError("batch_size must be >= 1")
    # budget: tuples per worker; checkpoint_every=0 never cuts the lineage
    for key, name, low in (("budget", "memory_budget_tuples", 0), ("partitions", "partitions", 1),
                           ("checkpoint_every", "checkpoint_every", 0)):
        value = _typed(args, key, int)
        if value is not None and value < low:
            raise UsageError(f"{key} must be >= {low}, got {value}")
        if value is not None:
            opts[name] = value
    rate = _typed(args, "migration_rate", float)
    if rate is not None and not 0 < rate < float("inf"):  # also refuses nan
        raise UsageError(f"migration_rate must be > 0 and finite, got {rate}")
    if rate is not None:
        opts["migration_rate"] = rate
    try:
        check_order(order, opts["seed"], opts["k"])
    except GeneratorError as e:
        raise UsageError(f"order {order}: {e}") from e
    rows = [ds.dataset(args[side], format="parquet").count_rows() for side in ("r", "s")]
    extra = {k: v for k, v in args.items() if k not in _ENGINE}
    opts.update(_policy_check(op, joiners, opts, extra, *rows))
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
        calibration, cost = calibrated_cost()
    except CliError as e:
        print(f"error: {e}\n\nusage:\n{USAGE}", file=sys.stderr)
        return 2
    from joins.online import run_stream
    from runtime.spark_session import get_spark

    spark = get_spark(**spark_preset_or_usage_error(args.get("spark", "local")))
    res = run_stream(spark, args["r"], args["s"], output=args.get("out"), cost=cost, **opts)
    _print_batches(res.metrics)
    print(f"calibration: {calibration}")
    for k, v in res.summary.items():
        if k != "cost_model":
            print(f"{k}: {v}")
    if "metrics" in args:
        Path(args["metrics"]).parent.mkdir(parents=True, exist_ok=True)
        res.metrics.assign(calibration=calibration,
                           calibration_id=cost.calibration_id).to_parquet(args["metrics"],
                                                                          index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
