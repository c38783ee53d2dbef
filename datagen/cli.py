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
Bad input prints one line naming the valid choices and exits with code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from datagen import orders, registry
from datagen.errors import GeneratorError
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


def _rankfreq(args: list[str]) -> int:
    from datagen.rankfreq import plot_rankfreq

    if not args or "=" in args[0]:
        raise GeneratorError("usage: python -m datagen rankfreq PATH column=key out=plot.png")
    kw = parse_pairs(args[1:])
    bad = sorted(set(kw) - set(RANKFREQ_OPTIONS))
    if bad:
        raise GeneratorError(f"unknown option(s) {', '.join(bad)} for rankfreq; valid: "
                             f"{', '.join(RANKFREQ_OPTIONS)}")
    res = plot_rankfreq(
        args[0], str(kw.get("column", "key")), str(kw.get("out", "rankfreq.png")),
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
    spark = None
    if opts.get("spark"):
        from runtime.spark_session import SparkConfigError, get_spark, spark_preset

        master = str(opts["spark"])
        looks_like_url = any(c in master for c in "[:/")  # local[2], spark://host:7077
        try:
            spark = get_spark(master) if looks_like_url else get_spark(**spark_preset(master))
        except SparkConfigError as exc:
            raise GeneratorError(str(exc)) from None
    progress = coerce("progress", opts.get("progress", True), bool)
    force = coerce("force", opts.get("force", False), bool)
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
        if argv[0] == "list":
            return _list()
        if argv[0] == "rankfreq":
            return _rankfreq(argv[1:])
        return _generate(argv[0], argv[1:])
    except GeneratorError as e:
        print(f"datagen: error: {e}", file=sys.stderr)
        return 2
