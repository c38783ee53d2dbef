"""Line charts draw every status: values, overflow stars and failure marks (no crash)."""

from __future__ import annotations

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
