"""BiStream's routings on the engine: join-biclique with random and ContRand routing and the
join-matrix baseline give DuckDB's join as a multiset (equi and band, hot keys, nulls,
duplicates, an empty side), and their deliveries are the paper's message identities: a JB
tuple is stored once and probes n/e units of the other side (Eq. 5), a JMx tuple is stored at
sqrt(x) units (Eq. 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.online import run_stream
from joins.online.layouts import ContRandLayout
from joins.oracle import assert_same_rows, oracle_join
from tests.online.shared_steps import assert_steps_change_nothing


def _inputs(rng, nr: int, ns: int, domain: int, hot: float = 0.0, nulls: float = 0.0):
    def side(n, col):
        k = rng.integers(0, domain, n).astype(float)
        k[rng.random(n) < hot] = 7.0  # a hot key on both sides
        k[rng.random(n) < nulls] = np.nan
        return pd.DataFrame({"key": k, col: np.arange(n) % 5})

    return side(nr, "a"), side(ns, "b")


def _run(r, s, operator="join_biclique", joiners=8, **kw):
    return run_stream(None, r, s, operator=operator, joiners=joiners, batch_size=97,
                      collect_output=True, progress=False, backend="local", **kw)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nr=st.integers(0, 150), ns=st.integers(0, 150), domain=st.integers(1, 40),
       half=st.sampled_from([1, 2, 3, 4, 6]), sub=st.sampled_from([1, 2, 3, 6]),
       band=st.sampled_from([None, 0.0, 1.0, 2.5]), hot=st.sampled_from([0.0, 0.3]),
       nulls=st.sampled_from([0.0, 0.1]), seed=st.integers(0, 3))
def test_property_contrand_is_exact(nr, ns, domain, half, sub, band, hot, nulls, seed):
    if half % sub:
        sub = 1
    rng = np.random.default_rng(seed)
    r, s = _inputs(rng, nr, ns, domain, hot, nulls)
    res = _run(r, s, joiners=2 * half, contrand=sub, band=band, seed=seed)
    want = oracle_join(r, s, band=band) if band is not None else oracle_join(r, s)
    assert_same_rows(res.output, want)
    assert len(res.output) == len(want)


@pytest.mark.parametrize("band", [None, 1.0])
def test_join_matrix_is_exact(band):
    r, s = _inputs(np.random.default_rng(3), 400, 300, 30, hot=0.2, nulls=0.05)
    res = _run(r, s, operator="join_matrix", joiners=16, band=band)
    assert_same_rows(res.output, oracle_join(r, s, band=band) if band else oracle_join(r, s))


@pytest.mark.parametrize("setting", [(8, None), (8, 2), (8, 4), (16, 4), (16, 8)])
def test_message_identities_of_join_biclique(setting):
    """Each tuple is stored once (storage |R| + |S|) and probes m/d (n/e) units: B_bi of
    Eq. 5 counted by the engine; the stored tuples sum to |R| + |S| in any routing."""
    x, y = setting
    r, s = _inputs(np.random.default_rng(1), 600, 500, 1000)
    res = _run(r, s, joiners=x, contrand=y)
    m = res.metrics
    per_side = x // 2 // (y or 1)
    assert m["store_received"].sum() == len(r) + len(s)
    assert m["probe_received_R"].sum() == per_side * len(r)
    assert m["probe_received_S"].sum() == per_side * len(s)
    last = m[m["batch"] == m["batch"].max()]
    assert last["stored_R"].sum() + last["stored_S"].sum() == len(r) + len(s)


def test_join_matrix_stores_each_tuple_sqrt_x_times():
    r, s = _inputs(np.random.default_rng(2), 600, 500, 1000)
    m = _run(r, s, operator="join_matrix", joiners=16).metrics
    assert m["store_received_R"].sum() == 4 * len(r) and m["store_received_S"].sum() == 4 * len(s)


def test_contrand_band_probes_one_or_two_neighbouring_subgroups():
    lay = ContRandLayout.even(4, 4, 4, 4, band=1.0, key_range=(0.0, 100.0))
    key = np.array([10.0, 24.5, 25.5, 50.0, np.nan])
    lo, hi = lay._probe_ranges(True, key)  # S units 4..7, one per subgroup [0,25) [25,50)...
    assert list(hi - lo) == [1, 2, 2, 2, 0]
    assert list(lay.side(False)[lo[:4]]) == [4, 4, 4, 5]


def test_bad_contrand_settings_are_refused():
    r, s = _inputs(np.random.default_rng(0), 10, 10, 5)
    with pytest.raises(ValueError, match="divide the units"):
        _run(r, s, joiners=8, contrand=3)
    with pytest.raises(ValueError, match="square number"):
        _run(r, s, operator="join_matrix", joiners=8)
    # a rescale by side spreads the units over the subgroups: at least one per subgroup
    with pytest.raises(ValueError, match="with 2 R subgroups needs at least 2 R units"):
        _run(r, s, joiners=8, contrand=2, rescale=[(5, (1, 2))])


def _timed(rng, n: int, domain: int, col: str, rate: float = 1.0) -> pd.DataFrame:
    t = np.sort(rng.uniform(0, n / rate, n)).round(1)  # equal timestamps too
    return pd.DataFrame({"key": rng.integers(0, domain, n).astype(float), "t": t,
                         col: np.arange(n) % 3})


def _window_oracle(r, s, window, band=None):
    want = oracle_join(r, s, band=band) if band is not None else oracle_join(r, s)
    return want[(want["l_t"] - want["r_t"]).abs() <= window]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 300), window=st.sampled_from([5.0, 20.0, 60.0]),
       share=st.sampled_from([0.1, 0.25, 1.0]), delay=st.sampled_from([0.0, 4.0]),
       sub=st.sampled_from([None, 2]), band=st.sampled_from([None, 1.0]),
       seed=st.integers(0, 5))
def test_property_chained_index_windows_are_exact(n, window, share, delay, sub, band, seed):
    rng = np.random.default_rng(seed)
    r, s = _timed(rng, n, 20, "a"), _timed(rng, n // 2 + 1, 20, "b")
    res = run_stream(None, r, s, operator="join_biclique", joiners=8, contrand=sub,
                     band=band, time="t", tick=7.0, window=window, archive=share * window,
                     delay=delay, collect_output=True, progress=False, backend="local",
                     seed=seed)
    assert_same_rows(res.output, _window_oracle(r, s, window, band))


def test_chained_index_memory_is_a_sawtooth_within_its_bound():
    """Memory stays within the window + D + P worth of tuples past one window, and drops a
    subindex (about P worth) at a time; per-tuple expiry would hold the window alone."""
    rng = np.random.default_rng(4)
    r, s = _timed(rng, 6000, 500, "a", rate=10.0), _timed(rng, 6000, 500, "b", rate=10.0)
    window, period = 100.0, 10.0
    res = run_stream(None, r, s, operator="join_biclique", joiners=4, time="t", tick=2.0,
                     window=window, archive=period, collect_output=True, progress=False,
                     backend="local", tuple_bytes=(40, 60))
    assert_same_rows(res.output, _window_oracle(r, s, window))
    m = res.metrics
    held = m.groupby("batch").agg(t=("t1", "first"), r=("stored_R", "sum"),
                                  s=("stored_S", "sum"), b=("mlv_bytes", "sum"))
    steady = held[held["t"] > 2 * window]
    rate = 10.0  # tuples per unit of event time per relation
    assert (steady["r"] <= rate * (window + period + 2.0) * 1.15).all()
    assert (steady["r"] >= rate * window * 0.85).all()
    drops = -held["r"].diff()
    assert drops.max() > rate * period * 0.6  # a whole subindex leaves at once
    assert (held["b"] == 40 * held["r"] + 60 * held["s"]).all()
    per_tuple = run_stream(None, r, s, operator="join_biclique", joiners=4, time="t",
                           tick=2.0, window=window, progress=False, backend="local")
    assert per_tuple.metrics["stored_R"].sum() < m["stored_R"].sum()


@pytest.mark.parametrize("seed", range(3))
def test_without_the_order_consistent_protocol_pairs_are_missed_and_duplicated(seed):
    """Fig 4 on a simulated network (FIFO channels, random delays): units that see r and s in
    different orders miss the pair (4c) or produce it twice (4d); with logical timestamps and
    punctuation every pair comes exactly once, at the cost of a buffer."""
    from joins.online.order_protocol import simulate

    rng = np.random.default_rng(seed)
    r, s = rng.integers(0, 10, 300), rng.integers(0, 10, 300)
    bare = simulate(r, s, protocol=False, seed=seed)
    assert bare.missed > 0 and bare.duplicated > 0 and bare.buffer_max == 0
    cured = simulate(r, s, protocol=True, seed=seed)
    assert cured.missed == 0 and cured.duplicated == 0 and cured.buffer_max > 0
    assert cured.messages == bare.messages == 300 * (1 + 2) * 2 and cured.punctuations > 0
    # no network delay spread: arrival order is sending order, nothing is missed
    flat = simulate(r, s, protocol=False, seed=seed, delay=lambda g, n: np.full(n, 2.0))
    assert flat.missed == flat.duplicated == 0


def _surge(rng, col: str, n: int) -> pd.DataFrame:
    """A stream whose rate rises fourfold for ten minutes, then falls to 1/2: n, 4n, 3n/4
    tuples over 0-600, 600-1200, 1200-2100 s."""
    t = np.concatenate([np.sort(rng.uniform(0, 600, n)), np.sort(rng.uniform(600, 1200, 4 * n)),
                        np.sort(rng.uniform(1200, 2100, 3 * n // 4))])
    return pd.DataFrame({"key": rng.integers(0, 300, len(t)).astype(float), "t": t,
                         col: np.arange(len(t)) % 3})


@pytest.mark.slow
def test_two_phase_scaling_scales_out_and_in_and_stays_exact():
    """A rate that rises fourfold then falls: 2PS adds units to both sides once tau passes
    T_h three checks in a row, removes them once it falls below T_l, and units that leave
    are released when their window has expired; every windowed pair comes exactly once."""
    rng = np.random.default_rng(0)
    r, s = _surge(rng, "a", 6000), _surge(rng, "b", 6000)
    res = run_stream(None, r, s, operator="join_biclique", joiners=4, time="t", window=100.0,
                     archive=10.0, tick=20.0, elastic="2ps", capacity=2000 * 50.0,
                     tuple_bytes=(50.0, 50.0), collect_output=True, progress=False,
                     backend="local")
    assert_same_rows(res.output, _window_oracle(r, s, 100.0))
    d = res.decisions
    assert list(d["delta"].dropna()) == [-2, 6, -6]  # idle start, the surge, the fall
    assert d["retired"].notna().any()  # drained units released once their state expired
    m = res.metrics
    last = m[m["batch"] == m["batch"].max()]
    assert last["worker"].nunique() == 2  # the drained units were released
    assert (m["mlv_bytes"] <= 2000 * 50.0 * 2.5).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_two_phase_scaling_of_a_full_history_migrates_and_stays_exact(seed):
    """Without a window 2PS rebalances by migration: the idle start scales in (the retiring
    units hand their state over), the growing state scales out twice (every unit hands the
    new units their share); the result is DuckDB's join and each side ends even."""
    rng = np.random.default_rng(seed)

    def side(col, n=6000):
        return pd.DataFrame({"key": rng.integers(0, 300, n).astype(float),
                             "t": np.sort(rng.uniform(0, 1200, n)), col: np.arange(n) % 3})

    r, s = side("a"), side("b")
    res = run_stream(None, r, s, operator="join_biclique", joiners=4, time="t", tick=20.0,
                     elastic="2ps", capacity=2500 * 50.0, tuple_bytes=(50.0, 50.0),
                     collect_output=True, progress=False, backend="local")
    want = oracle_join(r, s)
    assert_same_rows(res.output, want)
    assert len(res.output) == len(want)
    delta = list(res.decisions["delta"].dropna())
    assert delta[0] == -2 and all(d > 0 for d in delta[1:]) and sum(delta) == 4  # 4 -> 8
    m = res.metrics
    assert m["migrated"].sum() > 0
    last = m[m["batch"] == m["batch"].max()]
    for col in ("stored_R", "stored_S"):
        held = last.loc[last[col] > 0, col]
        assert len(held) == 4 and held.max() / held.min() < 1.1  # even after the moves


