"""The DINER paper's experiment kind (single_site_join) and generator (diner_streams): a tiny
diner/fig10 point per series through the real command line, every total checked against the
exact join size, plotted; the generator's streams as the paper describes them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from datagen.diner_streams import generate
from datagen.errors import GeneratorError
from experiments.kinds.single_site import exact_join_size, operator_params, rule_buckets
from figures.plot import plot_figure
from runtime.paths import ROOT


@pytest.mark.slow
def test_a_tiny_fig10_point_per_series(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "figure=diner/fig10",
                           "scale=tiny", "point.x=3.0", f"results_root={tmp_path}"],
                          cwd=ROOT, text=True, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = pd.concat([pd.read_parquet(f) for f in (tmp_path / "diner" / "fig10").glob("*.parquet")])
    from experiments.figures import load_figure

    assert set(res["series"]) == set(load_figure("diner/fig10", "tiny")["series"])
    assert (res["status"] == "ok").all()
    v = res.pivot_table(index="series", columns="metric", values="value")
    assert (v["total_results"] == v["oracle_rows"]).all()
    assert (v["online_results"] <= v["total_results"]).all()
    assert (v["memory_max"] <= v["memory_budget_tuples"]).all()
    pauses = [s for s in v.index if "pauses" in s]  # WaitThresh read as: only injected pauses
    # the seven readings, and DINER's and RPJ's seed replicates of T5-rpj (rule 3)
    assert len(pauses) == 7 + 4 and (v.loc[pauses, "reactive_episodes"] == 0).all()
    assert v.loc["diner", "reactive_episodes"] > 0
    assert (v.loc[["hmj_pauses", "rpj_pauses", "hmj", "rpj"], "n_part"] == 10).all()
    assert v.loc["hmj_pauses_1000", "n_part"] == 1000
    assert v.loc["diner_pauses", "wait_thresh"] == 250 and v.loc["diner", "wait_thresh"] == 25
    png = plot_figure("diner/fig10", "tiny", str(tmp_path))
    assert png is not None and png.exists() and png.with_suffix(".pdf").exists()


def test_streams_as_the_paper_describes_them(tmp_path):
    rows = generate({"n_r": 20000, "n_s": 5000, "s": 2.0, "seed": 3,
                     "pauses": [[0.5, 1000.0]]}, tmp_path)
    assert rows == {"R": 20000, "S": 5000}  # the rows written, as the files hold them:
    r = pd.read_parquet(tmp_path / "R.parquet")
    assert len(r) == 20000 and len(pd.read_parquet(tmp_path / "S.parquet")) == 5000
    assert r["key"].between(1, 999).all() and (r["key"] == 1).mean() > 0.5  # Zipf s = 2
    gaps = np.diff(r["t"].to_numpy())
    assert 9 < np.median(gaps[gaps < 500]) / np.log(2) < 11  # exponential, mean 1/0.1
    assert (gaps > 1000).sum() == 1  # the pause
    shifted = generate({"n_r": 20000, "n_s": 20000, "keys": "normal", "mean_shift": 40.0,
                        "variance_shift": 150.0, "seed": 1}, tmp_path / "n")
    assert shifted == {"R": 20000, "S": 20000}
    a, b = (pd.read_parquet(tmp_path / "n" / f"{t}.parquet")["key"] for t in "RS")
    assert abs(b.mean() - a.mean() - 40) < 1 and abs(b.var() / a.var() - 4) < 0.3
    generate({"n_r": 20000, "n_s": 5000, "s": 2.0, "seed": 3,
              "pauses": [[0.5, 1000.0]]}, tmp_path / "again")
    assert pd.read_parquet(tmp_path / "again" / "R.parquet").equals(r)  # seeded: the same
    with pytest.raises(GeneratorError, match="keys must be zipf or normal"):
        generate({"keys": "uniform"}, tmp_path / "bad")


def test_exact_join_size_from_key_counts():
    r = pd.DataFrame({"key": pd.array([1, 1, 2, None, 5], dtype="Int64")})
    s = pd.DataFrame({"key": pd.array([1, 2, 2, 2, None], dtype="Int64")})
    assert exact_join_size(r, s) == 2 * 1 + 1 * 3


@pytest.mark.stress  # a long end-to-end run (41 s): make stress, keeping make test under 20 min
def test_band_joins_on_the_stand_ins_and_delays_through_the_command_line(tmp_path):
    """diner/fig13 (DINER and PMJ band joins on both trace stand-ins: every total is the exact
    band join size, else the point would be an error) and a diner/fig16 point (delays): the
    buffer metrics, and an overflow only where the buffer outgrew the memory."""
    for args in (["figure=diner/fig13", "point.series=diner_csco_pauses,pmj_csco,pmj_weather"],
                 ["figure=diner/fig16", "point.series=rpj_pauses,diner_pauses", "point.x=0.1"]):
        proc = subprocess.run([sys.executable, "-m", "experiments.run", "scale=tiny", *args,
                               f"results_root={tmp_path}", "progress=false"],
                              cwd=ROOT, text=True, capture_output=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
    band = pd.concat(pd.read_parquet(f) for f in (tmp_path / "diner" / "fig13").glob("*.parquet"))
    assert (band["status"] == "ok").all()
    v = band.pivot_table(index="series", columns="metric", values="value")
    assert (v["total_results"] == v["oracle_rows"]).all()
    assert v.loc["pmj_csco", "total_results"] == v.loc["diner_csco_pauses", "total_results"]
    delays = pd.concat(pd.read_parquet(f)
                       for f in (tmp_path / "diner" / "fig16").glob("*.parquet"))
    d = delays.pivot_table(index="series", columns="metric", values="value")
    status = delays.groupby("series")["status"].first()
    for series in d.index:
        overflowed = d.loc[series, "buffer_max"] > d.loc[series, "memory_budget_tuples"]
        assert status[series] == ("overflow" if overflowed else "ok")
        assert d.loc[series, "buffer_at_handover_mean"] <= d.loc[series, "buffer_at_handover_max"]
    assert d.loc["diner_pauses", "reactive_episodes"] > 0  # the pauses start reactive phases


def test_trace_stand_ins():
    """stock_trace: CSCO's 20,710 trades split in halves, prices in cents that drift by the
    walk; weather_trace: two stations of 45,000 readings in tenths of a degree; seeded."""
    import tempfile
    from pathlib import Path

    from datagen.stock_trace import generate as stock
    from datagen.weather_trace import generate as weather

    a, b, w = (Path(tempfile.mkdtemp()) for _ in range(3))
    assert stock({}, a) == {"R": 10355, "S": 10355}
    stock({}, b)
    r = pd.read_parquet(a / "R.parquet")
    assert r.equals(pd.read_parquet(b / "R.parquet"))
    assert r["key"].dtype == np.int64 and 50 < r["key"].nunique() < 400
    assert abs(int(r["key"].iloc[0]) - 2000) < 10 and (np.diff(r["t"]) >= 0).all()
    assert weather({"readings": 45000}, w) == {"R": 45000, "S": 45000}
    sea, sf = (pd.read_parquet(w / f"{t}.parquet")["key"] for t in "RS")
    assert sea.between(150, 1100).all() and sf.between(400, 800).all()  # degrees F x 10
    assert exact_join_size(sea.to_frame(), sf.to_frame()) > 0


@pytest.mark.slow
def test_a_tiny_fig22_point_per_series_joins_four_inputs(tmp_path):
    """MINER and MJoin on the 4-way star through the kind: n inputs from query.json, the total
    checked against DuckDB's count of the join."""
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "figure=diner/fig22",
                           "scale=tiny", "point.x=0.05", f"results_root={tmp_path}"],
                          cwd=ROOT, text=True, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = pd.concat([pd.read_parquet(f) for f in (tmp_path / "diner" / "fig22").glob("*.parquet")])
    assert (res["status"] == "ok").all()
    v = res.pivot_table(index="series", columns="metric", values="value")
    assert set(v.index) == {"miner", "mjoin", "mjoin_10", "mjoin_1000"}
    assert (v["total_results"] == v["oracle_rows"]).all() and (v["oracle_rows"] > 0).all()
    assert (v["input_tuples"] == 2 * 600 + 2 * 60).all()
    assert (v["memory_max"] <= v["memory_budget_tuples"]).all()


