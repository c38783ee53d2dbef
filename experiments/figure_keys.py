"""The keys a figure config's free-form blocks may hold, so a misspelt one fails at load time.

The schema types ``x``, ``run``, ``plot`` and a target's ``check`` as open mappings (each
experiment kind, plot kind and check type reads its own keys), so Hydra cannot catch a typo
there: ``logyy: true`` would silently draw a linear axis. These allow-lists are the keys the
code reads (``figure_spec`` and the plot kinds for ``x``; ``experiments.kinds.*`` for ``run``;
``figures.kinds.*`` for ``plot``; ``experiments.targets`` for ``check``). A key added to the
code is added here; a test holds every kind and check type to an entry.
"""

from __future__ import annotations

import difflib
from typing import Any

from experiments.figure_spec import is_per_scale
from experiments.targets import cause_class

Spec = dict[str, "Spec | None"]  # key -> spec of its nested block (None: a plain value)


def _keys(*names: str, **nested: Spec) -> Spec:
    return {**dict.fromkeys(names), **nested}


X_KEYS = _keys("name", "label", "param", "values", "values_by_scale", "categories", "logx")

RUN_KEYS: dict[str, Spec] = {  # per experiment kind
    "batch_join": _keys("executors", "partitions", "partitions_per_executor", "algorithm_params",
                        "schedule", "seed"),
    "online_join": _keys("joiners", "batch_size", "micro_batches", "batch_scale", "order", "k", "controller", "partitions",
                         "tuple_bytes", "warmup_fraction", "warmup_min_batches", "weak_factor",
                         "weak_batches", "memory_budget_factor", "migration_rate",
                         "operator_params", "samples", "spill", "batch_overhead",
                         "disk_cost_factor"),
    "first_iteration": _keys(),
    "squall_theory": _keys("joiners", "replay_tuples", "seed"),
    "single_site_join": _keys("memory_share", "memory_tuples", "tick", "operator_params",
                              "time_unit_ms", "paper_ms", "baseline_buckets",
                              "buffer_limit", "band", "cost_factor"),
    "dcape_join": _keys("machines", "capacity_mb", "operator_params", "scale_factor",
                        "tuple_bytes", "tick_ms", "minutes", "cleanup_per_result_s"),
    "bistream_join": _keys("scale_factor", "capacity_gb", "tuple_overhead_bytes",
                           "micro_batches", "model", "units", "contrand", "window",
                           "archive_share", "delay", "elastic", "t_high", "t_low", "psi",
                           "check_every", "confirmations", "scaling_scope", "quiet_minutes",
                           "stream_balance",
                           "search", "row",
                           "memory_cliff", "throughput_within_millions", "aggregation",
                           "punctuation_every",
                           "dataset"),
    "arena": _keys("units", "memory_share", "resources", "tick", "single_site", "time_unit_ms",
                   "paper_ms", "baseline_buckets", "operator_params", "disk_cost_factor",
                   "window_share", "archive_share", "cell"),
}

_PANEL = _keys("y", "ylabel", "logy")
PLOT_KEYS: dict[str, Spec] = {  # per plot kind
    "lines": _keys("kind", "y", "ylabel", "logy", "results_table", extra_panels=_PANEL),
    "bars": _keys("kind", "y", "ylabel", "logy", "paper_axis_label", extra_panels=_PANEL,
                  panels=_keys("title", "series")),
    "box": _keys("kind", "y", "ylabel", "logy"),
    "timeseries": _keys("kind", "y", "ylabel", "xlabel", "logy", "logx", "markers", "series",
                        "hline", "panels",
                        "ncols", "t_scale", shade=_keys("metric", "series"),
                        right=_keys("y", "ylabel", "series", "hline", "logy", "ylim")),
    "table": _keys("kind", rows=_keys("x", "metric", "label"),
                   series_panel=_keys("metrics", "hline", "logx", "xlabel", "ylabel")),
    "speedup": _keys("kind", "y", "ylabel", pairs=_keys("numerator", "denominator", "label"),
                     paper_lines=_keys("value", "label")),
}