@pytest.mark.parametrize("band,window", [(None, 100.0), (1.0, 100.0), (None, None),
                                         (1.0, None)])
def test_two_phase_scaling_per_contrand_subgroup_stays_exact(band, window):
    """2PS on JB8-CR2: each subgroup is checked and scaled on its own; with a window its
    leaving units drain and are released, on a full history its state migrates; equi and band
    (a probe reaches a neighbouring range's units in both layouts while state moves)."""
    rng = np.random.default_rng(0)
    r, s = _surge(rng, "a", 1000), _surge(rng, "b", 1000)
    kw = {"window": window, "archive": 10.0} if window else {}
    res = run_stream(None, r, s, operator="join_biclique", joiners=8, contrand=2, band=band,
                     time="t", tick=20.0, elastic="2ps",
                     capacity=(200 if window else 750) * 50.0, tuple_bytes=(50.0, 50.0),
                     collect_output=True, progress=False, backend="local", **kw)
    want = _window_oracle(r, s, window or np.inf, band)
    assert_same_rows(res.output, want)
    assert len(res.output) == len(want)
    delta = list(res.decisions["delta"].dropna())
    assert delta[0] < 0 and max(delta) > 0  # the idle start, then the surge
    tau_cols = [c for c in res.decisions.columns if c.startswith(("tau_r", "tau_s"))]
    assert {c[-1] for c in tau_cols} == {"0", "1"}  # both subgroups decided on their own
    if window:
        assert res.decisions["retired"].notna().any() and res.metrics["migrated"].sum() == 0
    else:
        assert res.metrics["migrated"].sum() > 0


