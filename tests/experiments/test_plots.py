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
    from figures import plot
    from runtime.paths import ROOT

    monkeypatch.setattr(plot, "chart_base", lambda figure_id, scale: tmp_path / "fig9")
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


def test_arena_time_series_give_each_drawn_series_its_own_colour_and_look():
    # arena/skew draws 14 of its 48 series (seed replicates and sensitivity series not drawn):
    # colours follow the drawn series, past ten each has a line style and a marker too
    import matplotlib.pyplot as plt

    from figures.style import series_colors

    assert len(set(series_colors([f"s{i}" for i in range(24)]).values())) == 24
    figure = load_figure("arena/skew", "tiny")
    drawn = figure["plot"]["series"]
    rows = [{"series": name, "x": 0.0, "x_label": "0.0", "metric": "results_share_t", "t": t,
             "value": t / 2, "status": "ok", "point_id": name} for name in figure["series"]
            for t in (0.0, 1.0, 2.0)]
    results = pd.DataFrame(rows)
    for col in ("scale", "spark_version", "spark_master", "calibration_id", "git_commit"):
        results[col] = "test"
    chart = load("timeseries")(figure, results)
    lines = [ln for ln in chart.axes[0].get_lines() if ln.get_label() in
             {(figure["series"][n] or {}).get("label", n) for n in drawn}]
    assert len(lines) == len(drawn)
    assert len({ln.get_color() if isinstance(ln.get_color(), str) else tuple(ln.get_color())
                for ln in lines}) == len(drawn)
    assert len({(ln.get_linestyle(), ln.get_marker()) for ln in lines}) == len(drawn)
    plt.close(chart)


def _results(values: dict[str, list[float]], metric: str = "modeled_time") -> pd.DataFrame:
    rows = [{"series": name, "x": float(x), "metric": metric, "value": v, "status": "ok",
             "point_id": f"{name}{x}"} for name, vs in values.items() for x, v in enumerate(vs)]
    results = pd.DataFrame(rows)
    for col in ("scale", "spark_version", "spark_master", "calibration_id", "git_commit"):
        results[col] = "test"
    return results


def test_a_covered_series_is_drawn_wider_beneath_and_named_in_the_legend():
    # fig5/fig7: Hash-Join's modeled times equal AQE-no-skew's and were hidden under its line
    figure = {"id": "t", "title": "t", "x": {"label": "x"}, "plot": {"y": "modeled_time"},
              "series": {"hash_join": {"label": "Hash-Join"}, "am_join": {"label": "AM-Join"},
                         "aqe": {"label": "AQE"}}}
    chart = load("lines")(figure, _results(
        {"hash_join": [1.0, 2.0, 3.0], "am_join": [1.0, 2.5, 3.0], "aqe": [1.0, 2.0, 3.0]}))
    assert [t.get_text() for t in chart.legends[0].get_texts()] == \
        ["Hash-Join (= AQE)", "AM-Join", "AQE"]
    hidden, other, top = chart.axes[0].get_lines()
    assert hidden.get_linewidth() > top.get_linewidth() == other.get_linewidth()
    assert hidden.get_markersize() > top.get_markersize()
    assert len({line.get_marker() for line in (hidden, other, top)}) == 3


def test_coincidence_is_named_per_panel():
    figure = load_figure("amjoin/fig5", "tiny")  # three panels: modeled time, load, wall time
    equal = _results({"hash_join": [1.0, 2.0], "spark3_join": [1.0, 2.0],
                      "spark_aqe_no_skew": [1.0, 2.0]})
    wall = _results({"hash_join": [5.0, 6.0], "spark3_join": [5.0, 7.0],
                     "spark_aqe_no_skew": [5.0, 6.0]}, "local_wall_time")
    chart = load("lines")(figure, pd.concat([equal, wall], ignore_index=True))
    labels = [t.get_text() for t in chart.legends[0].get_texts()]
    aqe = figure["series"]["spark_aqe_no_skew"]["label"]
    assert labels == [f"Hash-Join (= {aqe} in panels 1, 3)", f"Spark3-Join (= {aqe} in panel 1)", aqe]


def test_covering_series_needs_equal_values_at_every_x():
    from figures.style import covering_series

    s = {"a": pd.Series([1.0, 2.0], index=[0, 1]), "b": pd.Series([1.0, 2.0000001], index=[0, 1]),
         "c": pd.Series([1.0, 2.1], index=[0, 1]), "d": pd.Series([1.0], index=[0]),
         "e": pd.Series([], dtype=float)}
    assert covering_series(s) == {"a": ["b"], "b": [], "c": [], "d": []}


def test_a_seed_replicate_is_drawn_thin_in_its_series_colour_under_one_legend_entry():
    figure = {"id": "t", "title": "t", "x": {"label": "x"}, "plot": {"y": "modeled_time"},
              "series": {"hash_join": {"label": "Hash-Join"}, "am_join": {"label": "AM-Join"},
                         "hash_join_seed1": {"label": "Hash-Join, seed 1",
                                             "replicate_of": "hash_join"},
                         "hash_join_seed2": {"label": "Hash-Join, seed 2",
                                             "replicate_of": "hash_join"}}}
    chart = load("lines")(figure, _results({"hash_join": [1.0, 2.0], "am_join": [1.5, 2.5],
                                            "hash_join_seed1": [1.0, 2.0],
                                            "hash_join_seed2": [1.1]}))
    labels = [t.get_text() for t in chart.legends[0].get_texts()]
    assert labels == ["Hash-Join", "AM-Join", "other seeds (thin, dotted; verdict rule 3)"]
    primary, _, seed1, seed2, _ = chart.axes[0].get_lines()
    assert seed1.get_color() == seed2.get_color() == primary.get_color()
    assert seed1.get_linestyle() == ":" and seed1.get_linewidth() < primary.get_linewidth()
