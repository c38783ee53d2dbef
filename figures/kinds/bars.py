"""Grouped bars: one group per x value (a skew setting, a query), one bar per series.

Drawn as the paper draws its tables and bar charts: a point that overflowed keeps its bar
(its time includes the charged spill) and gets the paper's asterisk; a point without a value
(out of memory, deadline, error) gets its failure mark at the bottom. The paper's numbers, on
its own cluster and scale, go on a separate right-hand axis as labelled hollow markers (with
their own asterisks) so they are never read as this run's values.

Plot spec: ``y``, ``ylabel``, ``logy``, ``panels`` (list of ``{title, series}``; default one
panel with every series), ``extra_panels`` (more metrics, one row each, same panels),
``paper_axis_label``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from figures.style import (
    FAIL_LABELS,
    FAIL_MARKERS,
    footer_text,
    series_colors,
    series_labels,
    y_kind_of,
)

NO_VALUE = ("oom", "timeout", "error")


def x_ticks(figure: dict, xs: list[float], results: pd.DataFrame) -> list[str]:
    cats = figure["x"].get("categories")
    if cats:
        return [str(cats[int(x)]) for x in xs]
    labels = results.groupby("x")["x_label"].first()
    return [str(labels.get(x, f"{x:g}")) for x in xs]


def _panel(ax, figure: dict, results: pd.DataFrame, names: list[str], y: str, ylabel: str,
           logy: bool, colors: dict, paper: list[dict], paper_label: str,
           legend: str = "below") -> None:
    labels = series_labels(figure)
    sub = results[results.series.isin(names)]
    xs = sorted(sub["x"].dropna().unique())
    if not xs:
        ax.set_axis_off()
        return
    status = sub.groupby(["series", "x"])["status"].first()
    vals = sub[(sub.metric == y) & ~sub.status.isin(NO_VALUE)].groupby(["series", "x"])[
        "value"].mean()
    width = 0.8 / max(1, len(names))
    top = float(vals.max()) if len(vals) else 1.0
    pos = {}
    handles = []
    for i, name in enumerate(names):
        for j, x in enumerate(xs):
            p = j - 0.4 + width * (i + 0.5)
            pos[(name, x)] = p
            st = status.get((name, x))
            if st is None:
                continue
            v = vals.get((name, x))
            if v is not None and np.isfinite(v):
                over = st == "overflow"
                ax.bar(p, v, width, color=colors[name], hatch="//" if over else None,
                       edgecolor="white" if not over else "0.2", linewidth=0.5)
                if over:
                    ax.text(p, v, "*", ha="center", va="bottom", fontsize=13, color="0.1")
            elif st in FAIL_MARKERS:
                ax.scatter([p], [top * 0.02 if logy else 0], marker=FAIL_MARKERS[st],
                           color=colors[name], s=45, zorder=5)
        handles.append(Patch(facecolor=colors[name], label=labels[name]))
    if (status == "overflow").any():
        handles.append(Patch(facecolor="white", edgecolor="0.2", hatch="//",
                             label=f"* {FAIL_LABELS['overflow']}"))
    for st in sorted(set(status) & set(NO_VALUE)):
        handles.append(ax.scatter([], [], marker=FAIL_MARKERS[st], color="gray",
                                  label=FAIL_LABELS[st]))
    ax.set_xticks(range(len(xs)), x_ticks(figure, xs, sub))
    ax.set_xlabel(figure["x"].get("label", "x"))
    ax.set_ylabel(ylabel)
    if logy and len(vals) and (vals > 0).all():
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    mine = [p for p in paper if p.get("metric", y) == y and p["series"] in names]
    if mine:
        tw = ax.twinx()
        for p in mine:
            key = (p["series"], float(p["x"]))
            if key not in pos:
                continue
            tw.scatter([pos[key]], [p["value"]], facecolors="none", marker="D", s=30,
                       edgecolors=colors.get(p["series"], "k"), zorder=6)
            if p.get("overflow"):
                tw.annotate("*", (pos[key], p["value"]), ha="center", va="bottom",
                            fontsize=10, color="0.3")
        handles.append(tw.scatter([], [], facecolors="none", edgecolors="k", marker="D",
                                  label="paper (right axis; * = paper's overflow)"))
        if logy:
            tw.set_yscale("log")
        tw.set_ylabel(paper_label, fontsize=8, color="0.35")
    if logy and len(vals) and (vals > 0).all():
        ax.set_ylim(top=float(vals.max()) * 2.5)  # room for the asterisks
    if legend == "right":  # one column of panels: one legend beside the top row
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  frameon=False)
    elif legend == "below":
        ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  ncol=2, frameon=False)


def draw(figure: dict, results: pd.DataFrame):
    plot = figure.get("plot", {})
    rows = [{"y": plot["y"], "ylabel": plot.get("ylabel", plot["y"]),
             "logy": plot.get("logy", False)}, *plot.get("extra_panels", [])]
    panels = plot.get("panels") or [{"title": "", "series": list(figure["series"])}]
    scalar = results[results["t"].isna()] if "t" in results else results
    single = len(panels) == 1 and len(rows) > 1
    fig, axes = plt.subplots(len(rows), len(panels), squeeze=False,
                             figsize=(5.6 * len(panels) + (2.4 if single else 0), 3.8 * len(rows)))
    colors = series_colors(list(figure["series"]))
    for r, spec in enumerate(rows):
        for c, pan in enumerate(panels):
            ax = axes[r][c]
            _panel(ax, figure, scalar, list(pan["series"]), spec["y"],
                   spec.get("ylabel", spec["y"]), spec.get("logy", False), colors,
                   figure.get("paper_values", []) if r == 0 else [],
                   plot.get("paper_axis_label", "paper"),
                   legend=("right" if r == 0 else "none") if single else "below")
            if r == 0 and pan.get("title"):
                ax.set_title(pan["title"], fontsize=10)
    fig.suptitle(f"{figure['id']}: {figure['title']}", fontsize=11)
    kinds = sorted({y_kind_of(s.get("ylabel", s["y"])) for s in rows})
    fig.text(0.01, -0.02, footer_text(results, "; ".join(kinds)), fontsize=6.5, color="0.35")
    fig.tight_layout(rect=(0, 0, 1, 0.97))  # keep the title clear of the top panel
    return fig