def test_cluster_wide_delta_goes_where_the_load_per_unit_is_highest():
    """scaling_scope=cluster places Eq. 7's one Delta a unit at a time: a new unit to the
    subgroup with the most MLV per unit, a removed one from the subgroup whose MLV per unit
    stays lowest without it; every subgroup keeps a unit."""
    from joins.online.elastic import place

    assert place(4, [9.0, 3.0], [4, 4]) == [8, 4]  # all four to the fuller side
    assert place(4, [6.0, 6.0], [4, 4]) == [6, 6]  # even sides: even split
    assert place(-6, [2.0, 1.0], [6, 6]) == [4, 2]
    assert place(-10, [2.0, 1.0], [3, 3]) == [1, 1]  # at least one unit per subgroup
    assert place(0, [1.0, 1.0], [2, 3]) == [2, 3]


@pytest.mark.slow
def test_two_phase_scaling_cluster_wide_is_one_decision_and_stays_exact():
    """With k cluster-wide (the other reading of Eq. 7) one tau over all units decides: the
    decisions carry tau_all, not a tau per side, and the Delta of the surge goes mostly to the
    side whose tuples are larger (5 of 6 units); every windowed pair comes exactly once. The
    default is the per-subgroup reading."""
    rng = np.random.default_rng(0)
    r, s = _surge(rng, "a", 6000), _surge(rng, "b", 6000)
    kw = dict(operator="join_biclique", joiners=4, time="t", window=100.0, archive=10.0,
              tick=20.0, elastic="2ps", capacity=2000 * 50.0, tuple_bytes=(80.0, 30.0),
              collect_output=True, progress=False, backend="local")
    res = run_stream(None, r, s, scaling_scope="cluster", **kw)
    assert_same_rows(res.output, _window_oracle(r, s, 100.0))
    d = res.decisions[res.decisions["delta"].notna()]
    assert "tau_all" in d and not [c for c in d if c.startswith(("tau_r", "tau_s"))]
    assert list(d["delta"]) == [-2, 6, -6]
    assert list(d["units_r"]) == [1, 6, 1] and list(d["units_s"]) == [1, 2, 1]
    side = run_stream(None, r, s, **kw).decisions
    assert "tau_all" not in side and list(side["delta"].dropna()) == [-1, 6, -7]
    with pytest.raises(ValueError, match="scope"):
        run_stream(None, r, s, scaling_scope="side", **kw)