_WHERE = ("at", "x_min", "x_max")  # every check's x range; "statuses": checks of a metric
CHECK_KEYS: dict[str, Spec] = {  # per check type
    "status": _keys("type", *_WHERE, "series", "expect"),
    "ratio": _keys("type", *_WHERE, "statuses", "metric", "numerator", "denominator", "reduce",
                   "min", "max"),
    "ordering": _keys("type", *_WHERE, "statuses", "metric", "order"),
    "trend": _keys("type", *_WHERE, "statuses", "metric", "series", "numerator", "denominator",
                   "direction", "min_spearman"),
    "bound": _keys("type", *_WHERE, "statuses", "metric", "series", "below", "min", "max",
                   "max_over_min"),
    "crossover": _keys("type", *_WHERE, "statuses", "metric", "a", "b"),
    "drop": _keys("type", "statuses", "metric", "series", "among", "from_x", "to_x"),
    "ratio_order": _keys("type", *_WHERE, "statuses", "metric", "ratios"),
    "not_checkable": _keys("type", "reason"),
}


# a target's own keys (its check's keys are CHECK_KEYS')
TARGET_KEYS = _keys("id", "claim", "check", "finding", "cause", "sensitivity", "replicates",
                    "by_construction", "identity", "one_seed_suffices")


class FigureKeyError(ValueError):
    pass


def check_figure_keys(figure: dict) -> None:
    """Raise :class:`FigureKeyError` naming the first key no code reads, with the valid keys."""
    fid = figure.get("id", "?")
    _check(figure.get("x", {}), X_KEYS, f"{fid}: x")
    _check(figure.get("run", {}), _pick(RUN_KEYS, figure["kind"], "experiment kind", fid),
           f"{fid}: run (kind {figure['kind']})")
    run_keys = RUN_KEYS[figure["kind"]]
    for name, series in figure.get("series", {}).items():
        for overrides in _per_scale((series or {}).get("overrides") or {}):
            for path in overrides:
                head, _, rest = str(path).partition(".")
                if head == "run":
                    _check({rest.split(".")[0]: None}, run_keys,
                           f"{fid}: series {name} overrides run.")
    plot = figure.get("plot", {})
    kind = plot.get("kind", "lines")
    _check(plot, _pick(PLOT_KEYS, kind, "plot kind", fid), f"{fid}: plot (kind {kind})")
    for target in figure.get("targets", []):
        where = f"{fid}: target {target.get('id', '?')}"
        _check(target, {**TARGET_KEYS, "check": None}, where)
        if target.get("cause"):
            try:
                cause_class(target["cause"])
            except ValueError as exc:
                raise FigureKeyError(f"{where}: {exc}") from None
        check = target.get("check", {})
        ctype = check.get("type", "not_checkable")
        _check(check, _pick(CHECK_KEYS, ctype, "check type", fid),
               f"{fid}: target {target.get('id', '?')} check (type {ctype})")


def _pick(table: dict[str, Spec], name: str, what: str, fid: str) -> Spec:
    if name not in table:
        raise FigureKeyError(f"{fid}: unknown {what} {name!r}; valid: {', '.join(sorted(table))}")
    return table[name]


def _check(block: Any, spec: Spec, where: str) -> None:
    for variant in _per_scale(block):
        items = variant if isinstance(variant, list) else [variant]
        for item in items:
            if not isinstance(item, dict):
                continue
            for key, value in item.items():
                if key not in spec:
                    near = difflib.get_close_matches(str(key), list(spec), n=1)
                    hint = f" (did you mean {near[0]!r}?)" if near else ""
                    raise FigureKeyError(f"{where}: unknown key {key!r}{hint}; valid: "
                                         f"{', '.join(sorted(spec)) or 'none'}")
                if spec[key] is not None:
                    _check(value, spec[key], f"{where}.{key}")


def _per_scale(block: Any) -> list[Any]:
    """A block given per scale ({tiny: .., small: .., paper: ..}) is checked at each scale."""
    if is_per_scale(block):
        return [v for k, v in block.items() if k != "reason"]
    return [block]
