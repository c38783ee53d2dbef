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
