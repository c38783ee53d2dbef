"""Run any registered join on your own Parquet files.

    python -m joins list
    python -m joins describe ALGORITHM
    python -m joins compare algorithms=a,b,c left=A.parquet right=B.parquet on=key how=inner \
        [executors=E] [partitions=P] [check=true] [out=FOLDER] [spark=local] [param.<name>=value]
    python -m joins compare operators=shj,dynamic,diner r=R.parquet s=S.parquet on=key \
        joiners=16 [time=COLUMN tick=T] [memory=TUPLES] [resources=equal_total] \
        [batch_size=N] [order=random] [seed=0] [out=FOLDER] [param.<name>=value]
    python -m joins run algorithm=am_join left=A.parquet right=B.parquet on=key how=left \
        out=OUT.parquet [executors=E] [partitions=P] [spark=local] [param.<name>=value] \
        [force=true]
    python -m joins stream operator=dynamic r=R.parquet s=S.parquet on=key joiners=J ...

Inputs are checked (files, key column, types, algorithm, join type, parameter names, a new and
writable output) before Spark starts. An existing output is never overwritten; ``force=true``
replaces only an output this tool wrote (marked by ``_joins_output.json`` in its folder).
``python -m joins COMMAND --help`` shows one command's usage.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from joins.cli_checks import (
    check_distinct,
    check_output_file,
    check_output_folder,
    check_params,
    closest,
    mark_output_folder,
    output_path,
    write_marked_parquet,
)
from joins.cli_common import CliError, check_key, parquet_schema, spark_preset_or_usage_error
from joins.registry import UnknownAlgorithm, algorithms, get
from joins.summary import lines as summary_lines
from joins.summary import unit as summary_unit

USAGE = __doc__
RUN_USAGE = ("usage: python -m joins run algorithm=NAME left=A.parquet right=B.parquet on=key "
             "how=inner|left|right|full out=OUT.parquet [executors=4] [partitions=3*executors] "
             "[seed=0] [memory_budget_bytes=B] [record_bytes=N] [spark=local] [force=true] "
             "[metrics=M.parquet] [explain=true: each metric's meaning] "
             "[param.<name>=value]\n(python -m joins list names the algorithms)")


def parse_kv(argv: list[str]) -> dict[str, str]:
    opts = {}
    for a in argv:
        if "=" not in a:
            raise CliError(f"expected key=value, got {a!r}")
        k, v = a.split("=", 1)
        opts[k] = v
    return opts


def number_option(opts: dict[str, str], name: str, cast: type[int] | type[float],
                  default: float | None, minimum: float, above: bool = False) -> Any:
    """``opts[name]`` as a finite number >= ``minimum`` (> it when ``above``: a tick of 0
    would never advance), or ``default`` when absent.

    Checked here so a typo is one usage line, not a traceback after Spark has started.
    """
    if name not in opts:
        return default
    kind = "an integer" if cast is int else "a number"
    bound = f"{'>' if above else '>='} {minimum:g}"
    try:
        value = cast(opts[name])
    except ValueError:
        raise CliError(f"{name} must be {kind} {bound}, got {opts[name]!r}") from None
    if not math.isfinite(value) or value < minimum or (above and value == minimum):
        raise CliError(f"{name} must be {kind} {bound}, got {opts[name]!r}")
    return value


def flag_option(opts: dict[str, str], name: str) -> bool:
    """``opts[name]`` as true/false (absent: false)."""
    value = opts.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise CliError(f"{name} must be true or false, got {opts[name]!r}")
    return value == "true"


def cmd_list() -> int:
    for kind in ("batch", "online"):
        print(f"{kind}:")
        for name in sorted(n for n, a in algorithms().items() if a.kind == kind):
            a = algorithms()[name]
            print(f"  {name:<20} [{a.paper or 'no paper'}] joins: {', '.join(a.join_types)}  {a.description}")
    print("python -m joins describe ALGORITHM: its paper, join types and parameters")
    return 0


def _default_text(source: str | None) -> str:
    """A parameter's default as read from the code: the literal, or "derived" for an
    expression (its meaning says from what)."""
    import ast

    if source is None:
        return "required"
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return "derived"
    return "none" if value is None else str(value)


def cmd_describe(rest: list[str]) -> int:
    from joins.cli_checks import algorithm_param_defaults
    from joins.param_docs import PAPERS, meaning

    if len(rest) != 1 or "=" in rest[0]:
        raise CliError("usage: python -m joins describe ALGORITHM (python -m joins list names them)")
    try:
        algo = get(rest[0])
    except UnknownAlgorithm as exc:
        raise CliError(str(exc)) from None
    command = "run" if algo.kind == "batch" else "stream"
    print(f"{algo.name} ({algo.kind}): {algo.description}")
    paper = f"{algo.paper}: {PAPERS[algo.paper]}" if algo.paper else "none (in no paper)"
    print(f"  paper       {paper}")
    print(f"  join types  {', '.join(algo.join_types)}")
    params = algorithm_param_defaults(algo)
    if not params:
        print(f"  parameters  none (python -m joins {command} --help lists the run's options)")
        return 0
    spelling = "param.<name>=value" if command == "run" else "<name>=value or param.<name>=value"
    print(f"  parameters  (python -m joins {command} ... {spelling})")
    width = max(map(len, params))
    for name in sorted(params):
        print(f"    {name:<{width}}  default {_default_text(params[name]):<10} "
              f"{meaning(algo, name) or '(not documented)'}")
    return 0


def cmd_run(opts: dict[str, str]) -> int:
    required = ("algorithm", "left", "right", "out")
    known = set(required) | {"on", "how", "executors", "partitions", "spark", "seed",
                             "memory_budget_bytes", "record_bytes", "force", "metrics",
                             "explain"}
    unknown = [k for k in opts if k not in known and not k.startswith("param.")]
    if unknown:
        guess = closest(unknown[0], known)
        hint = f"; did you mean {guess}?" if guess else ""
        raise CliError(f"unknown option(s) {', '.join(unknown)}{hint} (valid: "
                       f"{', '.join(sorted(known))}, param.<name>)")
    missing = [k for k in required if k not in opts]
    if missing:
        raise CliError(f"missing {', '.join(missing)} (usage: python -m joins run "
                       "algorithm=NAME left=A.parquet right=B.parquet on=key how=inner out=OUT; "
                       "python -m joins run --help)")
    try:
        algo = get(opts["algorithm"], kind="batch")
    except UnknownAlgorithm as exc:
        raise CliError(str(exc)) from None
    how, on = opts.get("how", "inner"), opts.get("on", "key")
    if how not in algo.join_types:
        raise CliError(f"{algo.name} cannot do {how!r} joins; it does: {', '.join(algo.join_types)}")
    check_params(algo, [k.removeprefix("param.") for k in opts if k.startswith("param.")])
    check_key({"left": parquet_schema(opts["left"]), "right": parquet_schema(opts["right"])}, on)
    out = output_path("out", opts["out"])
    replace = check_output_folder(out, force=flag_option(opts, "force"))
    metrics = None
    if "metrics" in opts:
        metrics = output_path("metrics", opts["metrics"])
        check_output_file(metrics, force=flag_option(opts, "force"), what="metrics")
    check_distinct({"out": opts["out"], "metrics": opts.get("metrics")},
                   {"left": opts["left"], "right": opts["right"]})
    flag_option(opts, "explain")
    executors = number_option(opts, "executors", int, 4, minimum=1)
    partitions = number_option(opts, "partitions", int, 3 * executors, minimum=1)
    seed = number_option(opts, "seed", int, 0, minimum=0)
    budget = number_option(opts, "memory_budget_bytes", float, None, minimum=1)
    record_bytes = number_option(opts, "record_bytes", int, None, minimum=1)
    preset = spark_preset_or_usage_error(opts.get("spark", "local"))
    params = {k.removeprefix("param."): _number(v) for k, v in opts.items() if k.startswith("param.")}

    from joins.api import BatchContext
    from joins.batch.sql_conf import sql_conf
    from joins.keys import run_on_keys
    from runtime.cost_model import load_calibration, modeled_makespan
    from runtime.progress import StageProgress
    from runtime.spark_metrics import TaskMetricsCapture
    from runtime.spark_session import get_spark

    spark = get_spark(**preset)
    left = spark.read.parquet(opts["left"])
    right = spark.read.parquet(opts["right"])
    ctx = BatchContext(spark, executors=executors, partitions=partitions, seed=seed,
                       memory_budget_bytes=budget, record_bytes=record_bytes, params=params)
    t0 = time.perf_counter()
    with TaskMetricsCapture(spark) as cap, StageProgress(spark):
        result = run_on_keys(algo.load(), ctx, left, right, on, how)
        with sql_conf(spark, result.sql_conf):
            result.output.write.mode("overwrite" if replace else "errorifexists").parquet(str(out))
    wall = time.perf_counter() - t0
    mark_output_folder(out, "python -m joins run", algorithm=algo.name, how=how, on=on,
                       left=opts["left"], right=opts["right"], params=params)
    rows = spark.read.parquet(str(out)).count()
    calibration = load_calibration()
    values = {"output_rows": rows, "wall_s": wall,
              "modeled_s": modeled_makespan(cap.result.tasks, executors, calibration.batch),
              **cap.result.summary(), **result.extra}
    print(f"{algo.name} {how} join: {rows:,} rows -> {out} (a folder of Parquet part files)")
    print("\n".join(summary_lines(values, explain=flag_option(opts, "explain"))))
    print(f"  modeled on {executors} executors (executors= feeds the time model only; it does "
          f"not change how many Spark executors run), calibration {calibration.id}")
    if metrics is not None:
        write_marked_parquet(pd_frame([{**values, "algorithm": algo.name, "how": how, "on": on,
                                        "executors": executors,
                                        "calibration_id": calibration.id}]),
                             metrics, "python -m joins run", algorithm=algo.name,
                             units={k: summary_unit(k) for k in values})
        print(f"  metrics -> {metrics}")
    return 0


COMPARE_USAGE = ("usage: python -m joins compare algorithms=a,b,c left=A.parquet right=B.parquet "
                 "on=key how=inner|left|right|full [executors=4] [partitions=3*executors] "
                 "[seed=0] [check=true] [out=FOLDER] [spark=local] [force=true] "
                 "[param.<name>=value: given to each algorithm that reads it]\n"
                 "       python -m joins compare operators=a,b r=R.parquet s=S.parquet on=key "
                 "joiners=J [time=COLUMN [tick=T]] [memory=M] [resources=equal_total|"
                 "equal_per_unit] [batch_size=50000] [order=random] [seed=0] [out=FOLDER] "
                 "[spark=local] [force=true] [param.<name>=value]\n"
                 "       operators: measured as the arena measures them (joins/arena.py): "
                 "time= orders arrivals by that column, tick= cuts micro-batches every T of it; "
                 "memory= total tuples (default |R|+|S|): M/J per unit of a distributed "
                 "operator on J=joiners units, M on a single site's one unit (equal_per_unit: "
                 "M/J there too); every operator checked against DuckDB as a multiset; out= "
                 "gets compare.csv, compare_curve.csv and compare.png (results over modeled "
                 "time)")


def _compare_params(algos: list, given: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``param.<name>`` for each algorithm that reads it; a name none reads is an error."""
    from joins.cli_checks import algorithm_params

    reads = {a.name: set(algorithm_params(a)) for a in algos}
    for name in given:
        if not any(name in r for r in reads.values()):
            valid = sorted(set().union(*reads.values()))
            guess = closest(name, valid)
            raise CliError(f"no algorithm of {', '.join(reads)} reads param.{name}"
                           f"{f'; did you mean param.{guess}?' if guess else ''}")
    return {a: {k: v for k, v in given.items() if k in r} for a, r in reads.items()}


