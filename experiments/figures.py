"""The one registry of figures: every ``conf/figure/<paper>/<fig>.yaml`` is a figure."""

from __future__ import annotations

import sys

from experiments.config import compose
from experiments.figure_spec import plain, resolve_scaled
from runtime.paths import CONF


def figure_ids(paper: str | None = None) -> list[str]:
    root = CONF / "figure"
    # files starting with "_" hold settings shared by several figures of a paper
    ids = sorted(str(p.relative_to(root).with_suffix("")) for p in root.glob("*/[!_]*.yaml"))
    return [i for i in ids if paper is None or i.split("/")[0] == paper]


def papers() -> list[str]:
    return sorted({i.split("/")[0] for i in figure_ids()})


def load_figure(figure_id: str, scale: str = "small") -> dict:
    """The figure's config (validated against the schema) as plain data; its targets with this
    scale's values (a target may give per-scale x positions)."""
    if figure_id not in figure_ids():
        raise KeyError(f"unknown figure {figure_id!r}; valid: {', '.join(figure_ids())}")
    figure = plain(compose([f"figure={figure_id}", f"scale={scale}"]).figure)
    figure["targets"] = resolve_scaled(figure.get("targets", []), scale)
    return figure


def headline_ids() -> list[str]:
    return [f for f in figure_ids() if load_figure(f).get("headline")]


def select(name: str) -> list[str]:
    """A figure id, a paper short name, 'all' or 'headline' -> figure ids."""
    if name == "all":
        return figure_ids()
    if name == "headline":
        return headline_ids()
    if name in papers():
        return figure_ids(name)
    if name in figure_ids():
        return [name]
    raise KeyError(f"unknown figure or paper {name!r}; papers: {', '.join(papers())}; "
                   f"figures: {', '.join(figure_ids())}")


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
