"""Speedup lines: 1 - t(numerator)/t(denominator) per pair of series against x (e.g. the
same-attribute self-join against the regular join of a relation with itself)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from figures.style import footer_text, series_colors, y_kind_of


def _values(results: pd.DataFrame, series: str, metric: str) -> pd.Series:
    sub = results[(results.series == series) & (results.metric == metric) & (results.status == "ok")]
    return sub.groupby("x")["value"].mean()


def draw(figure: dict, results: pd.DataFrame):
    plot = figure["plot"]
    metric = plot["y"]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    colors = series_colors([p["label"] for p in plot["pairs"]])
    for pair in plot["pairs"]:
        speedup = (1 - _values(results, pair["numerator"], metric)
                   / _values(results, pair["denominator"], metric)).dropna().sort_index()
        if not speedup.empty:
            ax.plot(speedup.index, 100 * speedup.to_numpy(), marker="o", ms=3.5,
                    color=colors[pair["label"]], label=pair["label"])
    for ref in plot.get("paper_lines", []):
        ax.axhline(ref["value"], ls="--", color="0.4", lw=1, label=ref["label"])
    ax.set_xlabel(figure["x"].get("label", "x"))
    ax.set_ylabel(plot.get("ylabel", f"speedup (% less {metric})"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"{figure['id']}: {figure['title']}", fontsize=10)
    fig.text(0.01, -0.03, footer_text(results, y_kind_of(plot.get("ylabel", metric))),
             fontsize=6.5, color="0.35")
    fig.tight_layout()
    return fig
