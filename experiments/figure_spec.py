"""Reading a composed figure config: its sweep, its per-scale values and its failure rules."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omegaconf import DictConfig, OmegaConf

SCALES = ("tiny", "small", "paper")


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


def x_values(figure: dict, scale: str) -> list[Any]:
    x = figure.get("x", {})
    values = x.get("values_by_scale", {}).get(scale)
    return list(values if values is not None else x.get("values", []))


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
    it; so are the other series and the list of x values, so adding a series or an x value to a
    figure does not either.
    """
    keep = {k: v for k, v in figure.items() if k not in ("targets", "plot", "paper_values",
                                                           "description", "headline", "choices",
                                                           "series", "x", "runs_of")}
    keep["x"] = {k: v for k, v in figure.get("x", {}).items()
                 if k not in ("values", "values_by_scale", "label")}
    if series is not None:
        keep["series"] = {k: v for k, v in figure["series"][series].items() if k != "label"}
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
