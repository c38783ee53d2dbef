"""Redraw figures from results/ only:
``python -m figures.plot <paper>/<fig>|<paper>|all ... [scale=small] [results_root=DIR]``.

Writes ``figures/<paper>/<fig>.png`` and ``.pdf`` for the published scale (small), and under
``scratch/figures/<scale>/`` otherwise (:func:`experiments.figures.chart_base`). ``figures``
sits on top: it reads experiments' figure registry and results, and ``experiments`` runs this
module as a child process (:func:`experiments.figures.draw_charts`) rather than importing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments.figures import chart_base, load_figure, results_id, select
from experiments.results import read_results
from figures.kinds import load
from runtime.paths import ROOT


def plot_figure(figure_id: str, scale: str = "small", results_root: str | None = None) -> Path | None:
    figure = load_figure(figure_id, scale)
    if results_root is None:
        from experiments.config import compose

        results_root = compose([f"figure={figure_id}", f"scale={scale}"]).scale.results_root
    results = read_results(results_root, results_id(figure))
    if results.empty:
        print(f"{figure_id}: no results yet under {results_root}/ (run make reproduce-"
              f"{figure_id.replace('/', '-')})", file=sys.stderr)
        return None
    fig = load(figure.get("plot", {}).get("kind", "lines"))(figure, results)
    out = chart_base(figure_id, scale)
    png, pdf = out.with_suffix(".png"), out.with_suffix(".pdf")
    out.parent.mkdir(parents=True, exist_ok=True)
    # no creation date in the PDF: a redraw from the same results is byte-identical
    fig.savefig(png, dpi=130, bbox_inches="tight")
    fig.savefig(pdf, dpi=130, bbox_inches="tight", metadata={"CreationDate": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    print(f"{figure_id}: wrote {png.relative_to(ROOT) if png.is_relative_to(ROOT) else png} (+ .pdf)")
    return png


def main(argv: list[str]) -> int:
    args = [a for a in argv if "=" not in a]
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    if not args:
        print("usage: python -m figures.plot <paper>/<fig>|<paper>|all ... [scale=small] "
              "[results_root=DIR]", file=sys.stderr)
        return 2
    try:
        ids = list(dict.fromkeys(i for name in args for i in select(name)))
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    for figure_id in ids:
        plot_figure(figure_id, opts.get("scale", "small"), opts.get("results_root"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
