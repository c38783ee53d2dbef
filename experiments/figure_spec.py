"""Reading a composed figure config: its sweep, its per-scale values (a derived scale's made
from its base's by one rule) and its failure rules."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

SCALES = ("tiny", "small", "medium", "paper")


@dataclass(frozen=True)
class DerivedScale:
    """A scale written once, from another: ``base``'s settings with every data size multiplied
    by ``data_factor`` (never past the paper's own size), so no figure config is edited for it."""

    base: str
    data_factor: float


# The second scale of the verdict rules (issue 37, rule 4: a "not met" on a time or rate is
# also evaluated at a second scale): small's settings with 4x the data.
DERIVED_SCALES = {"medium": DerivedScale(base="small", data_factor=4.0)}
# Where a figure keeps its data sizes: the inputs' sizes, and the one factor of a paper whose
# rule scales capacities and rates with the data (bistream, dcape: run.scale_factor). Every
# other per-scale setting (joiners, executors, micro-batches, thresholds) is the base's; a
# budget written ``{paper: V, scale_with: K}`` follows the sizes by itself. An x that is itself a
# data size (amjoin fig9's and params' small relation) keeps the base's values unless the figure
# gives its own (``x.values_by_scale.medium``).
DATA_SIZE_PATHS = (("workload", "sizes"), ("run", "scale_factor"))


def plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig | list) or \
        OmegaConf.is_config(node) else node


def is_per_scale(value: Any) -> bool:
    """Whether a value is given per scale ({tiny: .., small: .., paper: .., reason: ..})."""
    return isinstance(value, dict) and bool(value) and set(value) <= set(SCALES) | {"reason"}


def by_scale(value: Any, scale: str) -> Any:
    """A value may be given per scale ({tiny: .., small: .., paper: ..}); pick this scale's."""
    if is_per_scale(value):
        if scale not in value:
            raise KeyError(f"no value for scale {scale!r} (given: {sorted(value)})")
        return value[scale]
    return value


def resolve_scaled(tree: Any, scale: str) -> Any:
    """Recursively replace every per-scale mapping by this scale's value."""
    tree = by_scale(tree, scale)
    if isinstance(tree, dict):
        return {k: resolve_scaled(v, scale) for k, v in tree.items()}
    if isinstance(tree, list):
        return [resolve_scaled(v, scale) for v in tree]
    return tree


def grown_sizes(value: Any, paper: Any, factor: float) -> Any:
    """A data size (or a dict of them) multiplied by ``factor``, at most the paper's size
    (``paper``: None, no cap); an integer size stays an integer."""
    if isinstance(value, dict):
        paper = paper if isinstance(paper, dict) else {}
        return {k: grown_sizes(v, paper.get(k), factor) for k, v in value.items()}
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    grown = value * factor
    if isinstance(paper, int | float) and not isinstance(paper, bool):
        grown = min(grown, max(paper, value))
    return int(round(grown)) if isinstance(value, int) else float(grown)


def at_scale(figure: dict, scale: str) -> dict:
    """The figure as it runs at ``scale``. For a derived scale (:data:`DERIVED_SCALES`) every
    per-scale value without an entry of its own gets one: a data size (:data:`DATA_SIZE_PATHS`)
    the base's times the factor, capped at the paper's; any other setting the base's value. Other
    scales, and figures that give the derived scale's values themselves, are returned as given."""
    derived = DERIVED_SCALES.get(scale)
    if derived is None:
        return figure

    def fill(node: Any, path: tuple[str, ...]) -> Any:
        if is_per_scale(node) and scale not in node and derived.base in node:
            base = node[derived.base]
            node[scale] = (grown_sizes(base, node.get("paper"), derived.data_factor)
                           if path in DATA_SIZE_PATHS else copy.deepcopy(base))
        if isinstance(node, dict):
            for k, v in node.items():
                fill(v, (*path, str(k)))
        elif isinstance(node, list):
            for v in node:
                fill(v, path)
        return node

    return fill(copy.deepcopy(figure), ())


def with_seed_replicates(figure: dict) -> dict:
    """The figure with its ``seed_replicates`` declared as series, and targets' ``replicates:
    seeds`` as the series maps they stand for (verdict rule 3: a time verdict near its
    threshold must hold on 3 seeds).

    Each group ``{series: [..], seeds: [1, 2], set: [workload.params.seed, run.seed],
    x_values: ..}`` adds, per base series and seed k, the series ``<base>_seed<k>``: the base's
    algorithm and overrides with every ``set`` path at k, drawn as the base's replicate
    (``replicate_of``), at the group's ``x_values`` if it names them. The expanded series are
    what a hand-written replicate would be, so their config hashes are too.
    """
    if "seed_replicates" not in figure:
        return figure
    figure = copy.deepcopy(figure)
    groups = figure.pop("seed_replicates") or []
    series, by_seed = figure["series"], {}
    for group in groups:
        bad_keys = set(group) - {"series", "seeds", "set", "x_values"}
        if bad_keys or not {"series", "seeds", "set"} <= set(group):
            raise ValueError(f"{figure.get('id', '')}: seed_replicates group {group}: keys are "
                             f"series, seeds, set and optional x_values")
        unknown = [b for b in group["series"] if b not in series]
        if unknown:
            raise ValueError(f"{figure.get('id', '')}: seed_replicates names series "
                             f"{unknown[0]!r}; valid: {', '.join(series)}")
        for seed in group["seeds"]:  # seed-major: every series' first replicate, then the next
            for base in group["series"]:
                spec = series[base] or {}
                name = f"{base}_seed{seed}"
                if name in series:
                    raise ValueError(f"{figure.get('id', '')}: series {name} is declared "
                                     f"twice (by hand and by seed_replicates)")
                series[name] = {
                    "algorithm": spec.get("algorithm", base),
                    "label": f"{spec.get('label', base)}, seed {seed}", "replicate_of": base,
                    "overrides": {**(spec.get("overrides") or {}),
                                  **dict.fromkeys(group["set"], seed)}}
                if "x_values" in group:
                    series[name]["x_values"] = copy.deepcopy(group["x_values"])
                by_seed.setdefault(seed, {})[base] = name
    for target in figure.get("targets") or []:
        if target.get("replicates") == "seeds":
            target["replicates"] = [by_seed[k] for k in sorted(by_seed)]
    return figure


