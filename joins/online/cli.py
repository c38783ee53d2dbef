"""``python -m joins stream key=value ...``: run an online operator on the user's Parquet files.

    python -m joins stream operator=NAME r=R.parquet s=S.parquet on=key|a,b|x=y joiners=16 \\
        order=random|fluct k=4 [band=W] [controller=exact|sampled] out=OUT.parquet \\
        [metrics=METRICS.parquet] [batch_size=50000] [budget=TUPLES] [spill=charge|disk|evict] \\
        [seed=0] [partitions=P] [spark=local|local_cluster] [NAME's parameters: param=value] \\
        [time=COLUMN [tick=T] [window=W]] [rescale=AT:UNITS[,AT:UNITS...]] [force=true] \\
        [checkpoint_every=10] [checkpoint_dir=FOLDER] [step_tuples=N]
    python -m joins stream operator=NAME inputs=A=a.parquet,B=b.parquet,C=c.parquet \\
        on=k|a,b|A.x=B.x,B.y=C.y [time=ts tick=5000] joiners=4 out=OUT.parquet ...

``python -m joins list`` names the operators (an n-way one joins ``inputs=`` of any number);
``python -m joins describe NAME`` gives an operator's paper and parameters.

on= is one column every input has, a composite key (a,b: columns every input has; x=y,a=b: R's
and S's columns pair by pair; a null in any part matches nothing), or edges between inputs.

Bad input (missing file or column, key types that differ, a band on non-numeric keys, unknown
operator or order, J < 1, a parameter the operator or the order rejects, an unknown parameter,
an existing or unwritable out= or metrics=, ...) is reported in one line with exit code 2
before Spark starts. An existing output is never overwritten: ``force=true`` replaces only
outputs this tool wrote (an out= folder holding its ``_joins_output.json``, a metrics= file it
marked). Output columns are R's prefixed ``l_`` and S's ``r_`` (``<name>_`` for ``inputs=``),
and ``phase`` (normal, cleanup, or a program's own). ``rescale=`` changes a static operator's units at the given
arrival numbers (a joiner count, or ``R+S`` units for a join-biclique), to drive elasticity by
hand. ``checkpoint_dir=`` (a folder every executor can reach) checkpoints the state there
every ``checkpoint_every`` micro-batches, so the run recovers exactly from the loss of an
executor; without it such a loss stops the run with one error line (exit code 1).
``step_tuples=N`` lets micro-batches where no decision can fall (a static operator's) share one
Spark step up to N tuples: the same rows per micro-batch, fewer steps. Modeled cost uses the machine's calibration (``make calibrate``, else the committed
default), printed as ``calibration``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from joins.cli_checks import (
    check_distinct,
    check_output_file,
    check_output_folder,
    closest,
    mark_output_folder,
    output_path,
    write_marked_parquet,
)
from joins.cli_common import CliError, check_key, parquet_schema, spark_preset_or_usage_error

USAGE = "\n\n".join(__doc__.split("\n\n")[1:3])
_ENGINE = {"operator", "r", "s", "on", "band", "joiners", "order", "k", "controller", "out",
           "metrics", "batch_size", "budget", "spill", "seed", "partitions", "spark",
           "progress", "checkpoint_every", "migration_rate", "inputs", "time", "tick", "window",
           "rescale", "force", "checkpoint_dir", "explain", "archive", "delay", "tuple_bytes",
           "step_tuples"}


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


def _policy_check(op: str, joiners: int, opts: dict, extra: dict, n_r: int, n_s: int) -> dict:
    """The operator's own parameters, typed by its declaration and checked by building its
    policy once (e.g. DYNAMIC's eps, warmup, decide_on), all without Spark."""
    from joins.online import operators

    operator = operators.declared()[op]
    valid = sorted(operator.params)
    for name in sorted(set(extra) - set(valid)):
        bare = name.removeprefix("param.")
        guess = bare if bare in valid else closest(bare, [*valid, *_ENGINE])
        hint = f"; did you mean {guess}=?" if guess else ""
        raise UsageError(f"unknown parameter {name}= for {op}{hint} (its parameters: "
                         f"{', '.join(valid) or 'none'}; engine options: "
                         f"{', '.join(sorted(_ENGINE))})")
    typed = {k: _typed(extra, k, operator.params[k].kind) for k in extra}
    facts = dict(n_r=n_r, n_s=n_s, seed=opts["seed"], controller=opts["controller"],
                 band=opts["band"], graph=opts["graph"], tuple_bytes=opts.get("tuple_bytes"),
                 full_history=opts.get("window") is None,
                 key_range=(0.0, 1.0))  # the run takes it from the inputs (ContRand, band)
    try:
        policy = operator(joiners, **facts, **typed)
    except (ValueError, TypeError) as e:
        raise UsageError(f"{op}: {e}") from e
    from joins.online import programs
    from joins.online.checks import check_run

    try:  # the same checks as run_stream's, before Spark starts
        program = programs.load(getattr(policy, "program", "joiner"))(
            **getattr(policy, "program_params", {}))
        check_run(policy, program, operator=op, inputs=opts["inputs"],
                  shared=opts["graph"].shared, spill=opts["spill"],
                  rescale=opts.get("rescale"))
    except ValueError as e:
        raise UsageError(str(e)) from e
    return typed


def _check_outputs(args: dict, paths: dict[str, str]) -> None:
    """out= (a Parquet folder) and metrics= (a Parquet file): new and writable, or replaced
    with force=true only if this tool wrote them; neither overlaps an input or the other."""
    force = _typed(args, "force", bool, False)
    if "out" in args:
        check_output_folder(output_path("out", args["out"]), force)
    if "metrics" in args:
        check_output_file(output_path("metrics", args["metrics"]), force, what="metrics")
    check_distinct({"out": args.get("out"), "metrics": args.get("metrics")}, paths)


def calibrated_cost():
    """The online cost model of the machine's calibration (the one the figures use)."""
    from joins.calibrated import cost_model
    from runtime.cost_model import load_calibration

    cal = load_calibration()
    try:
        return cal.id, cost_model(cal)
    except ValueError as e:
        raise UsageError(str(e)) from e


def _inputs(args: dict) -> dict[str, str]:
    """``r=``/``s=`` (two inputs R and S) or ``inputs=A=a.parquet,B=b.parquet,...``."""
    if "inputs" in args:
        if "r" in args or "s" in args:
            raise UsageError("give r= and s=, or inputs=, not both")
        out: dict[str, str] = {}
        for item in args["inputs"].split(","):
            name, eq, path = item.partition("=")
            if not eq or not name or not path:
                raise UsageError(f"inputs: expected NAME=PATH, got {item!r}")
            if name in out:
                raise UsageError(f"inputs: {name!r} given twice")
            out[name] = path
        if len(out) < 2:
            raise UsageError("inputs: a join needs at least two inputs")
        return out
    for req in ("r", "s"):
        if req not in args:
            raise UsageError(f"missing {req}= (or inputs=)")
    return {"R": args["r"], "S": args["s"]}


def _check_graph(schemas: dict, graph, band: float | None, time: str | None) -> None:
    """Every join column and the time column exist; compared columns have one kind of type
    (numbers with numbers, strings with strings); a band needs numbers; time is numeric or a
    timestamp."""
    import pyarrow as pa

    def kind(t) -> str:
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or \
                pa.types.is_decimal(t):
            return "number"
        return "string" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)

    names = graph.names
    for i in range(len(names)):
        for c in graph.columns(i) + ([time] if time else []):
            if c not in schemas[names[i]].names:
                raise UsageError(f"{names[i]} has no column {c!r}; columns: "
                                 f"{schemas[names[i]].names}")
    if graph.composite:
        if band is not None:
            raise UsageError("a band join takes one key column, not a composite key")
        for j, first in enumerate(graph.composite[0]):
            ta = schemas[names[0]].field(first).type
            for i in range(1, len(names)):
                other = graph.composite[i][j]
                tb = schemas[names[i]].field(other).type
                if kind(ta) != kind(tb) and not (pa.types.is_null(ta) or pa.types.is_null(tb)):
                    raise UsageError(f"{names[0]}.{first} ({ta}) and {names[i]}.{other} ({tb}) "
                                     "have different key types")
    for a, sa, b, sb in ([] if graph.composite else graph.edges):
        ta = schemas[names[a]].field(graph.slots[a][sa]).type
        tb = schemas[names[b]].field(graph.slots[b][sb]).type
        if kind(ta) != kind(tb) and not (pa.types.is_null(ta) or pa.types.is_null(tb)):
            raise UsageError(f"{names[a]}.{graph.slots[a][sa]} ({ta}) and "
                             f"{names[b]}.{graph.slots[b][sb]} ({tb}) have different key types")
        if band is not None and kind(ta) != "number":
            raise UsageError(f"a band join needs numeric keys; {graph.slots[a][sa]!r} is {ta}")
    if time:
        for nm in names:
            t = schemas[nm].field(time).type
            if not (kind(t) == "number" and not pa.types.is_boolean(t)) and \
                    not pa.types.is_timestamp(t):
                raise UsageError(f"time column {time!r} of {nm} is {t}, not numeric or a "
                                 "timestamp")


