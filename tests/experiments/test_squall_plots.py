"""The squall plot kinds on synthetic result rows (no Spark): bars mark overflow with the
paper's asterisk and keep the paper's numbers on their own axis; the table shows paper values."""

from __future__ import annotations

import matplotlib.pyplot as plt

from experiments.figures import load_figure
from experiments.results import tidy_frame
from figures.kinds import load


def _rows(series, x, status, metrics, t=None):
    base = {"figure": "f", "series": series, "x": x, "x_label": str(x), "status": status,
            "point_id": f"{series}_{x}", "seed": 0, "scale": "tiny", "spark_version": "v",
            "spark_master": "local", "calibration_id": "c", "git_commit": "g",
            "wall_time_s": 1.0, "config_hash": "h"}
    return [{**base, "metric": m, "value": v, "t": t} for m, v in metrics.items()]


def test_bars_mark_overflow_and_overlay_paper():
    fig_cfg = load_figure("squall/table2", "tiny")
    rows = []
    for s in fig_cfg["series"]:
        for x in (0.0, 1.0):
            over = s == "eq5_static_mid"
            rows += _rows(s, x, "overflow" if over else "ok",
                          {"modeled_time": 2.0 if over else 0.5, "max_ilf": 100.0})
    fig = load("bars")(fig_cfg, tidy_frame(rows))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("*") >= 2  # one per overflowed bar (plus the paper's own asterisks)
    ylabels = [ax.get_ylabel() for ax in fig.axes]
    assert any(label.startswith("paper:") for label in ylabels)  # the paper's separate axis
    assert "modeled time (s)" in ylabels
    plt.close(fig)


def test_table_shows_paper_values():
    fig_cfg = load_figure("squall/theory", "tiny")
    rows = _rows("theory", 0.0, "ok", {"total_square_gb": 520.0})
    for r in rows:
        r["x_label"] = "fig2"
    fig = load("table")(fig_cfg, tidy_frame(rows))
    cells = [c.get_text().get_text() for ax in fig.axes for tab in ax.tables
             for c in tab.get_celld().values()]
    assert "520" in cells and cells.count("520") == 2  # computed and the paper's value
    plt.close(fig)