def test_the_chain_inputs_as_the_paper_describes_them(tmp_path):
    from datagen.miner_chain import generate as chain

    rows = chain({"inputs": 4, "middle": 5000, "keys": 500, "seed": 2}, tmp_path)
    assert rows == {"R1": 500, "R2": 5000, "R3": 5000, "R4": 500}
    r1, r2, r3, r4 = (pd.read_parquet(tmp_path / f"R{i}.parquet") for i in range(1, 5))
    assert sorted(r1["a1"]) == list(range(500)) and sorted(r4["a3"]) == list(range(500))
    assert (r2["a2"] == 0).mean() > 0.1  # Zipf s = 1 over 500 values: rank 1 is 1/H(500)
    assert abs(r1["t"].max() / r2["t"].max() - 1) < 0.2  # every relation over the same span
    star = chain({"inputs": 4, "middle": 5000, "keys": 500, "seed": 2, "star": True},
                 tmp_path / "star")
    assert star == rows
    assert pd.read_parquet(tmp_path / "star" / "R2.parquet")["a"].equals(r2["a2"])
    with pytest.raises(GeneratorError):
        chain({"inputs": 5}, tmp_path / "bad")


def _keys(n: int) -> pd.DataFrame:
    return pd.DataFrame({"key": pd.array(list(range(n)) + [None], dtype="Int64")})


