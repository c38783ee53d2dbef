"""One line per series against x; failed points marked where the series would be; optional
extra panels of other metrics; the paper's numbers overlaid as hollow markers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from figures.style import (
    FAIL_LABELS,
    FAIL_MARKERS,
    FAILED,
    footer_text,
    series_colors,
    series_linestyles,
    y_kind_of,
)


def _panel(ax, figure: dict, results: pd.DataFrame, y: str, ylabel: str, logy: bool,
           colors: dict, paper: list[dict]) -> None:
    labels = {k: v.get("label", k) for k, v in figure["series"].items()}
    styles = series_linestyles(list(figure["series"]))
    status = results.groupby(["series", "x"])["status"].first()
    # overflow points have a value (their time includes the spill): drawn, and starred
    values = results[(results.metric == y) & results.status.isin(["ok", "overflow"])]
    top = values["value"].max() if not values.empty else 1.0
    used_fail: set[str] = set()
    marks_at: dict[float, int] = {}
    for name in figure["series"]:
        ser = values[values.series == name].groupby("x")["value"].mean().sort_index()
        if not ser.empty:
            ax.plot(ser.index, ser.to_numpy(), marker="o", ms=3.5, color=colors[name],
                    linestyle=styles[name], label=labels[name])
            over = values[(values.series == name) & (values.status == "overflow")]
            if not over.empty:
                o = over.groupby("x")["value"].mean()
                ax.scatter(o.index, o.to_numpy(), marker="*", s=90, color=colors[name], zorder=6)
                used_fail.add("overflow")
        elif name in set(results.series):
            ax.plot([], [], marker="o", ms=3.5, color=colors[name], linestyle=styles[name],
                    label=labels[name])
        if name in status.index.get_level_values(0):
            st = status.loc[name]
            for x, s in st[st.isin(FAILED)].items():
                k = marks_at[x] = marks_at.get(x, -1) + 1  # stacked: one row per failed series
                ax.scatter([x], [top * 1.6 * 1.35 ** k if logy else top * (1.08 + 0.07 * k)],
                           marker=FAIL_MARKERS[s], color=colors[name], s=45, zorder=5)
                used_fail.add(s)
    for p in paper:
        if p.get("metric", figure["plot"].get("y")) != y:
            continue
        ax.scatter([p["x"]], [p["value"]], facecolors="none", edgecolors=colors.get(p["series"], "k"),
                   marker="s", s=40, label=f"paper: {labels.get(p['series'], p['series'])}")
    for s in sorted(used_fail):
        ax.scatter([], [], marker=FAIL_MARKERS[s], color="gray", label=("* " if s == "overflow" else "failed: ") + FAIL_LABELS[s])
    ax.set_xlabel(figure["x"].get("label", "x"))
    ax.set_ylabel(ylabel)
    if logy and not values.empty and (values["value"] > 0).all():
        ax.set_yscale("log")
    if figure["x"].get("logx"):
        ax.set_xscale("log")
    ax.grid(alpha=0.3)


def draw(figure: dict, results: pd.DataFrame):
    plot = figure.get("plot", {})
    panels = [{"y": plot["y"], "ylabel": plot.get("ylabel", plot["y"]),
               "logy": plot.get("logy", False)}, *plot.get("extra_panels", [])]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    colors = series_colors(list(figure["series"]))
    for ax, p in zip(axes[0], panels, strict=True):
        _panel(ax, figure, results, p["y"], p.get("ylabel", p["y"]), p.get("logy", False),
               colors, figure.get("paper_values", []))
    kinds = sorted({y_kind_of(p.get("ylabel", p["y"])) for p in panels})
    fig.text(0.01, -0.04, footer_text(results, "; ".join(kinds)), fontsize=6.5, color="0.35")
    fig.tight_layout()
    # legend and title above the panels (saved with a tight bounding box), never over them
    handles, labels = axes[0][0].get_legend_handles_labels()
    legend_rows = -(-len(labels) // 5) if handles else 0
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=8,
                   bbox_to_anchor=(0.5, 1.0), frameon=False)
    row_height = 0.22 / fig.get_figheight()  # one 8-pt legend row, as a fraction of the figure
    fig.suptitle(f"{figure['id']}: {figure['title']}", y=1.03 + legend_rows * row_height,
                 va="bottom", fontsize=11)
    return fig


__all__ = ["draw", "np"]
