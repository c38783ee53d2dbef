"""One cache of finished points, shared across figures: a point whose settings equal those of a
finished point of another figure is copied from it instead of run again (issue 36).

Two figures often hold the same run: amjoin/fig7 at 64 executors is amjoin/fig5 at alpha 0.65,
diner/fig18's largest memory is diner/fig10 at s = 1. Such points are found by their *key*: a
hash of everything the experiment kind reads to run the point (its kind, the resolved workload
and run settings with the series' overrides and the x value applied, the failure rules and
the sizes of every scale), the scale and the seed. Not in it: the figure's name, prose, plot,
targets and the metrics it draws, none of which a kind reads to compute a point. A copied
point keeps the provenance of the run that made it (commit, start, wall time) and names it
in ``reused_from``; the reproduction's summed wall time counts that run once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.figure_spec import config_hash, series_x_values, x_label, x_numeric
from experiments.kinds import PointContext, point_settings
from experiments.results import Point, finished, point_path, results_dir

# What a kind does not read to compute a point (presentation, and the metrics a figure draws
# from it, which experiments.figures.runs_of_mismatch ignores for the same reason), and the
# parts point_settings resolves (workload, run, series, x).
NOT_READ = frozenset({"id", "title", "paper", "headline", "description", "plot", "paper_values",
                      "choices", "targets", "runs_of", "metrics", "series", "x", "workload",
                      "run", "seed_replicates"})
# Kinds that read the point's x itself, not only through the setting x.param names (Fig 3's
# seed per x, Squall's theory check per x): their x is part of the key.
READS_X = frozenset({"first_iteration", "squall_theory"})


def point_key(figure: dict, series: str, x: Any, scale: str, seed: int) -> str:
    """What a point computes from, as a hash: equal keys, equal counts."""
    pc = PointContext(figure=figure, series=series, x=x, scale=scale, seed=seed, spark_cfg={},
                      calibration=None)
    settings = None  # a kind with no x.param reads its x itself (READS_X)
    if "param" in figure["x"]:
        settings = point_settings(pc)
        by_x = settings["workload"].pop("params_by_x", None) or {}  # kinds read x's entry
        settings["workload"]["params_at_x"] = by_x.get(str(x), {})
    blob = {"figure": {k: v for k, v in figure.items() if k not in NOT_READ},
            "sizes": figure["workload"].get("sizes"), "settings": settings, "scale": scale,
            "seed": seed,
            "x": x if figure["kind"] in READS_X or settings is None else None}
    text = json.dumps(blob, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Source:
    """A finished point of another figure with the same key."""

    figure: str
    series: str
    x_label: str
    path: Path

    def __str__(self) -> str:
        return f"{self.figure} {self.series} x={self.x_label}"


@cache
def _figure(figure_id: str, scale: str) -> dict:
    from experiments.figures import load_figure

    return load_figure(figure_id, scale)


@cache
def _keys(paper: str, kind: str, scale: str, seed: int) -> dict[str, list[tuple[str, str, Any]]]:
    """Every point of the paper's figures of this kind, by key (each figure composed once per
    process; whether a point has a result is looked up when it is needed)."""
    from experiments.figures import figure_ids

    keys: dict[str, list[tuple[str, str, Any]]] = {}
    for fid in figure_ids():
        if not fid.startswith(f"{paper}/"):
            continue
        figure = _figure(fid, scale)
        if figure["kind"] != kind or figure.get("runs_of"):
            continue
        for series in figure["series"]:
            for x in series_x_values(figure, series, scale):
                keys.setdefault(point_key(figure, series, x, scale, seed), []).append(
                    (fid, series, x))
    return keys


def reusable(results_root: str, figure: dict, point: Point, key: str, scale: str,
             made_on: dict[str, str], same_commit: str | None = None) -> Source | None:
    """A finished point of another figure (or another series) with this key, current under
    its own figure's config and made where this run would be (``made_on``: its Spark master
    and calibration id); with ``same_commit``, only one made by that commit (``force=true``: a
    point redone after a code change is not copied from one made before it). A timeout is
    never copied: the wall-clock limit that decided it is not part of the key."""
    for fid, series, x in _keys(figure["paper"], figure["kind"], scale, point.seed).get(key, []):
        if fid == figure["id"] and series == point.series:
            continue
        other = _figure(fid, scale)
        source = Point(fid, series, x_numeric(other, x), x_label(x), point.seed)
        folder = results_dir(results_root, fid)
        if not finished(folder, source, config_hash(other, scale, point.seed, series)):
            continue
        path = point_path(folder, source)
        made = pd.read_parquet(path, columns=[*made_on, "git_commit", "status"])
        if any(not made[k].eq(v).all() for k, v in made_on.items()):
            continue
        if made["status"].eq("timeout").any():  # decided by a wall-clock limit, not the key
            continue
        if same_commit is not None and (same_commit.endswith("-dirty")
                                        or not made["git_commit"].eq(same_commit).all()):
            continue
        return Source(fid, series, source.x_label, path)
    return None


def copied_rows(source: Source, provenance: dict[str, Any]) -> list[dict[str, Any]]:
    """The source's rows as this point's: its figure, series, x and config hash, the source's
    run provenance (commit, start, wall time, Spark, calibration) and where they came from."""
    rows = pd.read_parquet(source.path).to_dict("records")
    mine = {k: provenance[k] for k in ("figure", "series", "x", "x_label", "config_hash",
                                       "point_id")}
    return [{**row, **mine, "reused_from": row.get("reused_from") or str(source)}
            for row in rows]
