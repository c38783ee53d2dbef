"""``python -m datagen``: generate inputs, list generators, plot rank-frequency.

    python -m datagen list
    python -m datagen dpair alpha=0.8 size=100 keys=1000 rows=100000 seed=1 [out=DIR]
    python -m datagen stream source=dpair source_params.alpha=0.9 order=fluct k=4
    python -m datagen stream r=PATH s=PATH order=rate times=0,10 rate_r=1000,4000 rate_s=2000,500
    python -m datagen rankfreq PATH column=key out=plot.png [table=R]

Generator options besides its parameters: ``out=DIR`` (write exactly there; default the cache
folder ``<root>/<generator>-<hash12>``), ``root=DIR``, ``spark=PRESET|MASTER`` (write chunks as
Spark tasks: a ``conf/spark/`` preset such as ``local_cluster``, or a master URL such as
``local[2]``; default a local loop), ``force=true``, ``progress=false``.
An existing ``out=`` folder is reused if it holds the same input, else refused; ``force=true``
regenerates it only if it is a generated input holding nothing else (a user's file is never
deleted). ``rankfreq`` refuses an existing ``out=`` file.
Bad input (an unwritable output too) prints one line naming the valid choices and exits with
code 2 before anything is generated. ``python -m datagen COMMAND --help`` shows its usage.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from datagen import orders, registry
from datagen.errors import GeneratorError
from datagen.outputs import probe_writable
from datagen.params import coerce, parse_cli_value

RUN_OPTIONS = ("out", "root", "spark", "force", "progress")
RANKFREQ_OPTIONS = ("column", "out", "table", "fit_min_freq", "fit_max_rank")


def parse_pairs(tokens: list[str]) -> dict[str, Any]:
    """``a=1 b.c=x`` -> {"a": 1, "b": {"c": "x"}} (dotted keys build nested mappings)."""
    out: dict[str, Any] = {}
    for tok in tokens:
        key, eq, text = tok.partition("=")
        if not eq or not key:
            raise GeneratorError(f"expected key=value, got {tok!r}")
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise GeneratorError(f"{key}: {part} is both a value and a group")
        if leaf in node:
            raise GeneratorError(f"parameter {key} given twice")
        node[leaf] = parse_cli_value(text)
    return out


def _list() -> int:
    print("generators:")
    for name in registry.names():
        print(f"  {name:14s} {registry.describe(name)}")
    print("stream orders: " + ", ".join(orders.names()))
    print("also: rankfreq PATH column=key out=plot.png")
    return 0


RANKFREQ_USAGE = ("usage: python -m datagen rankfreq PATH column=key out=plot.png [table=T] "
                  "[fit_min_freq=10] [fit_max_rank=N]")


def _help(cmd: str) -> str:
    """One command's usage: its options, and a generator's parameters with their defaults."""
    import dataclasses

    if cmd == "list":
        return "usage: python -m datagen list"
    if cmd == "rankfreq":
        return RANKFREQ_USAGE
    mod = registry.module(cmd)
    lines = [f"usage: python -m datagen {cmd} [name=value ...] [out=DIR | root=DIR] "
             "[spark=PRESET|MASTER] [force=true] [progress=false]", registry.describe(cmd)]
    params = getattr(mod, "Params", None)
    if dataclasses.is_dataclass(params):
        lines.append("parameters: " + ", ".join(
            f"{f.name}={f.default!r}" if f.default is not dataclasses.MISSING else f.name
            for f in dataclasses.fields(params)))
    return "\n".join(lines)


def _rankfreq(args: list[str]) -> int:
    from datagen.rankfreq import plot_rankfreq

    if not args or "=" in args[0]:
        raise GeneratorError(RANKFREQ_USAGE)
    kw = parse_pairs(args[1:])
    bad = sorted(set(kw) - set(RANKFREQ_OPTIONS))
    if bad:
        raise GeneratorError(f"unknown option(s) {', '.join(bad)} for rankfreq; valid: "
                             f"{', '.join(RANKFREQ_OPTIONS)}")
    out = Path(str(kw.get("out", "rankfreq.png")))
    if out.exists() or out.is_symlink():
        raise GeneratorError(f"output {out} exists; remove it or choose another path")
    probe_writable(out)
    res = plot_rankfreq(
        args[0], str(kw.get("column", "key")), str(out),
        table=None if kw.get("table") is None else str(kw["table"]),
        fit_min_freq=coerce("fit_min_freq", kw.get("fit_min_freq", 10), int),
        fit_max_rank=coerce("fit_max_rank", kw.get("fit_max_rank"), int | None),
    )
    print(f"{res['out']}: {res['rows']:,} rows, {res['distinct']:,} distinct, "
          f"top frequency {res['top_frequency']:,}, fitted exponent z = {res['exponent']:.4f}")
    return 0


def _generate(name: str, args: list[str]) -> int:
    from datagen import cache

    registry.module(name)  # unknown or unavailable generator: fail before anything else
    kw = parse_pairs(args)
    opts = {k: kw.pop(k) for k in RUN_OPTIONS if k in kw}
    resolved = cache.resolve(name, kw)
    progress = coerce("progress", opts.get("progress", True), bool)
    force = coerce("force", opts.get("force", False), bool)
    if opts.get("out"):  # refuse an output that is not ours, or cannot be written, before Spark
        target = Path(str(opts["out"])).absolute()
        if cache.check_target(target, cache.config_hash(name, resolved), force) != "same" \
                or force:
            probe_writable(target)
    elif opts.get("root"):
        probe_writable(Path(str(opts["root"])) / name)
    spark = None
    if opts.get("spark"):
        from runtime.spark_session import SparkConfigError, get_spark, spark_preset

        master = str(opts["spark"])
        looks_like_url = any(c in master for c in "[:/")  # local[2], spark://host:7077
        try:
            spark = get_spark(master) if looks_like_url else get_spark(**spark_preset(master))
        except SparkConfigError as exc:
            raise GeneratorError(str(exc)) from None
    if opts.get("out"):
        folder = cache.materialize_into(Path(str(opts["out"])), name, resolved, spark=spark,
                                        progress=progress, force=force)
    else:
        root = Path(str(opts["root"])) if opts.get("root") else None
        folder = cache.materialize(name, resolved, root=root, spark=spark, progress=progress,
                                   force=force)
    rows = cache.read_manifest(folder)["rows"]
    print(f"{folder}  " + "  ".join(f"{t}={n:,}" for t, n in rows.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0 if argv else 2
    try:
        if any(a in ("-h", "--help") for a in argv[1:]):
            print(_help(argv[0]))
            return 0
        if argv[0] == "list":
            return _list()
        if argv[0] == "rankfreq":
            return _rankfreq(argv[1:])
        return _generate(argv[0], argv[1:])
    except GeneratorError as e:
        print(f"datagen: error: {e}", file=sys.stderr)
        return 2
