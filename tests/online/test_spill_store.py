"""The spill store (Squall's BerkeleyDB stand-in): what is written is what a probe finds, and
its measured costs are positive per-tuple seconds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from joins.online import run_stream
from joins.online.programs import joiner
from joins.online.spill_store import SpillStore, measure
from joins.oracle import assert_same_rows, oracle_join


def test_probe_counts_equal_and_band_matches(tmp_path):
    store = SpillStore(tmp_path / "w.sqlite")
    keys = np.array([1.0, 2.0, 2.0, 5.0, 9.5])
    store.append(keys, np.arange(5), np.arange(5))
    store.append(np.array([2.0]), np.array([5]), np.array([5]))
    assert len(store) == 6
    probes = np.array([2.0, 5.0, 7.0, 2.0])
    assert store.probe(probes) == 3 + 1 + 0 + 3
    # |k - probe| <= 2: 2 -> {1, 2, 2, 2}; 5 -> {5}; 7 -> {5}; 2 -> {1, 2, 2, 2}
    assert store.probe(probes, band=2.0) == 4 + 1 + 1 + 4
    assert store.probe(np.array([])) == 0
    store.close()


def test_probe_agrees_with_numpy_on_random_keys(tmp_path):
    rng = np.random.default_rng(3)
    stored = rng.integers(0, 50, 2000).astype(float)
    probes = rng.integers(0, 60, 500).astype(float)
    store = SpillStore(tmp_path / "r.sqlite")
    store.append(stored, np.arange(2000), np.arange(2000))
    counts = {k: int(c) for k, c in zip(*np.unique(stored, return_counts=True), strict=True)}
    assert store.probe(probes) == sum(counts.get(k, 0) for k in probes)
    store.close()


def test_measure_reports_positive_per_tuple_costs(tmp_path):
    got = measure(stored=5000, probes=1000, domain=2000, repeats=1, directory=str(tmp_path))
    assert 0 < got["per_spilled"] < 1e-3 and 0 < got["per_disk_probe"] < 1e-3
    assert "sqlite" in got["spill_store"]
    assert list(tmp_path.iterdir()) == []  # the measurement's stores are removed


def test_spill_disk_writes_the_store_and_keeps_results(monkeypatch):
    rng = np.random.default_rng(4)
    r = pd.DataFrame({"key": rng.integers(0, 20, 300)})
    s = pd.DataFrame({"key": rng.integers(0, 20, 300)})
    written = []

    class Recording(SpillStore):
        def append(self, key, tid, seq):
            super().append(key, tid, seq)
            written.append(len(self))

    monkeypatch.setattr(joiner, "SpillStore", Recording)
    res = run_stream(None, r, s, operator="static_mid", joiners=4, batch_size=100,
                     memory_budget_tuples=60, spill="disk", collect_output=True,
                     progress=False, backend="local")
    assert res.metrics["spilled"].sum() > 0
    assert sum(written) == res.metrics["spilled"].sum()  # every spilled tuple is in a store
    assert_same_rows(res.output, oracle_join(r, s, "key", "inner"))
    with pytest.raises(ValueError):
        run_stream(None, r, s, operator="static_mid", joiners=4, spill="tape", progress=False,
                   backend="local")
