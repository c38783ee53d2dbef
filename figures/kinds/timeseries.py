"""Within-run time series (rows with ``t``): a metric against the fraction of input processed.

Plot spec: ``y`` (a series metric), ``ylabel``, ``logy``, ``xlabel``, ``t_scale`` (default 100:
``t`` is a fraction drawn in %; 1 when ``t`` is already the axis' unit, e.g. event time); ``panels: x`` draws one
panel per x value of the sweep (e.g. per fluctuation factor k), ``single`` (default) puts every
(series, x) line in one panel; ``series`` limits the lines; ``right: {y, ylabel, logy, series,
hline, ylim}`` adds a right-hand axis (e.g. ILF/ILF* next to |R|/|S|); ``shade: {metric, series}``
shades intervals stored as rows with t = start and value = end (migrations); ``hline`` draws a
bound on the left axis; ``logx`` a log x axis, ``markers`` a dot at each point; rows
``warmup_end_t`` mark the end of the warm-up. Failed runs are listed in the panel title.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from figures.style import (
    footer_text,
    series_colors,
    series_labels,
    series_linestyles,
    series_markers,
    y_kind_of,
)


def _lines(ax, figure: dict, data: pd.DataFrame, y: str, names: list[str], colors: dict,
           many_x: bool, style: str = "-", looks: dict | None = None) -> None:
    labels = series_labels(figure)
    xname = figure["x"].get("name", "x")
    sub = data[data.metric == y]
    xs = sorted(sub["x"].unique())
    cmap = plt.get_cmap("viridis")
    for name in names:
        for i, x in enumerate(xs):
            line = sub[(sub.series == name) & (sub.x == x)].sort_values("t")
            if line.empty:
                continue
            label = labels.get(name, name)
            color = colors[name]
            if many_x:
                xl = line["x_label"].iloc[0]
                label = f"{label}, {xname}={xl}" if len(names) > 1 else f"{xname}={xl}"
                color = cmap(i / max(1, len(xs) - 1)) if len(names) == 1 else color
            plot = figure.get("plot", {})
            look = (looks or {}).get(name)  # a drawn series' own line style and marker
            ls, marker = (look if look and style == "-" else
                          (style, "o" if plot.get("markers") else None))
            ax.plot(line["t"] * plot.get("t_scale", 100), line["value"], linestyle=ls,
                    color=color, lw=1.2, label=label, marker=marker, ms=4,
                    markevery=None if plot.get("markers") else max(1, len(line) // 6),
                    drawstyle="steps-post" if y.startswith("ilf_ratio") else "default")


def _shade(ax, data: pd.DataFrame, spec: dict) -> None:
    rows = data[data.metric == spec.get("metric", "migration_t")]
    if spec.get("series"):
        rows = rows[rows.series == spec["series"]]
    first = True
    for _, r in rows.iterrows():
        ax.axvspan(r["t"] * 100, max(r["value"], r["t"]) * 100, color="0.6", alpha=0.25,
                   lw=0, label="migration" if first else None)
        first = False


def _panel(ax, figure, data, plot, colors, many_x):
    names = plot.get("series") or list(figure["series"])
    looks = None
    if len(names) > 10:  # past ten series: a line style and a marker each, besides the colour
        styles, markers = series_linestyles(names), series_markers(names)
        looks = {n: (styles[n], markers[n]) for n in names}
    _lines(ax, figure, data, plot["y"], names, colors, many_x, looks=looks)
    if plot.get("shade"):
        _shade(ax, data, plot["shade"])
    if plot.get("hline") is not None:
        ax.axhline(plot["hline"], color="r", ls=":", lw=1)
    marks = data[data.metric == "warmup_end_t"]
    if len(marks):
        ax.axvline(float(marks["t"].max()) * 100, color="0.3", ls="-.", lw=0.8,
                   label="end of warm-up")
    ax.set_xlabel(plot.get("xlabel", "input processed (%)"))
    ax.set_ylabel(plot.get("ylabel", plot["y"]))
    if plot.get("logy"):
        ax.set_yscale("log")
    if plot.get("logx"):
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    right = plot.get("right")
    if right:
        tw = ax.twinx()
        rnames = right.get("series") or list(figure["series"])
        _lines(tw, figure, data, right["y"], rnames, colors, many_x and len(rnames) > 1, "--")
        if right.get("hline") is not None:
            tw.axhline(right["hline"], color="r", ls=":", lw=1, label=f"bound {right['hline']}")
        tw.set_ylabel(right.get("ylabel", right["y"]))
        if right.get("logy"):
            tw.set_yscale("log")
        if right.get("ylim"):
            tw.set_ylim(*right["ylim"])
        h2, l2 = tw.get_legend_handles_labels()
        handles, labels = handles + h2, labels + [f"{lab} (right)" for lab in l2]
    ax.legend(handles, labels, fontsize=7, loc="best")


def draw(figure: dict, results: pd.DataFrame):
    plot = figure.get("plot", {})
    data = results[results["t"].notna()]
    # colours in the order of the series drawn (plot.series), so no drawn series shares one
    drawn = list(plot.get("series") or figure["series"])
    colors = series_colors(drawn + [n for n in figure["series"] if n not in drawn])
    status = results.groupby(["series", "x"])["status"].first()
    bad = status[status != "ok"]
    if plot.get("panels", "single") == "x":
        xs = sorted(results["x"].dropna().unique())
        groups = [(x, data[data.x == x]) for x in xs]
    else:
        groups = [(None, data)]
    ncols = min(len(groups), int(plot.get("ncols", 2)))
    nrows = -(-len(groups) // ncols)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(6.4 * ncols, 4.4 * nrows))
    for ax in axes.ravel()[len(groups):]:
        ax.set_axis_off()
    xname = figure["x"].get("name", "x")
    labels = results.groupby("x")["x_label"].first()
    for ax, (x, part) in zip(axes.ravel(), groups, strict=False):
        _panel(ax, figure, part, plot, colors, many_x=x is None and part["x"].nunique() > 1)
        title = f"{xname} = {labels.get(x, x)}" if x is not None else ""
        failed = [f"{s}: {st}" for (s, xx), st in bad.items() if x is None or xx == x]
        if failed:
            title += ("\n" if title else "") + "not ok: " + ", ".join(failed)
        ax.set_title(title, fontsize=9)
    fig.suptitle(f"{figure['id']}: {figure['title']}", fontsize=11)
    kinds = {y_kind_of(plot.get("ylabel", plot["y"]))}
    if plot.get("right"):
        kinds.add(y_kind_of(plot["right"].get("ylabel", plot["right"]["y"])))
    fig.text(0.01, -0.03, footer_text(results, "; ".join(sorted(kinds))), fontsize=6.5,
             color="0.35")
    fig.tight_layout()
    return fig
