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
from experiments.kinds.bistream import (
    _first_unit_crossing,
    _per_batch,
    balance_streams,
    crossing,
    scale_rate,
    settings_label,
)
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
@pytest.mark.stress  # a long end-to-end run (64 s): make stress, keeping make test under 20 min
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


def _fill_volume(r: pd.DataFrame, s: pd.DataFrame, model: str, units: int,
                 mem: tuple[float, float], capacity: float) -> float:
    """Input tuples at which the first unit of JBx / JMx reaches ``capacity`` (the kind's
    measure), on the local engine."""
    from joins.online import run_stream

    res = run_stream(None, r, s, operator={"jb": "join_biclique", "jm": "join_matrix"}[model],
                     joiners=units, batch_size=300, seed=0, progress=False, backend="local",
                     tuple_bytes=mem, time="t")
    per = _per_batch(res.metrics)
    volume = (per["r_seen"] + per["s_seen"]).to_numpy(float)
    return _first_unit_crossing(res.metrics, per, volume, capacity)


def test_equal_memory_per_stream_gives_the_symmetric_capacities(tmp_path):
    """The two memory readings (the figure base's choices.memory_reading) on Q7: balancing
    the stored bytes (overhead 291) fills JB16's two sides together, at 16 C over the
    tuples' harmonic-mean size, and JM16 (each tuple stored 4 times) at a quarter of that,
    Eqs. 1-2's symmetric model; balancing the projected bytes (overhead 248) leaves
    LINEITEM's units to fill first and JB16 holding 3.4x JM16, as before."""
    chi_r, chi_s = PROJECTED_BYTES["eq7"]
    out = {}
    for balance, o in (("stored", 291.0), ("projected", 248.0)):
        params = {"query": "eq7", "sf": 0.01, "tuples": 40000, "rate": 1000.0}
        balance_streams(params, {"stream_balance": balance, "tuple_overhead_bytes": o})
        assert ("stored_overhead_bytes" in params) == (balance == "stored")
        generate(params, tmp_path / balance)
        r, s = (pd.read_parquet(tmp_path / balance / f"{t}.parquet", columns=["key", "t"])
                for t in "RS")
        mem = (chi_r + o, chi_s + o)
        mean = 2 / (1 / mem[0] + 1 / mem[1])  # bytes per tuple when memory is balanced
        capacity = 25000 * mean / 16  # JB16 full at 25K of the 40K tuples if balanced
        out[balance] = (mem, capacity, mean, r, s,
                        *(_fill_volume(r, s, m, 16, mem, capacity) for m in ("jb", "jm")))
    mem, capacity, mean, r, s, jb16, jm16 = out["stored"]
    assert abs(len(r) * mem[0] / (len(s) * mem[1]) - 1) < 0.01  # equal memory per second
    assert jb16 == pytest.approx(16 * capacity / mean, rel=0.06)  # random routing's spread
    assert jm16 == pytest.approx(4 * capacity / mean, rel=0.02)
    assert jm16 / jb16 == pytest.approx(0.25, rel=0.06)
    mem, capacity, mean, r, s, jb16, jm16 = out["projected"]
    assert abs(len(r) * chi_r / (len(s) * chi_s) - 1) < 0.01  # equal projected bytes
    share_s = len(s) / (len(r) + len(s))  # 59%: LINEITEM's 8 units fill first
    assert jb16 == pytest.approx(8 * capacity / (share_s * mem[1]), rel=0.06)
    assert 3.2 < jb16 / jm16 < 3.6
    with pytest.raises(ValueError, match="stream_balance"):
        balance_streams({}, {"stream_balance": "tuples", "tuple_overhead_bytes": 1.0})


def test_the_symmetric_overhead_is_the_memory_rule_s_anchor():
    """The overhead of the stored-bytes reading comes from the memory rule's one anchor (Fig
    10's JB16 holds 76M Q7 tuples at C = 1.5 GB): with both sides full, 1/(29 + o) +
    1/(20 + o) = 76M / (8 C), o = 291, the value every primary series of Figs 6a, 10, 15,
    16 and Table 4 sets."""
    chi_r, chi_s = PROJECTED_BYTES["eq7"]
    need = 76e6 / (8 * 1.5e9)  # sum of the two sides' tuples per byte
    a, d = (chi_r + chi_s) / 2, (chi_r - chi_s) / 2  # 2a' / (a'^2 - d^2) = need, a' = a + o
    o = 1 / need + np.sqrt(1 / need**2 + d * d) - a
    assert round(o) == 291
    for fig in ("fig6a", "fig10", "fig15", "fig16", "table4"):
        series = load_figure(f"bistream/{fig}", "small")["series"]
        primary = {k: v["overrides"] for k, v in series.items() if k.endswith("_sym")}
        assert primary and all(v["run.stream_balance"] == "stored"
                                and v["run.tuple_overhead_bytes"] == round(o)
                                for v in primary.values())
