"""Box plots: one group per x value (a query), one box per series, drawn from each point's
summary metrics rather than raw samples (a run reports its distribution's quantiles).

The box spans ``<y>_p25`` to ``<y>_p75`` with the median ``<y>_p50``; the whiskers are
``<y>_min`` and ``<y>_max`` (the paper's best and worst case); a dot marks ``<y>_mean``.

Plot spec: ``y`` (the metrics' prefix), ``ylabel``, ``logy``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from figures.kinds.bars import x_ticks
from figures.style import footer_text, series_colors, series_labels, y_kind_of

PARTS = {"whislo": "min", "q1": "p25", "med": "p50", "q3": "p75", "whishi": "max",
         "mean": "mean"}


def draw(figure: dict, results: pd.DataFrame):
    plot = figure.get("plot", {})
    prefix = plot["y"]
    scalar = results[results["t"].isna()] if "t" in results else results
    ok = scalar[scalar["status"].isin(["ok", "overflow"])]
    names = list(figure["series"])
    colors, labels = series_colors(names), series_labels(figure)
    xs = sorted(ok["x"].dropna().unique())
    fig, ax = plt.subplots(figsize=(min(11.0, 2.5 + 0.45 * len(xs) * len(names)), 4.2))
    width = 0.8 / max(1, len(names))
    values = ok.groupby(["series", "x", "metric"])["value"].mean()
    for i, name in enumerate(names):
        stats, pos = [], []
        for j, x in enumerate(xs):
            part = {k: values.get((name, x, f"{prefix}_{m}")) for k, m in PARTS.items()}
            if any(v is None or not np.isfinite(v) for v in part.values()):
                continue
            stats.append({**part, "fliers": []})
            pos.append(j - 0.4 + width * (i + 0.5))
        if stats:
            ax.bxp(stats, positions=pos, widths=width * 0.8, showmeans=True, patch_artist=True,
                   boxprops={"facecolor": colors[name], "alpha": 0.75},
                   medianprops={"color": "black"},
                   meanprops={"marker": "o", "markerfacecolor": "white",
                              "markeredgecolor": "black", "markersize": 3.5})
    ax.set_xticks(range(len(xs)), x_ticks(figure, xs, ok))
    ax.set_xlabel(figure["x"].get("label", "x"))
    ylabel = plot.get("ylabel", prefix)
    ax.set_ylabel(ylabel)
    if plot.get("logy"):
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=[Patch(facecolor=colors[n], alpha=0.75, label=labels[n]) for n in names],
              fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    ax.set_title(f"{figure['id']}: {figure['title']}", fontsize=10)
    fig.text(0.01, -0.02, footer_text(results, y_kind_of(ylabel)), fontsize=6.5, color="0.35")
    fig.tight_layout()
    return fig