def _compare_names(opts: dict[str, str], option: str, kind: str) -> list:
    names = [n.strip() for n in opts[option].split(",") if n.strip()]
    if len(names) != len(set(names)) or not names:
        raise CliError(f"{option}= needs distinct names, got {opts[option]!r}")
    try:
        return [get(n, kind=kind) for n in names]
    except UnknownAlgorithm as exc:
        raise CliError(str(exc)) from None


def _compare_out(opts: dict[str, str], inputs: dict[str, str]):
    if "out" not in opts:
        return None
    out = output_path("out", opts["out"])
    check_output_folder(out, force=flag_option(opts, "force"))
    check_distinct({"out": opts["out"]}, inputs)
    return out


def _write_comparison(cmp, out, **info: Any) -> None:
    from joins.compare import draw

    if out.exists():  # force=true on an output this tool wrote
        import shutil

        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmp.table.assign(calibration_id=cmp.calibration_id).to_csv(out / "compare.csv", index=False)
    written = [out / "compare.csv", out / "compare.png"]
    if cmp.series is not None:  # the chart's points, to draw them otherwise
        cmp.series.to_csv(out / "compare_curve.csv", index=False)
        written.append(out / "compare_curve.csv")
    draw(cmp, out / "compare.png")
    mark_output_folder(out, "python -m joins compare", **info)
    print(f"table and chart -> {', '.join(map(str, written))}")


