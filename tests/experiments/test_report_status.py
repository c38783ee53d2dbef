"""A figure that draws another figure's runs (``runs_of``): stale only when those runs are
(REPORT.md), and its wall time counted once, under the figure that made the runs (README)."""

from __future__ import annotations

import pytest

from experiments.figure_spec import config_hash, x_label, x_numeric, x_values
from experiments.figures import load_figure
from experiments.report import stale_points
from experiments.results import Point, tidy_frame, write_point

MAKER, DRAWER = "diner/fig9", "diner/table4"  # Table 4 draws the diner series of Fig 9's runs


def _rows(made_by: dict, wall_s: float = 90.0) -> list[tuple[Point, list[dict]]]:
    """One ok row per point of ``made_by``'s sweep at tiny scale, hashed by ``made_by``."""
    points = []
    for series in made_by["series"]:
        for x in x_values(made_by, "tiny"):
            point = Point(MAKER, series, x_numeric(made_by, x), x_label(x))
            points.append((point, [{
                "figure": MAKER, "series": series, "x": point.x, "x_label": point.x_label,
                "metric": "modeled_time", "value": 1.0, "status": "ok", "point_id": point.point_id,
                "seed": 0, "scale": "tiny", "wall_time_s": wall_s,
                "config_hash": config_hash(made_by, "tiny", 0, series)}]))
    return points


def _frame(made_by: dict):
    return tidy_frame([row for _, rows in _rows(made_by) for row in rows])


@pytest.fixture(scope="module")
def figures():
    return load_figure(MAKER, "tiny"), load_figure(DRAWER, "tiny")


def test_a_runs_of_figure_is_not_stale_while_its_runs_are_current(figures):
    maker, drawer = figures
    results = _frame(maker)
    assert stale_points(maker, results) == []
    # its own id, title and metrics (which differ from Fig 9's) do not make the runs stale
    assert (drawer["title"], drawer["metrics"]) != (maker["title"], maker["metrics"])
    assert stale_points(drawer, results) == []


def test_a_runs_of_figure_is_stale_when_its_runs_are(figures):
    maker, drawer = figures
    # every run made under earlier settings of Fig 9
    earlier = {**maker, "run": {**maker["run"], "tick": 12345}}
    results = _frame(earlier)
    drawn = sorted(results[results.series.isin(list(drawer["series"]))].point_id.unique())
    assert stale_points(maker, results) == sorted(results.point_id.unique())
    assert stale_points(drawer, results) == drawn  # only the points it draws are its own
    # one series' runs stale: exactly those, in both figures
    one = {**maker, "series": {**maker["series"], "diner_csco": {
        **maker["series"]["diner_csco"], "overrides": {"run.tick": 12345}}}}
    results = _frame(one)
    stale = sorted(results[results.series == "diner_csco"].point_id.unique())
    assert stale_points(maker, results) == stale == stale_points(drawer, results)
    # a series of Fig 9 that Table 4 does not draw is Fig 9's business only
    one = {**maker, "series": {**maker["series"], "rpj_csco": {
        **maker["series"]["rpj_csco"], "overrides": {"run.tick": 12345}}}}
    results = _frame(one)
    assert stale_points(maker, results) != [] and stale_points(drawer, results) == []


def test_readme_table_counts_each_run_once(figures, tmp_path, monkeypatch):
    from experiments import status

    monkeypatch.setattr(status, "figure_ids", lambda: [MAKER, "diner/table3", DRAWER])
    maker, _ = figures
    for point, rows in _rows(maker, wall_s=90.0):
        write_point(tmp_path / MAKER, point, rows)
    n = len(maker["series"]) * len(x_values(maker, "tiny"))
    table = status.figure_table(str(tmp_path)).splitlines()

    def cells(name: str) -> list[str]:
        return next(line for line in table if line.startswith(f"| {name} ")).split(" | ")

    minutes = f"{n * 90 / 60:.1f} min"
    assert cells(f"`{MAKER}`")[-2] == minutes
    assert cells(f"`{DRAWER}`")[-2] == f"runs of `{MAKER}`"  # Fig 9's runs: not counted again
    assert cells("`diner/table3`")[-2] == "–"  # no results
    total = cells("**total**")
    assert total[3] == f"{n} points" and total[4].startswith(f"**{minutes}**")


def test_compare_counts_leaves_times_out_and_finds_a_changed_count():
    import pandas as pd

    from experiments.results import compare_counts

    def point(outputs: float, seconds: float, status: str = "ok") -> pd.DataFrame:
        return pd.DataFrame({"series": "a", "x": 1.0, "metric": ["outputs", "modeled_time",
                                                                   "wall"],
                             "value": [outputs, seconds, seconds], "t": None,
                             "unit": ["rows", "modeled s", "local wall s"], "status": status})

    assert compare_counts(point(10, 1.0), point(10, 2.0)) == (1, [])
    rows, differ = compare_counts(point(10, 1.0), point(11, 1.0))
    assert rows == 1 and differ == ["a x=1 outputs: 10.0 -> 11.0"]
    assert compare_counts(point(10, 1.0), point(10, 1.0, "oom"))[1]