def test_the_bucket_rule_wants_ten_values_a_bucket_in_the_poorer_relation():
    assert rule_buckets({"R": _keys(999), "S": _keys(999)}) == 10  # Zipf over 999: 99.9 < 100
    assert rule_buckets({"R": _keys(1000), "S": _keys(5000)}) == 100
    assert rule_buckets({"R": _keys(20000), "S": _keys(10000)}) == 1000
    assert rule_buckets({"R": _keys(60), "S": _keys(10**4)}) == 10  # at least 10
    assert rule_buckets({"R": _keys(0), "S": _keys(0)}) == 10


def test_operator_params_convert_the_papers_milliseconds_once():
    frames = {"R": _keys(5000), "S": _keys(5000)}
    run = {"time_unit_ms": 0.1, "paper_ms": {"wait_thresh": 25.0, "c_read": 0.2},
           "baseline_buckets": "rule", "operator_params": {"tups_per_block": 50}}
    assert operator_params(run, "rpj", frames) == {
        "tups_per_block": 50, "wait_thresh": 250.0, "c_read": 2.0, "n_part": 100}
    assert "n_part" not in operator_params(run, "diner", frames)  # DINER has no buckets
    given = {**run, "operator_params": {"n_part": 1000, "wait_thresh": 1.0}}
    assert operator_params(given, "hmj", frames)["n_part"] == 1000  # a series' own count
    assert operator_params(given, "hmj", frames)["wait_thresh"] == 1.0
    assert operator_params({**run, "time_unit_ms": 1.0}, "hmj", frames)["wait_thresh"] == 25.0
    scaled = operator_params({**run, "cost_factor": 5.0}, "hmj", frames)
    assert scaled["c_read"] == 10.0 and scaled["wait_thresh"] == 250.0  # blocks only
    with pytest.raises(ValueError, match="time_unit_ms"):
        operator_params({**run, "time_unit_ms": 0}, "hmj", frames)
