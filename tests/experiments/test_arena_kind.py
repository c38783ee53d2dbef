"""The arena kind (beyond the papers): several online operators on the same tiny timed stream,
each run's rows exact against DuckDB's join as a multiset; the equal-resources rule; the time
model's curve and its times to 50% and 100% of the join."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from experiments.figures import load_figure
from experiments.kinds import PointContext
from experiments.kinds.arena import run_point
from joins.arena import arena_metrics, is_single_site, time_to, unit_budget


def test_single_site_is_read_from_the_operators_declaration():
    assert is_single_site("diner", {}) and is_single_site("pmj", {})
    assert is_single_site("mjoin", {"flushing": "coordinated"})
    assert not is_single_site("mjoin", {})
    for name in ("shj", "dynamic", "join_biclique", "join_matrix", "dcape"):
        assert not is_single_site(name, {}), name


def test_the_equal_resources_rule():
    assert unit_budget("equal_total", 1600, 16, single_site=False) == 100
    assert unit_budget("equal_total", 1600, 16, single_site=True) == 1600
    assert unit_budget("equal_per_unit", 1600, 16, single_site=True) == 100
    with pytest.raises(ValueError, match="equal_total"):
        unit_budget("equal_memory", 1600, 16, single_site=False)


def test_time_to_a_share_interpolates_within_the_tick_that_reaches_it():
    bt, br = np.array([1.0, 2.0, 1.0]), np.array([10.0, 20.0, 10.0])
    ct, cr = np.cumsum(bt), np.cumsum(br)
    assert time_to(cr, ct, bt, br, 20.0) == pytest.approx(2.0)  # half of tick 2's results
    assert time_to(cr, ct, bt, br, 40.0) == pytest.approx(4.0)
    assert np.isnan(time_to(cr, ct, bt, br, 41.0))


def test_arena_metrics_of_two_units_and_a_clean_up():
    from joins.online import CostModel

    m = pd.DataFrame({
        "batch": [0, 0, 1, 1, 2, 2], "worker": [0, 1] * 3,
        "phase": ["normal"] * 4 + ["cleanup"] * 2,
        "received": [10, 30, 10, 10, 0, 0], "probes": [10, 30, 10, 10, 0, 0],
        "outputs": [5, 15, 10, 10, 0, 10], "migrated": [0, 0, 4, 0, 0, 0], "sent": 0,
        "spilled": 0, "disk_probes": [0, 0, 0, 0, 0, 20],
        "r_stored": [5, 15, 10, 15, 10, 15], "s_stored": [5, 15, 4, 5, 0, 0]})
    cost = CostModel(per_received=1.0, per_store_received=0.0, per_probe=0.0, per_output=0.0,
                     per_migrated=0.0, per_spilled=0.0, per_disk_probe=0.5, per_stored=0.0)
    got, series = arena_metrics(m, cost, expected=50, budget=25, total=60, tups_per_block=1)
    # per tick the slowest unit: 30, 10 (a tie: 10 each), 10 (20 tuples read back x 0.5)
    assert got["modeled_time_100"][0] == pytest.approx(50.0)
    assert got["modeled_time_50"][0] == pytest.approx(30.0 + 10.0 * 5 / 20)
    # the terms up to a share of the join add up to its time: receive to 50%, then the reads
    for pct in (50, 100):
        terms = [v for k, (v, _) in got.items() if k.startswith("time_term_")
                 and k.endswith(f"_to_{pct}")]
        assert sum(terms) == pytest.approx(got[f"modeled_time_{pct}"][0])
    assert got["time_term_receive_to_50"][0] == pytest.approx(32.5)
    assert got["time_term_disk_read_to_50"][0] == 0.0
    assert got["time_term_disk_read_to_100"][0] == pytest.approx(10.0)
    assert got["share_before_end"][0] == pytest.approx(40 / 50)
    assert got["network_tuples"][0] == 64 and got["peak_memory_per_unit"][0] == 25
    assert got["peak_state_per_unit"][0] == 30 and got["disk_read_tuples"][0] == 20
    assert [r["value"] for r in series if r["metric"] == "results_share_t"] == \
        [0.0, 0.4, 0.8, 1.0]


# the session fixture's own settings (tests/conftest.py), so that the point reuses its session
# instead of replacing it, which would stop the session every later test holds
SESSION = {"master": "local[2,2]", "master_env": None, "driver_memory": "2g",
           "conf": {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"}}


@pytest.mark.parametrize("series", ["shj", "diner_per_unit", "join_biclique_cr"])
def test_operators_meet_the_same_tiny_stream_exactly(spark, series):
    figure = copy.deepcopy(load_figure("arena/skew", "tiny"))
    figure["workload"]["sizes"]["tiny"] = {"n_r": 150, "n_s": 150, "domain": 20}
    pc = PointContext(figure=figure, series=series, x=1.5, scale="tiny", seed=0,
                      spark_cfg=SESSION, calibration=None,
                      progress=False)
    from runtime.cost_model import load_calibration

    pc.calibration = load_calibration()
    out = run_point(pc)
    assert out.status == "ok", out.error
    assert spark.sparkContext._jsc is not None and not spark.sparkContext._jsc.sc().isStopped()
    v = {k: val for k, (val, _) in out.metrics.items()}
    from datagen import materialize
    from joins.oracle import oracle_count

    params = {**figure["workload"]["params"], "n_r": 150, "n_s": 150, "domain": 20, "s": 1.5,
              "seed": 0}
    folder = materialize("diner_streams", params, progress=False)  # the same inputs
    assert v["oracle_rows"] == oracle_count(f"{folder}/R.parquet", f"{folder}/S.parquet") > 0
    assert v["exact"] == 1 and v["rows_missing"] == v["rows_in_excess"] == 0
    assert v["output_rows"] == v["oracle_rows"]
    assert 0 < v["modeled_time_50"] <= v["modeled_time_100"] <= v["modeled_time"]
    curve = [row["value"] for row in out.series_rows if row["metric"] == "results_share_t"]
    assert curve[-1] == pytest.approx(1.0) and curve == sorted(curve)
    if series == "diner_per_unit":  # a single site with M / J: it flushes to disk
        assert v["units"] == 1 and v["memory_per_unit_tuples"] == 300 // 4
        assert v["disk_written_tuples"] > 0 and v["share_before_end"] < 1
    else:
        assert v["units"] == 4 and v["memory_per_unit_tuples"] == 300 // 4


def test_graph_mismatch_counts_rows_missing_and_in_excess_windowed_and_three_way():
    from joins.arena import graph_mismatch
    from joins.oracle import oracle_graph

    rng = np.random.default_rng(0)
    r = pd.DataFrame({"key": rng.integers(0, 5, 40), "t": np.sort(rng.uniform(0, 100, 40))})
    s = pd.DataFrame({"key": rng.integers(0, 5, 40), "t": np.sort(rng.uniform(0, 100, 40))})
    edges = [("R", "key", "S", "key")]
    rows = oracle_graph({"R": r, "S": s}, edges, window=10.0, time="t",
                        prefixes={"R": "l_", "S": "r_"})
    full = oracle_graph({"R": r, "S": s}, edges, prefixes={"R": "l_", "S": "r_"})
    assert 0 < len(rows) < len(full)  # the window keeps some pairs, not all
    frames = {"R": r, "S": s}
    assert graph_mismatch(rows, frames, edges, window=10.0, time="t") == (0, 0)
    assert graph_mismatch(full, frames, edges, window=10.0, time="t") == \
        (0, len(full) - len(rows))  # the full join has the pairs outside the window in excess
    wrong = pd.concat([rows.iloc[1:], rows.iloc[:1], rows.iloc[:1]])  # one row twice
    assert graph_mismatch(wrong.iloc[1:], frames, edges, window=10.0, time="t") == (1, 1)
    three = {"A": r[["key"]].head(10), "B": s[["key"]].head(10), "C": r[["key"]].tail(10)}
    chain = [("A", "key", "B", "key"), ("B", "key", "C", "key")]
    rows3 = oracle_graph(three, chain)
    assert len(rows3) and graph_mismatch(rows3, three, chain) == (0, 0)
    assert graph_mismatch(rows3.iloc[:-1], three, chain) == (1, 0)


def _tiny_point(figure_id: str, series: str, x, sizes: dict):
    from runtime.cost_model import load_calibration

    figure = copy.deepcopy(load_figure(figure_id, "tiny"))
    figure["workload"]["sizes"]["tiny"] = {**figure["workload"]["sizes"]["tiny"], **sizes}
    pc = PointContext(figure=figure, series=series, x=x, scale="tiny", seed=0,
                      spark_cfg=SESSION, calibration=load_calibration(), progress=False)
    out = run_point(pc)
    assert out.status == "ok", out.error
    v = {k: val for k, (val, _) in out.metrics.items()}
    assert v["exact"] == 1 and v["rows_missing"] == v["rows_in_excess"] == 0
    assert v["output_rows"] == v["oracle_rows"] > 0
    return figure, v


def test_a_windowed_point_is_exact_against_the_windowed_join(spark):
    from datagen import materialize
    from joins.oracle import oracle_graph_count

    figure, v = _tiny_point("arena/windows", "join_biclique_cr", 0.05,
                            {"n_r": 150, "n_s": 150, "domain": 20})
    params = {**figure["workload"]["params"], **figure["workload"]["sizes"]["tiny"],
              "seed": 0}
    folder = materialize("diner_streams", params, progress=False)
    r, s = (pd.read_parquet(f"{folder}/{n}.parquet") for n in ("R", "S"))
    assert v["window"] == pytest.approx(0.05 * max(r["t"].max(), s["t"].max()))
    edges = [("R", "key", "S", "key")]
    assert v["oracle_rows"] == oracle_graph_count({"R": r, "S": s}, edges, window=v["window"],
                                                  time="t")
    assert v["oracle_rows"] < oracle_graph_count({"R": r, "S": s}, edges)  # a window: fewer
    assert v["units"] == 4


@pytest.mark.parametrize("series", ["miner", "mjoin"])
def test_a_three_input_point_is_exact_against_the_three_way_join(spark, series):
    from datagen import materialize
    from experiments.kinds.query_inputs import read_query
    from joins.oracle import oracle_graph_count

    figure, v = _tiny_point("arena/three_inputs", series, 0.05, {"middle": 150, "keys": 20})
    params = {**figure["workload"]["params"], **figure["workload"]["sizes"]["tiny"],
              "seed": 0}
    frames, _, edges = read_query(materialize("miner_chain", params, progress=False))
    assert list(frames) == ["R1", "R2", "R3"]
    assert v["oracle_rows"] == oracle_graph_count(frames, edges)
    total = sum(len(f) for f in frames.values())
    assert v["units"] == 1 and v["memory_per_unit_tuples"] == round(0.05 * total)
    assert v["disk_written_tuples"] > 0  # 5% of the input: a single site flushes


def test_the_fluctuation_figures_workload_is_the_x_cells(spark):
    from datagen import materialize
    from joins.oracle import oracle_count

    figure, v = _tiny_point("arena/fluctuation", "shj", "fluct",
                            {"n_r": 150, "n_s": 150, "domain": 20})
    wl = figure["workload"]
    params = {**wl["params"], **wl["sizes"]["tiny"], **wl["params_by_x"]["fluct"], "seed": 0}
    assert params["order"] == "fluct" and params["order_times"]
    folder = materialize("diner_streams", params, progress=False)  # the point's inputs
    assert v["oracle_rows"] == oracle_count(f"{folder}/R.parquet", f"{folder}/S.parquet")