def _check_compare_options(opts: dict[str, str], required: tuple[str, ...],
                           known: set[str]) -> None:
    """Unknown options (with the closest valid one) and missing ones, as one usage line."""
    unknown = [k for k in opts if k not in known and not k.startswith("param.")]
    if unknown:
        guess = closest(unknown[0], known)
        raise CliError(f"unknown option(s) {', '.join(unknown)}"
                       f"{f'; did you mean {guess}?' if guess else ''} (python -m joins compare --help)")
    missing = [k for k in required if k not in opts]
    if missing:
        raise CliError(f"missing {', '.join(missing)} (python -m joins compare --help)")


# compare operators=...: the options besides the operators' param.<name>
STREAM_REQUIRED = ("operators", "r", "s", "joiners")
STREAM_OPTIONS = {"on", "batch_size", "order", "seed", "spark", "check", "out", "force", "time",
                  "tick", "memory", "resources"}


def _stream_run_options(opts: dict[str, str]) -> dict[str, Any]:
    """The arena's time model and resources as ``compare_stream`` takes them, each checked
    here so that a typo is one line before Spark starts: ``time=`` a column of both files,
    ``tick=`` > 0 (with ``time=``), ``memory=`` total tuples >= 1, ``resources=`` a rule."""
    from datagen.orders import names as order_names
    from joins.arena import RESOURCES

    order = opts.get("order", "random")
    if order not in order_names():
        raise CliError(f"unknown order {order!r}; valid: {', '.join(order_names())}")
    resources = opts.get("resources", "equal_total")
    if resources not in RESOURCES:
        raise CliError(f"resources must be one of {', '.join(RESOURCES)}, got {resources!r}")
    if "check" in opts and not flag_option(opts, "check"):
        raise CliError("compare operators=... always checks each operator against DuckDB (its "
                       "shares are shares of DuckDB's join): drop check=false")
    tick = number_option(opts, "tick", float, None, minimum=0, above=True)
    time = opts.get("time") or None
    if tick is not None and time is None:
        raise CliError("tick= cuts the stream at event-time ticks: it needs time=COLUMN")
    if time is not None:
        from joins.online.cli import check_time_column

        check_time_column({"r": opts["r"], "s": opts["s"]}, time)
    return dict(joiners=number_option(opts, "joiners", int, None, minimum=1),
                memory=number_option(opts, "memory", int, None, minimum=1),
                resources=resources, time=time, tick=tick, order=order,
                batch_size=number_option(opts, "batch_size", int, 50_000, minimum=1),
                seed=number_option(opts, "seed", int, 0, minimum=0))