def _check_time_nulls(paths: dict[str, str], time: str) -> None:
    """Every arrival needs its event time: a null (or NaN) one is refused here, before Spark
    starts (reads the time column alone)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    for nm, path in paths.items():
        column = ds.dataset(path, format="parquet").to_table(columns=[time]).column(time)
        nulls = column.null_count
        if pa.types.is_floating(column.type):
            nulls += int(pc.sum(pc.is_nan(column)).as_py() or 0)
        if nulls:
            raise UsageError(f"time column {time!r} of {nm} has {nulls} null or NaN values; "
                             "every arrival needs its event time")


def _rescale(value: str, total: int) -> list[tuple[int, tuple[int, ...]]]:
    """``AT:UNITS[,AT:UNITS...]``: a unit count, or R+S units for a join-biclique (the layout
    says which it takes: :func:`joins.online.checks.check_schedule`)."""
    out = []
    for item in value.split(","):
        at, colon, units = item.partition(":")
        try:
            at_i = int(at)
            u = tuple(int(x) for x in units.split("+"))
        except ValueError as e:
            raise UsageError(f"rescale: expected AT:UNITS (e.g. 5000:8, or 5000:6+4 for "
                             f"a join-biclique), got {item!r}") from e
        if not colon or not u:
            raise UsageError(f"rescale: expected AT:UNITS, got {item!r}")
        if at_i < 0:
            raise UsageError(f"rescale point {at_i} must be >= 0 (an arrival number)")
        if at_i >= total:
            raise UsageError(f"rescale point {at_i} is past the end of the stream "
                             f"({total} tuples)")
        if min(u) < 1:
            raise UsageError(f"rescale: units must be >= 1, got {units!r}")
        out.append((at_i, u))
    return out


def _checkpoint_dir(value: str, args: dict, paths: dict[str, str]) -> str:
    """``checkpoint_dir=``: a folder this process can write in (created if missing), not inside
    out= or an input. A URI of another file system (``hdfs://...``) is left to Spark."""
    import re

    from joins.cli_checks import probe_writable

    output_path("checkpoint_dir", value)
    scheme = re.match(r"([A-Za-z][\w+.-]*)://", value)
    if scheme and scheme.group(1).lower() != "file":
        return value
    folder = Path(value[len("file://"):] if scheme else value)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"checkpoint_dir={value} is not a folder")
    inside = {"out": args.get("out"), **paths}
    for name, other in inside.items():
        if other and folder.resolve().is_relative_to(Path(other).resolve()):
            raise UsageError(f"checkpoint_dir={value} lies inside {name}={other}; choose "
                             "another folder")
    try:
        probe_writable(folder / ".checkpoint-probe")
    except CliError as e:
        raise UsageError(f"checkpoint_dir={value}: {e}") from None
    return value


