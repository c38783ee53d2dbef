"""The BiStream paper's experiment kind (bistream_join) and generator (bistream_streams): tiny
points through the real command line (a bandwidth point per setting, a window point), every
result count checked against DuckDB's, plotted; the streams as the paper describes them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from datagen.bistream_streams import PROJECTED_BYTES, generate
from experiments.figures import load_figure
from experiments.kinds.bistream import crossing, scale_rate, settings_label
from figures.plot import plot_figure
from runtime.paths import ROOT


def _run(tmp_path, figure: str, *extra: str) -> pd.DataFrame:
    proc = subprocess.run([sys.executable, "-m", "experiments.run", f"figure={figure}",
                           "scale=tiny", f"results_root={tmp_path}", *extra],
                          cwd=ROOT, text=True, capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    paper, fig = figure.split("/")
    return pd.concat([pd.read_parquet(f) for f in (tmp_path / paper / fig).glob("*.parquet")])


@pytest.mark.slow
def test_tiny_bandwidth_points_have_the_message_identities(tmp_path):
    res = _run(tmp_path, "bistream/fig11", "point.x=15000", "point.series=jb8_cr4,jm16")
    assert (res["status"] == "ok").all()
    v = res[res["t"].isna()].pivot_table(index="series", columns="metric", values="value")
    assert (v["results"] == v["oracle_rows"]).all()
    # messages per tuple: JB8-CR4 1 + 1, JM16 sqrt(16); the closed forms hold
    assert v["messages_per_tuple"].round(6).to_dict() == {"jb8_cr4": 2.0, "jm16": 4.0}
    assert (v["bandwidth_over_model"].round(9) == 1).all()
    png = plot_figure("bistream/fig11", "tiny", str(tmp_path))
    assert png is not None and png.exists()


@pytest.mark.slow
def test_a_tiny_window_point_is_exact_and_bounded(tmp_path):
    res = _run(tmp_path, "bistream/fig6b", "point.series=w3")
    v = res[res["t"].isna()].set_index("metric")["value"]
    assert (res["status"] == "ok").all() and v["results"] == v["oracle_rows"] > 0
    assert v["mlv_growth"] < 1.1 and v["saturated"] == 0


def test_streams_keep_equal_bytes_per_second(tmp_path):
    generate({"query": "eq7", "sf": 0.01, "tuples": 20000, "rate": 1000.0}, tmp_path)
    r, s = (pd.read_parquet(tmp_path / f"{t}.parquet") for t in "RS")
    assert len(r) + len(s) == 20000 and r["pass"].max() > 5  # the small side replayed
    chi_r, chi_s = PROJECTED_BYTES["eq7"]
    span = max(r["t"].max(), s["t"].max())
    assert abs(len(r) * chi_r / (len(s) * chi_s) - 1) < 0.01  # equal bytes per second
    assert abs((len(r) + len(s)) / span - 1000) < 5  # the total rate
    assert (np.diff(r["t"]) > 0).all()
    again = tmp_path / "again"
    generate({"query": "eq7", "sf": 0.01, "tuples": 20000, "rate": 1000.0}, again)
    assert pd.read_parquet(again / "R.parquet").equals(r)


def test_crossing_interpolates_inside_the_micro_batch():
    vol = np.array([100.0, 200.0, 300.0])
    assert crossing(vol, np.array([1.0, 3.0, 5.0]), 4.0) == 250.0
    assert np.isnan(crossing(vol, np.array([1.0, 2.0, 3.0]), 4.0))
    assert crossing(vol, np.array([5.0, 6.0, 7.0]), 4.0) == 100.0
    assert settings_label("jb", 16, 4) == "JB16-CR4" and settings_label("jm", 36, None) == "JM36"


def test_rates_follow_the_scaling_rule_unless_the_paper_s_rate_is_kept():
    """The rule multiplies a rate by the scale's factor; ``rate_scaled: false`` keeps the
    paper's (Fig 14's Band, by the figure base's amendment for counts per period), and the
    key does not reach the generator."""
    scaled = {"query": "eq5", "rate": 450000}
    assert scale_rate(scaled, 0.002) == 0.002 and scaled["rate"] == pytest.approx(900.0)
    kept = {"query": "bnci", "rate": 9000, "rate_scaled": False}
    assert scale_rate(kept, 0.002) == 1.0 and kept == {"query": "bnci", "rate": 9000.0}
    by_x = load_figure("bistream/fig14", "small")["workload"]["params_by_x"]
    assert by_x["bnci"]["rate_scaled"] is False
    assert all("rate_scaled" not in by_x[q] for q in ("eq5", "eq7"))


@pytest.mark.slow
def test_a_tiny_point_past_capacity_is_charged_and_still_exact(tmp_path):
    """Fig 7: JM16 passes C within the stream: its units' tuples beyond the budget are
    charged as spilled, its probes there as disk probes, its throughput falls; the results
    are DuckDB's."""
    res = _run(tmp_path, "bistream/fig7", "point.series=jm16")
    v = res[res["t"].isna()].set_index("metric")["value"]
    assert (res["status"] == "ok").all() and v["results"] == v["oracle_rows"] > 0
    assert v["spilled"] > 0 and v["disk_probes"] > 0
    assert v["throughput_past_capacity"] < v["throughput_in_memory"] / 2
    assert v["overflow_volume_millions"] == pytest.approx(v["max_volume_millions"], rel=0.1)
    series = res[res["metric"] == "throughput_t"]
    assert len(series) > 100 and (series["value"] > 0).all()


@pytest.mark.slow
def test_tiny_aggregation_and_latency_points(tmp_path):
    """Fig 14: one view message per result unbatched, fewer batched; Fig 9's latency
    quantiles are ordered and drawn as box plots."""
    res = _run(tmp_path, "bistream/fig14", "point.x=eq5")
    v = res[res["t"].isna()].set_index("metric")["value"]
    assert (res["status"] == "ok").all() and v["results"] == v["oracle_rows"] > 0
    assert v["view_messages_unbatched"] == v["results"]
    assert 0 < v["view_messages_batched"] < v["view_messages_unbatched"]
    assert 0.9 < v["aggregation_throughput_share"] <= 1.0
    lat = _run(tmp_path, "bistream/fig9", "point.x=eq7", "point.series=jb16,jm16")
    q = lat[lat["t"].isna()].pivot_table(index="series", columns="metric", values="value")
    names = ["latency_ms_min", "latency_ms_p25", "latency_ms_p50", "latency_ms_p75",
             "latency_ms_max"]
    assert (q[names].diff(axis=1).iloc[:, 1:] >= 0).all().all()
    png = plot_figure("bistream/fig9", "tiny", str(tmp_path))
    assert png is not None and png.exists()
