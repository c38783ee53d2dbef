"""Line charts draw every status: values, overflow stars and failure marks (no crash)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from experiments.figures import load_figure
from figures.kinds import load
from figures.style import FAIL_MARKERS


@pytest.mark.parametrize("status", sorted(FAIL_MARKERS))
def test_lines_draw_each_status(status, tmp_path):
    figure = load_figure("amjoin/fig5", "tiny")
    rows = [{"series": "hash_join", "x": x, "metric": "modeled_time", "value": 1.0 + x,
             "status": "ok", "point_id": f"h{x}"} for x in (0.0, 0.5)]
    rows.append({"series": "am_join", "x": 1.0, "metric": "modeled_time", "value": 2.0,
                 "status": status, "point_id": "a1"})
    results = pd.DataFrame(rows)
    for col in ("scale", "spark_version", "spark_master", "calibration_id", "git_commit"):
        results[col] = "test"
    chart = load("lines")(figure, results)
    chart.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_redraw_is_byte_identical(tmp_path, monkeypatch):
    # a chart regenerated from the same results must not show up as a change in git
    from experiments.paths import ROOT
    from figures import plot

    monkeypatch.setattr(plot, "output_base", lambda figure_id, scale: tmp_path / "fig9")
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    drawn = []
    for i in range(2):
        time.sleep(1.1 * i)  # a PDF creation date (to the second) would now differ
        png = plot.plot_figure("amjoin/fig9", "small", results_root=str(ROOT / "results"))
        assert png is not None
        drawn.append((png.read_bytes(), png.with_suffix(".pdf").read_bytes()))
    assert drawn[0] == drawn[1] and len(drawn[0][1]) > 1000


def test_series_beyond_ten_get_their_own_colour_and_a_dashed_line():
    from figures.style import series_colors, series_linestyles

    names = [f"s{i}" for i in range(12)]
    colors, styles = series_colors(names), series_linestyles(names)
    assert len({tuple(c) for c in colors.values()}) == 12
    assert [styles[n] for n in names] == ["-"] * 10 + ["--"] * 2