def _positive(args: dict, name: str, strict: bool) -> float | None:
    value = _typed(args, name, float)
    if value is not None and not (value > 0 if strict else value >= 0) or \
            value is not None and value == float("inf"):
        raise UsageError(f"{name} must be {'>' if strict else '>='} 0 and finite, got {value}")
    return value


def validate(args: dict) -> dict:
    """Check everything that can be checked without Spark; returns typed options."""
    import pyarrow.dataset as ds

    from datagen.errors import GeneratorError
    from datagen.orders import names as order_names
    from joins import registry
    from joins.online import operators
    from joins.online.source import JoinGraph, SourceError, check_order

    for req in ("operator", "joiners"):
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
    operator = operators.declared()[op]
    paths = _inputs(args)
    if operator.inputs is not None and len(paths) != operator.inputs:
        n_way = [name for name in registry.names("online") if operators.declared()[name].n_way]
        raise UsageError(f"{op} joins {operator.inputs} inputs; operator="
                         f"{', '.join(n_way[:-1])} or {n_way[-1]} joins {len(paths)}")
    try:
        graph = JoinGraph.parse(list(paths), on)
    except SourceError as e:
        raise UsageError(str(e)) from e
    schemas = {name: parquet_schema(path) for name, path in paths.items()}
    _check_outputs(args, paths)
    band = None
    if args.get("band") not in (None, "", "none"):
        try:
            band = float(args["band"])
        except ValueError as e:
            raise UsageError(f"band must be a number, got {args['band']!r}") from e
        if not band >= 0:  # also refuses nan
            raise UsageError(f"band must be >= 0, got {band}")
        if not operator.band:
            raise UsageError(f"{op} is an equi-join operator; drop band= or pick one that "
                             "runs band joins (python -m joins describe)")
    time = args.get("time") or None
    if "inputs" not in args and graph.shared and "." not in on:  # the batch CLI's messages
        check_key({"r": schemas["R"], "s": schemas["S"]}, on)
    _check_graph(schemas, graph, band, time)
    if time:
        _check_time_nulls(paths, time)
    tick, window = _positive(args, "tick", True), _positive(args, "window", False)
    if (tick is not None or window is not None) and time is None:
        raise UsageError("tick= and window= need an event-time column: time=COLUMN")
    archive, delay = _positive(args, "archive", True), _typed(args, "delay", float, 0.0)
    if archive is not None and window is None:
        raise UsageError("archive= (the chained index's period) needs window=")
    if not delay >= 0:
        raise UsageError(f"delay must be >= 0, got {delay}")
    tuple_bytes = None
    if "tuple_bytes" in args:
        try:
            tuple_bytes = tuple(float(v) for v in args["tuple_bytes"].split(","))
        except ValueError as e:
            raise UsageError("tuple_bytes takes one size per input, e.g. tuple_bytes=48,96") \
                from e
        if len(tuple_bytes) != len(paths) or min(tuple_bytes) < 0:
            raise UsageError(f"tuple_bytes takes one size >= 0 per input ({len(paths)} "
                             f"inputs), got {args['tuple_bytes']!r}")
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
                k=_typed(args, "k", float), progress=_typed(args, "progress", bool, True),
                time=time, tick=tick, window=window, archive=archive, delay=delay,
                tuple_bytes=tuple_bytes)
    if opts["batch_size"] < 1:
        raise UsageError("batch_size must be >= 1")
    # budget: tuples per worker; checkpoint_every=0 never cuts the lineage
    for key, name, low in (("budget", "memory_budget_tuples", 0), ("partitions", "partitions", 1),
                           ("checkpoint_every", "checkpoint_every", 0),
                           ("step_tuples", "step_tuples", 1)):
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
    rows = [ds.dataset(path, format="parquet").count_rows() for path in paths.values()]
    if "rescale" in args:
        opts["rescale"] = _rescale(args["rescale"], sum(rows))
    if "checkpoint_dir" in args:
        opts["checkpoint_dir"] = _checkpoint_dir(args["checkpoint_dir"], args, paths)
    # an operator's parameter as name= or, as describe and compare write it, param.name=
    extra = {k.removeprefix("param."): v for k, v in args.items() if k not in _ENGINE}
    opts.update(_policy_check(op, joiners, {**opts, "graph": graph, "inputs": len(paths)},
                              extra, rows[0], sum(rows[1:])))
    opts["paths"] = paths
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
    print(g.to_string(float_format=lambda v: f"{v:.4g}"))


