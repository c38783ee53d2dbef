"""A table of scalar results (closed-form checks, e.g. the Squall theory figure), with the
paper's value next to each measured one, and an optional panel of within-run series (rows with
``t``) drawn as lines (e.g. the max ILF/ILF* per J).

Plot spec: ``rows`` (list of ``{x, metric, label}``; default every scalar metric), ``series_panel``
(``{metrics: [...], xlabel, ylabel, hline, logx}``).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from figures.style import footer_text


def _paper(figure: dict, x_label, metric: str) -> str:
    """The paper's value of a row (paper_values give x as the numeric position, as results do)."""
    cats = [str(c) for c in figure["x"].get("categories", [])]
    pos = float(cats.index(str(x_label))) if str(x_label) in cats else float(x_label)
    for p in figure.get("paper_values", []):
        if abs(float(p.get("x")) - pos) < 1e-9 and p.get("metric") == metric:
            return f"{p['value']:g}"
    return ""


def draw(figure: dict, results: pd.DataFrame):
    plot = figure.get("plot", {})
    scalar = results[results["t"].isna()]
    labels = scalar.groupby("x")["x_label"].first()
    specs = plot.get("rows") or [{"x": labels.get(x, x), "metric": m}
                                 for (x, m) in scalar.groupby(["x", "metric"]).groups]
    cells = []
    for spec in specs:
        sub = scalar[(scalar.x_label == str(spec["x"])) & (scalar.metric == spec["metric"])]
        val = f"{sub['value'].mean():.6g}" if len(sub) else "—"
        unit = sub["unit"].iloc[0] if len(sub) else ""
        cells.append([str(spec["x"]), spec.get("label", spec["metric"]), val,
                      "" if pd.isna(unit) else str(unit),
                      _paper(figure, spec["x"], spec["metric"])])
    panel = plot.get("series_panel")
    ncols = 2 if panel else 1
    fig, axes = plt.subplots(1, ncols, squeeze=False,
                             figsize=(7.5 + 4.5 * (ncols - 1), 0.75 + 0.26 * len(cells)),
                             gridspec_kw={"width_ratios": [7.5, 4.5][:ncols]})
    ax = axes[0][0]
    ax.set_axis_off()
    tab = ax.table(cellText=cells, colLabels=["check", "quantity", "computed", "unit", "paper"],
                   loc="upper center", cellLoc="left", colWidths=[0.12, 0.45, 0.16, 0.15, 0.12])
    tab.auto_set_font_size(False)
    tab.set_fontsize(7.5)
    if panel:
        ax2 = axes[0][1]
        lines = results[results["t"].notna()]
        for metric in panel["metrics"]:
            d = lines[lines.metric == metric].sort_values("t")
            ax2.plot(d["t"], d["value"], marker="o", label=metric)
        if panel.get("hline") is not None:
            ax2.axhline(panel["hline"], color="r", ls=":", label=f"bound {panel['hline']}")
        if panel.get("logx") and (lines["t"] > 0).any():
            ax2.set_xscale("log", base=2)
        ax2.set_xlabel(panel.get("xlabel", "t"))
        ax2.set_ylabel(panel.get("ylabel", "value"))
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=7)
    fig.suptitle(f"{figure['id']}: {figure['title']}", fontsize=11)
    fig.text(0.01, 0.0, footer_text(results, "closed form / exact counts"), fontsize=6.5,
             color="0.35")
    fig.tight_layout()
    return fig
