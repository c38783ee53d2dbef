"""The D-CAPE paper's streams (datagen dcape_streams): the tuple range and range join ratio as
section 3.4 defines them, per-partition ratios, the alternating load, seeded arrivals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from datagen.dcape_streams import Params, generate, phase_of, values_per_partition
from datagen.errors import GeneratorError


def _read(folder, name):
    return pd.read_parquet(folder / f"{name}.parquet")


def test_range_join_ratio_gives_the_papers_four_then_sixteen(tmp_path):
    """R = 30K, r = 2: within the first 30K tuples a tuple meets about 4 results of the 3-way
    join, in the next 30K about 16 (the paper's example)."""
    rows = generate({"minutes": 20, "interarrival_ms": 20, "tuple_range": 30000,
                     "join_ratio": 2, "seed": 1}, tmp_path)
    assert rows == {"A": rows["A"], "B": rows["B"], "C": rows["C"]} and len(rows) == 3
    a, b, c = (_read(tmp_path, n) for n in "ABC")
    assert a["key"].nunique() <= 15000 and (a["key"] % 300).nunique() == 300
    for n, want in ((30000, 4), (60000, 16)):
        cb = b["key"].iloc[:n].value_counts()
        cc = c["key"].iloc[:n].value_counts()
        last = a["key"].iloc[n - 1000:n]  # tuples arriving at the end of the range
        fan = (cb.reindex(last).fillna(0).to_numpy() * cc.reindex(last).fillna(0).to_numpy())
        assert abs(fan.mean() / want - 1) < 0.15
    assert json.loads((tmp_path / "query.json").read_text())["edges"] == ["A.key=B.key",
                                                                        "B.key=C.key"]


def test_per_partition_ratios_and_arrivals(tmp_path):
    thirds = Params(ratios="thirds", tuple_range=30000)
    assert list(np.unique(values_per_partition(thirds))) == [25, 50, 100]
    hot = Params(ratios="hot", hot_ratio=4, join_ratio=1, tuple_range=30000)
    v = values_per_partition(hot)
    assert (v[:100] == 25).all() and (v[100:] == 100).all()
    generate({"minutes": 1, "interarrival_ms": 30, "arrivals": "constant", "inputs": 2},
             tmp_path)
    t = _read(tmp_path, "A")["t"].to_numpy()
    assert len(t) == 2000 and np.allclose(np.diff(t), 30.0)
    generate({"minutes": 10, "interarrival_ms": 10, "seed": 4}, tmp_path / "p")
    gaps = np.diff(_read(tmp_path / "p", "A")["t"].to_numpy())
    assert abs(gaps.mean() - 10) < 0.3 and abs(np.median(gaps) / np.log(2) - 10) < 0.5
    generate({"minutes": 10, "interarrival_ms": 10, "seed": 4}, tmp_path / "q")
    assert _read(tmp_path / "q", "C").equals(_read(tmp_path / "p", "C"))  # seeded


def test_alternating_load_switches_at_5_15_25_minutes(tmp_path):
    p = Params(alternating=True)
    assert list(phase_of(p, np.array([0.0, 4.9, 5.0, 14.9, 15.0, 25.0]) * 60000)) == \
        [0, 0, 1, 1, 2, 3]
    generate({"minutes": 30, "interarrival_ms": 20, "alternating": True, "seed": 2}, tmp_path)
    a = _read(tmp_path, "A")
    m1 = (a["key"] % 300) < 150
    minute = a["t"] / 60000
    for lo, hi, want in ((0, 5, 10 / 11), (5, 15, 1 / 11), (15, 25, 10 / 11), (25, 30, 1 / 11)):
        sel = (minute >= lo) & (minute < hi)
        assert abs(m1[sel].mean() - want) < 0.02


def test_bad_parameters_are_refused(tmp_path):
    for bad in ({"ratios": "skewed"}, {"arrivals": "burst"}, {"tuple_range": 10},
                {"inputs": 1}, {"join_ratio": 0}):
        with pytest.raises(GeneratorError):
            generate(bad, tmp_path)