# the run's settings, printed on one line; the rest of the summary are results with units
SETTINGS = ("operator", "on", "joiners", "partitions", "inputs", "program", "order", "k",
            "seed", "controller", "batch_size", "tick", "window", "archive", "delay", "band",
            "spill",
            "memory_budget_tuples", "final_mapping", "status")
# kept in the summary for the figures, but not printed: the same number under another name
# (ilf_final is final_avg_ilf; migration_planned equals migrated_tuples, checked by the run)
# or internals (the cost model's constants, the calibration's internal id)
HIDDEN = ("cost_model", "calibration_id", "ilf_final", "migration_planned", "ilf_ratio_from_tuple")


def _print_summary(summary: dict, calibration: str, explain: bool = False) -> None:
    from joins.summary import lines

    shown = {k: v for k, v in summary.items() if v is not None and k not in HIDDEN}
    settings = [f"{k}={v}" for k, v in shown.items() if k in SETTINGS]
    print("run: " + " ".join(settings))
    results = {k: v for k, v in shown.items() if k not in SETTINGS}
    fixed = summary.get("cost_model", {}).get("fixed_per_batch", 0.0) * summary.get("batches", 0)
    if fixed and "modeled_time" in results:  # the engine's per-micro-batch constant, apart
        at = list(results).index("modeled_time") + 1
        items = list(results.items())
        results = dict([*items[:at], ("modeled_fixed_per_batch", fixed), *items[at:]])
    print("\n".join(lines(results, explain)))
    print(f"  calibration {calibration} (modeled times; explain=true gives each line's meaning)")