def no_larger_scale(figure: dict, scale: str) -> str | None:
    """Why the derived ``scale`` runs the same data as its base for this figure (the base is
    the paper's own size already, or the figure has no sizes), or None when it runs more."""
    derived = DERIVED_SCALES[scale]
    figure = at_scale(figure, scale)

    def sizes(at: str) -> list[Any]:
        return [by_scale(figure.get(a, {}).get(b), at) for a, b in DATA_SIZE_PATHS]

    if sizes(scale) == sizes(derived.base):
        return (f"scale={derived.base} runs the paper's own sizes here (or the figure has no "
                f"data size), so scale={scale} would run the same data")
    return None


def x_values(figure: dict, scale: str) -> list[Any]:
    """The sweep's x values at ``scale`` (a derived scale's are its base's)."""
    x = figure.get("x", {})
    by = x.get("values_by_scale", {})
    values = by.get(scale)
    if values is None and scale in DERIVED_SCALES:
        values = by.get(DERIVED_SCALES[scale].base)
    return list(values if values is not None else x.get("values", []))


def series_x_values(figure: dict, series: str, scale: str) -> list[Any]:
    """The x values ``series`` runs at: the figure's (:func:`x_values`), or those of them the
    series names itself (``x_values: [..]``, per scale or not), e.g. a seed replicate run only
    where its verdict is near its threshold (the verdict rules' rule 3)."""
    values = x_values(figure, scale)
    own = (figure.get("series", {}).get(series) or {}).get("x_values")
    if own is None:
        return values
    own = by_scale(own, scale)  # a derived scale's were filled in by at_scale, as every value's
    wanted = {round(x_numeric(figure, v), 9) for v in own}
    unknown = wanted - {round(x_numeric(figure, v), 9) for v in values}
    if unknown:
        raise ValueError(f"{figure.get('id', '')} series {series}: x_values "
                         f"{sorted(unknown)} are not x values of the figure at scale {scale}")
    return [v for v in values if round(x_numeric(figure, v), 9) in wanted]


def series_runs_at(figure: dict, series: str, x: float, scale: str) -> bool:
    """Whether ``series`` runs at the numeric x ``x``: always (a point.x the figure's list does
    not hold included), unless the series names its own ``x_values``."""
    if "x_values" not in (figure.get("series", {}).get(series) or {}):
        return True
    return round(float(x), 9) in {round(x_numeric(figure, v), 9)
                                  for v in series_x_values(figure, series, scale)}


def x_label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 10:
        return str(int(value))
    return str(value)


def x_numeric(figure: dict, value: Any) -> float:
    """Numeric position of an x value (categorical x values map to their index)."""
    labels = figure.get("x", {}).get("categories")
    if labels:
        return float(list(labels).index(value))
    return float(value)


def config_hash(figure: dict, scale: str, seed: int, series: str | None = None) -> str:
    """What makes a point's result stale: its figure's settings, its series, the scale and seed.

    Prose and presentation (description, choices, targets, plot, overlays, series labels) are
    left out, so rewording why a setting was chosen does not throw away the results made with
    it; so are the other series and the lists of x values (the figure's and a series' own), so
    adding a series or an x value to a figure does not either (nor marking a series as another's
    seed replicate, ``replicate_of``, which only changes how it is drawn).
    """
    keep = {k: v for k, v in figure.items() if k not in ("targets", "plot", "paper_values",
                                                           "description", "headline", "choices",
                                                           "series", "x", "runs_of",
                                                           "seed_replicates", "decision")}
    keep["x"] = {k: v for k, v in figure.get("x", {}).items()
                 if k not in ("values", "values_by_scale", "label")}
    if series is not None:
        keep["series"] = {k: v for k, v in figure["series"][series].items()
                          if k not in ("label", "x_values", "replicate_of")}
    blob = json.dumps({"figure": keep, "scale": scale, "seed": seed, "series": series},
                      sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def scaled_rule(rules: dict, name: str, scale: str, sizes: dict[str, dict]) -> float | None:
    """A failure rule scaled with the data, by one written rule.

    ``{paper: V, scale_with: K}`` gives V x sizes[scale][K] / sizes[paper][K]; ``scale_with``
    may also be a list of size keys, whose values are summed (e.g. the records of a relation
    made of several parts); ``{tiny: .., small: .., paper: ..}`` gives the value directly.
    """
    rule = rules.get(name)
    if rule is None:
        return None
    if isinstance(rule, dict) and "scale_with" in rule:
        keys = rule["scale_with"]
        keys = [keys] if isinstance(keys, str) else list(keys)

        def total(at: str) -> float:
            return sum(float(sizes[at][k]) for k in keys)

        return float(rule["paper"]) * total(scale) / total("paper")
    value = by_scale(rule, scale)
    return None if value is None else float(value)
