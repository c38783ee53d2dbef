"""One line per series against x; failed points marked where the series would be; optional
extra panels of other metrics; the paper's numbers overlaid as hollow markers. A series that
another one covers (equal y at every x) is drawn wider beneath it and says so in the legend. A
seed replicate (a series with ``replicate_of: <series>``, the verdict rules' rule 3) is drawn
thin and dotted in its series' colour, under one legend entry, so the spread over seeds shows
without a line of its own in the legend."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from figures.style import (
    FAIL_LABELS,
    FAIL_MARKERS,
    FAILED,
    LINE_WIDTH,
    MARKER_SIZE,
    RIM_MARKER,
    RIM_WIDTH,
    coincidence_note,
    covering_series,
    footer_text,
    series_colors,
    series_labels,
    series_linestyles,
    series_markers,
    y_kind_of,
)


def _panel(ax, figure: dict, results: pd.DataFrame, y: str, ylabel: str, logy: bool,
           colors: dict, paper: list[dict]) -> tuple[dict, dict[str, str]]:
    """Draw one metric; return each series' line and, per covered series, the one on top."""
    labels = series_labels(figure)
    styles = series_linestyles(list(figure["series"]))
    markers = series_markers(list(figure["series"]))
    status = results.groupby(["series", "x"])["status"].first()
    # overflow points have a value (their time includes the spill): drawn, and starred
    values = results[(results.metric == y) & results.status.isin(["ok", "overflow"])]
    top = values["value"].max() if not values.empty else 1.0
    used_fail: set[str] = set()
    marks_at: dict[float, int] = {}
    means = {name: values[values.series == name].groupby("x")["value"].mean().sort_index()
             for name in figure["series"]}
    replicas = replicates(figure)
    drew_replicate = False
    covers = covering_series({k: v for k, v in means.items() if k not in replicas})
    lines = {}
    for name in figure["series"]:
        ser, depth = means[name], len(covers.get(name, []))
        look = {"marker": markers[name], "ms": MARKER_SIZE + RIM_MARKER * depth,
                "lw": LINE_WIDTH + RIM_WIDTH * depth, "color": colors[name],
                "linestyle": styles[name], "label": labels[name]}
        if name in replicas:
            if ser.empty:
                continue
            ax.plot(ser.index, ser.to_numpy(), marker=".", ms=MARKER_SIZE * 0.6, lw=0.8,
                    linestyle=":", color=colors[name], alpha=0.8, zorder=1)
            drew_replicate = True
            continue
        if not ser.empty:
            lines[name], = ax.plot(ser.index, ser.to_numpy(), **look)
            over = values[(values.series == name) & (values.status == "overflow")]
            if not over.empty:
                o = over.groupby("x")["value"].mean()
                ax.scatter(o.index, o.to_numpy(), marker="*", s=90, color=colors[name], zorder=6)
                used_fail.add("overflow")
        elif name in set(results.series):
            lines[name], = ax.plot([], [], **look)
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
    if drew_replicate:
        ax.plot([], [], marker=".", lw=0.8, linestyle=":", color="gray",
                label="other seeds (thin, dotted; verdict rule 3)")
    for s in sorted(used_fail):
        ax.scatter([], [], marker=FAIL_MARKERS[s], color="gray", label=("* " if s == "overflow" else "failed: ") + FAIL_LABELS[s])
    ax.set_xlabel(figure["x"].get("label", "x"))
    ax.set_ylabel(ylabel)
    if logy and not values.empty and (values["value"] > 0).all():
        ax.set_yscale("log")
    if figure["x"].get("logx"):
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    return lines, {name: above[-1] for name, above in covers.items() if above}


def replicates(figure: dict) -> dict[str, str]:
    """Seed replicate series -> the series they replicate (``replicate_of``)."""
    return {name: spec["replicate_of"] for name, spec in figure["series"].items()
            if (spec or {}).get("replicate_of")}


def draw(figure: dict, results: pd.DataFrame):
    plot = figure.get("plot", {})
    panels = [{"y": plot["y"], "ylabel": plot.get("ylabel", plot["y"]),
               "logy": plot.get("logy", False)}, *plot.get("extra_panels", [])]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    colors = series_colors(list(figure["series"]))
    for name, primary in replicates(figure).items():
        colors[name] = colors.get(primary, colors[name])
    legend_lines: dict = {}
    covered: dict[str, dict[str, list[int]]] = {}  # series -> series on top -> panels
    for i, (ax, p) in enumerate(zip(axes[0], panels, strict=True), start=1):
        lines, on_top = _panel(ax, figure, results, p["y"], p.get("ylabel", p["y"]),
                               p.get("logy", False), colors, figure.get("paper_values", []))
        if i == 1:  # the figure's legend is the first panel's
            legend_lines = lines
        for name, top in on_top.items():
            covered.setdefault(name, {}).setdefault(top, []).append(i)
    labels = series_labels(figure)
    for name, tops in covered.items():
        if name in legend_lines:
            legend_lines[name].set_label(labels[name] + "".join(
                coincidence_note(labels[top], where, len(panels)) for top, where in tops.items()))
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