def test_two_phase_scaling_needs_a_capacity():
    r, s = _timed(np.random.default_rng(0), 50, 5, "a"), _timed(np.random.default_rng(1), 50,
                                                                 5, "b")
    with pytest.raises(ValueError, match="capacity"):
        run_stream(None, r, s, operator="join_biclique", joiners=4, time="t", window=5.0,
                   elastic="2ps", progress=False, backend="local")


@pytest.mark.slow
@pytest.mark.spark
def test_spark_runs_contrand_windows_and_2ps_exactly(spark):
    """The same routings on Spark (state on the executors): ContRand with a band and the
    chained index, and 2PS scaling out and in, each DuckDB's join as a multiset."""
    rng = np.random.default_rng(6)
    r, s = _timed(rng, 3000, 40, "a", rate=5.0), _timed(rng, 2500, 40, "b", rate=4.0)
    res = run_stream(spark, r, s, operator="join_biclique", joiners=8, contrand=2, band=1.0,
                     time="t", tick=20.0, window=60.0, archive=6.0, collect_output=True,
                     progress=False)
    assert_same_rows(res.output, _window_oracle(r, s, 60.0, 1.0))
    assert res.metrics["expired"].sum() > 0
    res = run_stream(spark, r, s, operator="join_biclique", joiners=4, time="t", tick=20.0,
                     window=60.0, archive=6.0, elastic="2ps", capacity=150 * 10.0,
                     tuple_bytes=(10.0, 10.0), collect_output=True, progress=False)
    assert_same_rows(res.output, _window_oracle(r, s, 60.0))
    assert res.decisions["delta"].notna().any()
    # full history, per ContRand subgroup: the state migrates on the executors
    res = run_stream(spark, r, s, operator="join_biclique", joiners=8, contrand=2, time="t",
                     tick=20.0, elastic="2ps", capacity=300 * 10.0, tuple_bytes=(10.0, 10.0),
                     collect_output=True, progress=False)
    want = oracle_join(r, s)
    assert_same_rows(res.output, want)
    assert len(res.output) == len(want)
    assert res.decisions["delta"].notna().any() and res.metrics["migrated"].sum() > 0