def main(argv: list[str]) -> int:
    if not argv or argv[0] == "help" or any(a in ("-h", "--help") for a in argv):
        print(f"usage:\n{USAGE}")
        return 0 if argv else 2
    try:
        args = parse(argv)
        opts = validate(args)
        calibration, cost = calibrated_cost()
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from joins.online import run_stream
    from joins.online.engine import StreamFailure
    from runtime.spark_session import get_spark

    spark = get_spark(**spark_preset_or_usage_error(args.get("spark", "local")))
    paths = opts.pop("paths")
    data = dict(r=args["r"], s=args["s"]) if "inputs" not in args else dict(inputs=paths)
    try:
        res = run_stream(spark, output=args.get("out"), cost=cost, **data, **opts)
    except StreamFailure as e:  # e.g. an executor lost with local checkpoints
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.get("out"):
        mark_output_folder(args["out"], "python -m joins stream", operator=args["operator"],
                           on=opts["on"], **paths)
    _print_batches(res.metrics)
    _print_summary(res.summary, calibration, explain=_typed(args, "explain", bool, False))
    if "metrics" in args:
        Path(args["metrics"]).parent.mkdir(parents=True, exist_ok=True)
        write_marked_parquet(res.metrics.assign(calibration=calibration,
                                                calibration_id=cost.calibration_id),
                             args["metrics"], "python -m joins stream", operator=args["operator"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
