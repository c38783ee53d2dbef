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
from joins.cli_common import (
    CliError,
    check_key,
    parquet_rows,
    parquet_schema,
    spark_preset_or_usage_error,
)

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


def _operator_params(operator, extra: dict) -> dict:
    """The operator's own parameters (``name=`` or ``param.name=``), each known to its
    declaration (a misspelling gets a guess) and typed as it declares."""
    valid = sorted(operator.params)
    for name in sorted(set(extra) - set(valid)):
        bare = name.removeprefix("param.")
        guess = bare if bare in valid else closest(bare, [*valid, *_ENGINE])
        hint = f"; did you mean {guess}=?" if guess else ""
        raise UsageError(f"unknown parameter {name}= for {operator.name}{hint} (its parameters: "
                         f"{', '.join(valid) or 'none'}; engine options: "
                         f"{', '.join(sorted(_ENGINE))})")
    return {k: _typed(extra, k, operator.params[k].kind) for k in extra}


def _dry_run(spec, rows: list[int]) -> None:
    """The operator's policy built once for the inputs' sizes (its own parameter checks, e.g.
    DYNAMIC's eps, warmup, decide_on) and checked against what its layout and program
    declare: the same checks as ``run_stream``'s, all before Spark starts."""
    try:  # the run takes the key range from the inputs (ContRand, band)
        policy = spec.policy(rows[0], sum(rows[1:]), key_range=(0.0, 1.0))
    except (ValueError, TypeError) as e:
        raise UsageError(f"{spec.operator_name}: {e}") from e
    try:
        spec.checked(policy)
    except ValueError as e:
        raise UsageError(str(e)) from e


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

    kind = _type_kind
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
        _check_time_type(schemas, time)


def _type_kind(t) -> str:
    """What a key's type compares as: "number", "string", or the type itself."""
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or \
            pa.types.is_decimal(t):
        return "number"
    return "string" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)


def _check_time_type(schemas: dict, time: str) -> None:
    """Event times order arrivals and cut ticks: numbers (not booleans) or timestamps."""
    import pyarrow as pa

    for nm, schema in schemas.items():
        t = schema.field(time).type
        if not (_type_kind(t) == "number" and not pa.types.is_boolean(t)) and \
                not pa.types.is_timestamp(t):
            raise UsageError(f"time column {time!r} of {nm} is {t}, not numeric or a "
                             "timestamp")


def check_time_column(paths: dict[str, str], time: str) -> None:
    """``time=`` names a numeric or timestamp column without nulls in every input (name ->
    path): checked before Spark starts, for ``stream`` and ``compare`` alike."""
    schemas = {nm: parquet_schema(path) for nm, path in paths.items()}
    for nm, schema in schemas.items():
        if time not in schema.names:
            raise UsageError(f"time column {time!r} is not in {nm}={paths[nm]} (columns: "
                             f"{', '.join(schema.names)})")
    _check_time_type(schemas, time)
    _check_time_nulls(paths, time)


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


def _operator(args: dict):
    """operator= (a declared online operator) and joiners= (an integer)."""
    from joins import registry
    from joins.online import operators

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
    return operators.declared()[op], joiners


def _band(args: dict) -> float | None:
    if args.get("band") in (None, "", "none"):
        return None
    try:
        return float(args["band"])
    except ValueError as e:
        raise UsageError(f"band must be a number, got {args['band']!r}") from e


def _check_files(args: dict, paths: dict[str, str], band: float | None) -> None:
    """The inputs' files: their join and time columns, key types, event times; and the
    outputs (new and writable)."""
    from joins.online.source import JoinGraph, SourceError

    on = args.get("on", "key")
    try:
        graph = JoinGraph.parse(list(paths), on)
    except SourceError as e:
        raise UsageError(str(e)) from e
    schemas = {name: parquet_schema(path) for name, path in paths.items()}
    _check_outputs(args, paths)
    time = args.get("time") or None
    if "inputs" not in args and graph.shared and "." not in on:  # the batch CLI's messages
        check_key({"r": schemas["R"], "s": schemas["S"]}, on)
    _check_graph(schemas, graph, band, time)
    if time:
        _check_time_nulls(paths, time)


