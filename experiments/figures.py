"""The one registry of figures: every ``conf/figure/<paper>/<fig>.yaml`` is a figure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from experiments.config import compose, figure_of
from experiments.figure_spec import resolve_scaled
from runtime.paths import CONF, FIGURES, ROOT, SCRATCH


def figure_ids(paper: str | None = None) -> list[str]:
    root = CONF / "figure"
    # files starting with "_" hold settings shared by several figures of a paper
    ids = sorted(str(p.relative_to(root).with_suffix("")) for p in root.glob("*/[!_]*.yaml"))
    return [i for i in ids if paper is None or i.split("/")[0] == paper]


# Figure families that reproduce no paper (issue 40's arena: every online operator on the same
# streams): make targets like a paper's, a REPORT.md section of their own, no claims counted.
BEYOND_PAPERS = ("arena",)


def families() -> list[str]:
    """Every figure family (a folder of conf/figure/): the papers and those beyond them."""
    return sorted({i.split("/")[0] for i in figure_ids()})


def papers() -> list[str]:
    return [f for f in families() if f not in BEYOND_PAPERS]


def beyond_papers(figure_id: str) -> bool:
    """Whether a figure reproduces no paper (its family is in :data:`BEYOND_PAPERS`)."""
    return figure_id.split("/")[0] in BEYOND_PAPERS


def load_figure(figure_id: str, scale: str = "small") -> dict:
    """The figure's config (validated against the schema) as plain data; its targets with this
    scale's values (a target may give per-scale x positions)."""
    if figure_id not in figure_ids():
        raise KeyError(f"unknown figure {figure_id!r}; valid: {', '.join(figure_ids())}")
    figure = figure_of(compose([f"figure={figure_id}", f"scale={scale}"]))
    figure["targets"] = resolve_scaled(figure.get("targets", []), scale)
    return figure


def results_id(figure: dict) -> str:
    """The figure whose results folder holds this figure's points: its own, or that of the
    figure named by ``runs_of`` (a figure that draws other metrics of the same runs, as Squall's
    Fig 5h draws the times of Fig 5g's runs: one run per point, not two)."""
    return figure.get("runs_of") or figure["id"]


def runs_of_mismatch(figure: dict, scale: str) -> str | None:
    """Why ``figure`` cannot draw the runs of its ``runs_of`` figure (a setting that makes its
    points differ: workload, run, rules, kind, a series or an x value), or None."""
    from experiments.figure_spec import config_hash, x_values

    other = load_figure(figure["runs_of"], scale)
    if other.get("runs_of"):
        return f"{other['id']} itself draws the runs of {other['runs_of']}"
    same = {**figure, **{k: other.get(k) for k in ("id", "title", "metrics", "runs_of")}}
    if set(figure["series"]) - set(other["series"]):
        return f"series {sorted(set(figure['series']) - set(other['series']))} are not {other['id']}'s"
    if set(map(str, x_values(figure, scale))) - set(map(str, x_values(other, scale))):
        return f"x values at scale {scale} are not all {other['id']}'s"
    for series in figure["series"]:
        if config_hash(same, scale, 0, series) != config_hash(other, scale, 0, series):
            return f"series {series}'s settings differ from {other['id']}'s"
    return None


def headline_ids() -> list[str]:
    return [f for f in figure_ids() if load_figure(f).get("headline")]


def select(name: str) -> list[str]:
    """A figure id, a paper short name (or a family beyond the papers, e.g. arena), 'all' or
    'headline' -> figure ids."""
    if name == "all":
        return figure_ids()
    if name == "headline":
        return headline_ids()
    if name in families():
        return figure_ids(name)
    if name in figure_ids():
        return [name]
    raise KeyError(f"unknown figure or paper {name!r}; papers: {', '.join(papers())}; "
                   f"beyond the papers: {', '.join(BEYOND_PAPERS)}; "
                   f"figures: {', '.join(figure_ids())}")


def chart_base(figure_id: str, scale: str) -> Path:
    """Where a figure's chart is drawn (add ``.png`` or ``.pdf``): under ``figures/`` for the
    published scale (small), under ``scratch/figures/<scale>/`` otherwise."""
    base = FIGURES if scale == "small" else SCRATCH / "figures" / scale
    return base / figure_id


def draw_charts(ids: list[str], scale: str, results_root: str | None = None) -> int:
    """Redraw the figures' charts from their results (``python -m figures.plot``) in a child
    process; its exit code. A child process, not an import: ``figures`` reads this registry and
    :mod:`experiments.results`, so ``experiments`` never imports ``figures`` (the layers import
    downwards only, and the two packages would otherwise import each other)."""
    if not ids:
        return 0
    cmd = [sys.executable, "-m", "figures.plot", *ids, f"scale={scale}"]
    if results_root:
        cmd.append(f"results_root={results_root}")
    return subprocess.run(cmd, cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    """``python -m experiments.figures list [all|headline|<paper>]``"""
    what = argv[1] if len(argv) > 1 else "all"
    try:
        ids = select(what)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    for i in ids:
        fig = load_figure(i)
        mark = " (headline)" if fig.get("headline") else ""
        print(f"{i:<18} {fig['title']}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
