"""diner_streams' workloads for the DINER figures: drifting means (Fig 15), fragment delays
(Figs 16-19), partially sorted streams through the ``intervals`` order (Fig 14)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from datagen.diner_streams import generate
from datagen.errors import GeneratorError
from datagen.orders import compute_arrival


def _gen(tmp_path, **params) -> tuple[pd.DataFrame, pd.DataFrame]:
    generate(dict(n_r=2000, n_s=1500, seed=3, **params), tmp_path)
    return pd.read_parquet(tmp_path / "R.parquet"), pd.read_parquet(tmp_path / "S.parquet")


@pytest.mark.parametrize("k", [1, 4, 10])
def test_intervals_are_sorted_inside_and_permuted(k):
    keys = np.random.default_rng(0).integers(0, 999, 1000)
    a = compute_arrival("intervals", 1000, 1000, 5, keys_r=keys, keys_s=keys, k=k)
    for perm in (a.perm_r, a.perm_s):
        pieces = np.array_split(perm, k)
        assert all((np.diff(keys[p]) >= 0).all() for p in pieces)  # sorted inside
        firsts = sorted(keys[p][0] for p in pieces)
        assert sorted(np.sort(keys)[i] for i in range(0, 1000, 1000 // k)[:k]) == firsts
    shared = compute_arrival("intervals", 1000, 1000, 5, keys_r=keys, keys_s=keys, k=k,
                             shared=True)
    assert np.array_equal(shared.perm_r, shared.perm_s)
    with pytest.raises(GeneratorError, match="k >= 1"):
        compute_arrival("intervals", 10, 10, 0, keys_r=keys[:10], keys_s=keys[:10], k=0)


def test_the_order_rearranges_keys_over_unchanged_times(tmp_path):
    plain_r, plain_s = _gen(tmp_path / "a")
    r, s = _gen(tmp_path / "b", order="intervals", order_params={"k": 5})
    for plain, got in ((plain_r, r), (plain_s, s)):
        assert np.array_equal(plain["t"], got["t"])
        assert np.array_equal(np.sort(plain["key"]), np.sort(got["key"]))
        assert not np.array_equal(plain["key"], got["key"])
        runs = np.array_split(got["key"].to_numpy(), 5)
        assert all((np.diff(x) >= 0).all() for x in runs)


def test_periods_move_the_mean(tmp_path):
    r, _ = _gen(tmp_path, keys="normal", mean=75.0, variance=15.0, periods=10, period_shift=8.0)
    means = [p.mean() for p in np.array_split(r["key"].to_numpy(), 10)]
    assert np.allclose(np.diff(means), 8.0, atol=1.0)
    assert abs(means[0] - 75.0) < 1.0


def test_fragment_delays_pause_after_each_fragment(tmp_path):
    plain_r, _ = _gen(tmp_path / "a")
    r, _ = _gen(tmp_path / "b", fragments=10, fragment_delay=0.3)
    extra = r["t"].to_numpy() - plain_r["t"].to_numpy()
    jumps = np.flatnonzero(np.diff(extra) > 1e-6) + 1
    assert list(jumps) == list(range(200, 2000, 200))  # after fragments 1..9
    first = plain_r["t"].iloc[199]
    assert extra[200] == pytest.approx(0.3 * first)


def test_order_times_put_the_orders_interleave_on_the_event_times(tmp_path):
    # the arena's fluctuation figure: Squall's Fluct-join order drives the event times
    r, s = _gen(tmp_path, order="fluct", order_params={"k": 4.0}, order_times=True)
    arrival = compute_arrival("fluct", 2000, 1500, 3, k=4.0)
    merged = pd.concat([r.assign(is_r=True), s.assign(is_r=False)]).sort_values("t")
    assert np.array_equal(merged["is_r"].to_numpy(), arrival.is_r)  # the order, in time
    assert (np.diff(r["t"]) > 0).all() and (np.diff(s["t"]) > 0).all()
    plain_r, _ = _gen(tmp_path / "plain")
    assert np.array_equal(plain_r["key"], r["key"])  # the keys are the plain streams'
    with pytest.raises(GeneratorError, match="order_times needs an order"):
        _gen(tmp_path / "x", order_times=True)
    with pytest.raises(GeneratorError, match="no pauses"):
        _gen(tmp_path / "y", order="fluct", order_times=True, pauses=[[0.5, 10.0]])


def test_zipf_keys_drift_by_the_period_shift(tmp_path):
    r, _ = _gen(tmp_path, s=1.5, domain=100, periods=4, period_shift=25.0)
    tops = [int(np.bincount(part).argmax()) for part in np.array_split(r["key"], 4)]
    assert tops == [1, 26, 51, 76]  # the most frequent value moves 25 a period
    assert r["key"].between(1, 100).all()