def _tuple_bytes(args: dict, inputs: int) -> tuple[float, ...] | None:
    if "tuple_bytes" not in args:
        return None
    try:
        tuple_bytes = tuple(float(v) for v in args["tuple_bytes"].split(","))
    except ValueError as e:
        raise UsageError("tuple_bytes takes one size per input, e.g. tuple_bytes=48,96") from e
    if len(tuple_bytes) != inputs or min(tuple_bytes) < 0:
        raise UsageError(f"tuple_bytes takes one size >= 0 per input ({inputs} inputs), got "
                         f"{args['tuple_bytes']!r}")
    return tuple_bytes


# the engine options typed as given (CLI key -> the spec's field, its type)
_TYPED = (("seed", "seed", int), ("batch_size", "batch_size", int), ("k", "k", float),
          ("progress", "progress", bool), ("delay", "delay", float),
          ("budget", "memory_budget_tuples", int), ("partitions", "partitions", int),
          ("checkpoint_every", "checkpoint_every", int), ("step_tuples", "step_tuples", int),
          ("migration_rate", "migration_rate", float))


def _options(args: dict, paths: dict[str, str], rows: list[int]) -> dict:
    """The engine options, typed (a value that is not of its type is a usage error); their
    ranges are the spec's to check."""
    from datagen.orders import names as order_names

    order = args.get("order", "random")
    if order not in order_names():
        raise UsageError(f"unknown order {order!r}; valid: {', '.join(order_names())}")
    opts = dict(on=args.get("on", "key"), order=order, time=args.get("time") or None,
                controller=args.get("controller", "exact"), spill=args.get("spill", "charge"),
                tick=_positive(args, "tick", True), window=_positive(args, "window", False),
                archive=_positive(args, "archive", True),
                tuple_bytes=_tuple_bytes(args, len(paths)), output=args.get("out"))
    opts.update({name: _typed(args, key, tp) for key, name, tp in _TYPED if key in args})
    if "rescale" in args:
        opts["rescale"] = _rescale(args["rescale"], sum(rows))
    if "checkpoint_dir" in args:
        opts["checkpoint_dir"] = _checkpoint_dir(args["checkpoint_dir"], args, paths)
    return opts


def validate(args: dict, cost=None):
    """Check everything that can be checked without Spark: returns the run's
    :class:`~joins.online.spec.StreamSpec` (its inputs the Parquet paths), built (and so
    validated against the operator's declaration) and dry-run (:func:`_dry_run`)."""
    from joins.online.spec import StreamSpec

    operator, joiners = _operator(args)
    paths = _inputs(args)
    band = _band(args)
    _check_files(args, paths, band)
    rows = [parquet_rows(path) for path in paths.values()]
    opts = _options(args, paths, rows)
    spark_preset_or_usage_error(args.get("spark", "local"))  # fails before Spark starts
    # an operator's parameter as name= or, as describe and compare write it, param.name=
    extra = {k.removeprefix("param."): v for k, v in args.items() if k not in _ENGINE}
    params = _operator_params(operator, extra)
    data = dict(inputs=paths) if "inputs" in args else dict(r=paths["R"], s=paths["S"])
    try:
        spec = StreamSpec(operator.name, joiners, band=band, cost=cost, params=params,
                          **data, **opts)
    except ValueError as e:
        raise UsageError(str(e)) from e
    _dry_run(spec, rows)
    return spec


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
        calibration, cost = calibrated_cost()
        spec = validate(args, cost)
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from joins.online import run_stream
    from joins.online.engine import StreamFailure
    from runtime.spark_session import get_spark

    spark = get_spark(**spark_preset_or_usage_error(args.get("spark", "local")))
    try:
        res = run_stream(spark, spec)
    except StreamFailure as e:  # e.g. an executor lost with local checkpoints
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.get("out"):
        mark_output_folder(args["out"], "python -m joins stream", operator=args["operator"],
                           on=spec.on, **dict(zip(spec.names, spec.data, strict=True)))
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