def cmd_compare_stream(opts: dict[str, str]) -> int:
    """Several online operators on the same stream, measured as the arena measures them: one
    table (and with out= its CSV and the results-over-modeled-time chart)."""
    _check_compare_options(opts, STREAM_REQUIRED, set(STREAM_REQUIRED) | STREAM_OPTIONS)
    algos = _compare_names(opts, "operators", "online")
    given = {k.removeprefix("param."): _number(v) for k, v in opts.items() if k.startswith("param.")}
    params = _compare_params(algos, given)
    on = opts.get("on", "key")
    check_key({"r": parquet_schema(opts["r"]), "s": parquet_schema(opts["s"])}, on)
    out = _compare_out(opts, {"r": opts["r"], "s": opts["s"]})
    run = _stream_run_options(opts)
    preset = spark_preset_or_usage_error(opts.get("spark", "local"))

    from joins.compare import compare_stream, format_table
    from runtime.spark_session import get_spark

    spark = get_spark(**preset)
    cmp = compare_stream(spark, [a.name for a in algos], opts["r"], opts["s"], on=on,
                         params=params, **run)
    print()
    print(format_table(cmp))
    if out is not None:
        _write_comparison(cmp, out, operators=[a.name for a in algos], on=on, r=opts["r"],
                          s=opts["s"], params=params, **run)
    for name, err in cmp.errors.items():
        print(f"error: {name}: output {err}", file=sys.stderr)
    return 1 if cmp.errors else 0