@pytest.mark.parametrize("operator,contrand", [("join_biclique", None), ("join_biclique", 4),
                                               ("join_matrix", None)])
def test_each_result_row_names_the_unit_that_produced_it(operator, contrand):
    """The ``unit`` column agrees with each unit's own count of its results, and a
    join-biclique result comes from the unit storing its earlier tuple (the later one probes
    it): an R unit when R's tuple came first."""
    r, s = _inputs(np.random.default_rng(5), 500, 400, 60, hot=0.2)
    r["t"], s["t"] = np.arange(len(r)) * 2.0, np.arange(len(s)) * 2.0 + 1.0
    kw = {"contrand": contrand} if contrand else {}
    res = _run(r, s, operator=operator, joiners=16, time="t", **kw)
    out, m = res.output, res.metrics
    by_unit = out.groupby("unit").size()
    counted = m.groupby("worker")["outputs"].sum()
    assert by_unit.to_dict() == counted[counted > 0].to_dict()
    if operator == "join_biclique":
        r_units = set(m.loc[m["stored_R"] > 0, "worker"])
        s_units = set(m.loc[m["stored_S"] > 0, "worker"])
        assert not r_units & s_units
        r_first = out["l_t"] < out["r_t"]
        assert out.loc[r_first, "unit"].isin(r_units).all()
        assert out.loc[~r_first, "unit"].isin(s_units).all()


def test_view_messages_count_per_result_and_per_unit_group_and_period():
    from joins.online.aggregation import view_messages

    units = np.array([0, 0, 0, 1, 1, 0])
    groups = np.array(["a", "a", "b", "a", "a", "a"])
    at = np.array([0.1, 0.9, 0.5, 0.2, 1.5, 1.2])
    assert view_messages(units, groups, at, 1.0) == {"unbatched": 6, "batched": 5}
    assert view_messages(units, groups, at, 10.0) == {"unbatched": 6, "batched": 3}
    assert view_messages(units[:0], groups[:0], at[:0], 1.0) == {"unbatched": 0, "batched": 0}
    with pytest.raises(ValueError, match="period"):
        view_messages(units, groups, at, 0.0)
    with pytest.raises(ValueError, match="time="):
        view_messages(units, groups, np.full(6, np.nan), 1.0)


def test_the_view_update_cost_is_measured():
    import json

    from joins.online.aggregation import VIEW_CALIBRATION, load_view_update

    meta = json.loads(VIEW_CALIBRATION.read_text())
    assert 0 < load_view_update() < 1e-6 and meta["r2"] > 0.9
    assert meta["sizes"][0] == 0 and len(meta["sizes"]) >= 3  # the count varied alone


@pytest.mark.parametrize("window,contrand", [(100.0, None), (None, None), (100.0, 2)])
def test_2ps_ticks_between_checks_share_a_step_and_change_nothing(window, contrand,
                                                                  monkeypatch):
    """2PS decides only at its checks (every ``check_every``), so the ticks before the next
    check share one step while no unit drains (issue 36): the same rows per tick, decisions
    and output as one tick per step, in fewer steps."""
    rng = np.random.default_rng(3)
    r, s = _surge(rng, "a", 1500), _surge(rng, "b", 1500)
    kw = dict(operator="join_biclique", joiners=4 if contrand is None else 8, time="t",
              tick=20.0, elastic="2ps", capacity=(500 if window else 1000) * 50.0,
              tuple_bytes=(50.0, 50.0), collect_output=True, progress=False, backend="local")
    if window:
        kw.update(window=window, archive=10.0)
    if contrand:
        kw.update(contrand=contrand)
    _, alone = assert_steps_change_nothing(lambda: run_stream(None, r, s, **kw), monkeypatch)
    assert alone.decisions["delta"].notna().sum() >= 2