def cmd_compare(opts: dict[str, str]) -> int:
    """Several batch algorithms on the same inputs, one table (and a chart with out=)."""
    if "operators" in opts:
        return cmd_compare_stream(opts)
    required = ("algorithms", "left", "right")
    known = set(required) | {"on", "how", "executors", "partitions", "spark", "seed", "check",
                             "out", "force"}
    _check_compare_options(opts, required, known)
    algos = _compare_names(opts, "algorithms", "batch")
    names = [a.name for a in algos]
    how, on = opts.get("how", "inner"), opts.get("on", "key")
    cannot = [a.name for a in algos if how not in a.join_types]
    if cannot:
        raise CliError(f"{', '.join(cannot)} cannot do {how!r} joins")
    given = {k.removeprefix("param."): _number(v) for k, v in opts.items() if k.startswith("param.")}
    params = _compare_params(algos, given)
    check_key({"left": parquet_schema(opts["left"]), "right": parquet_schema(opts["right"])}, on)
    out = _compare_out(opts, {"left": opts["left"], "right": opts["right"]})
    executors = number_option(opts, "executors", int, 4, minimum=1)
    partitions = number_option(opts, "partitions", int, 3 * executors, minimum=1)
    seed = number_option(opts, "seed", int, 0, minimum=0)
    check = flag_option(opts, "check")
    preset = spark_preset_or_usage_error(opts.get("spark", "local"))

    from joins.compare import compare_batch, format_table
    from runtime.spark_session import get_spark

    spark = get_spark(**preset)
    cmp = compare_batch(spark, algos, opts["left"], opts["right"], on=on, how=how,
                        executors=executors, partitions=partitions, seed=seed, params=params,
                        check=check)
    print()
    print(format_table(cmp))
    if out is not None:
        _write_comparison(cmp, out, algorithms=names, how=how, on=on, left=opts["left"],
                          right=opts["right"], params=params)
    if cmp.errors:
        for name, err in cmp.errors.items():
            print(f"error: {name}: output {err}", file=sys.stderr)
        return 1
    return 0


def pd_frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


def _number(v: str) -> Any:
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd in ("list", "run", "describe", "compare") and any(a in ("-h", "--help") for a in rest):
        print({"list": "usage: python -m joins list",
               "describe": "usage: python -m joins describe ALGORITHM",
               "compare": COMPARE_USAGE}.get(cmd, RUN_USAGE))
        return 0
    try:
        if cmd == "list":
            return cmd_list()
        if cmd == "run":
            return cmd_run(parse_kv(rest))
        if cmd == "describe":
            return cmd_describe(rest)
        if cmd == "compare":
            return cmd_compare(parse_kv(rest))
        if cmd == "stream":
            try:
                from joins.online.cli import main as stream_main
            except ImportError as exc:
                raise CliError(f"the online engine is not available: {exc}") from None
            return stream_main(rest)
        raise CliError(f"unknown command {cmd!r}; valid: list, describe, run, compare, stream")
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
