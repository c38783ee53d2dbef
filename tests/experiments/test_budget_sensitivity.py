"""The budget sensitivity computes, without running joins, the needs the algorithms check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from datagen import materialize
from datagen.dpair import table_keys
from experiments.budget_sensitivity import key_counts, needs_of, onset, point_needs, sensitivity
from experiments.figures import load_figure
from joins.api import BatchContext, BudgetExceeded, JoinSpec
from joins.registry import get

# tiny, with a few keys above τ = 10 on both sides and some hot on one side only
PARAMS = {"alpha": 0.9, "size": 50, "keys": 60, "rows": 1500, "uniform_rows": 300,
          "uniform_range": 5000, "seed": 3, "chunk_rows": 700}
ALGO = {"hot_threshold": 10, "max_hot_keys": 5}


def _read(folder, table):
    return pd.read_parquet(folder / f"{table}.parquet")


def test_table_keys_are_the_written_keys(tmp_path):
    folder = materialize("dpair", PARAMS, root=tmp_path, progress=False)
    for table in ("R", "S"):
        written = _read(folder, table)["key"].to_numpy()
        assert np.array_equal(np.sort(table_keys(PARAMS, table)), np.sort(written))
    # the record size draws payloads after the keys: the keys do not depend on it
    assert np.array_equal(table_keys({**PARAMS, "size": 500}, "R"), table_keys(PARAMS, "R"))


def test_needs_match_a_direct_count(tmp_path):
    folder = materialize("dpair", PARAMS, root=tmp_path, progress=False)
    r, s = (_read(folder, t)["key"].value_counts() for t in ("R", "S"))
    needs = needs_of(*key_counts(PARAMS), PARAMS["size"], ALGO)
    both = pd.concat([r, s], axis=1).fillna(0)
    assert needs["tree_join_basic"] == both.sum(axis=1).max() * 50
    hot_r = r[r >= 10].sort_index().sort_values(ascending=False, kind="stable").head(5)
    hot_s = s[s >= 10].sort_index().sort_values(ascending=False, kind="stable").head(5)
    shared = hot_r.index.intersection(hot_s.index)
    assert needs["am_join_basic"] == (r[shared] + s[shared]).max() * 50
    assert needs["broadcast_join"] == len(_read(folder, "S")) * 50
    high_r = {k for k in hot_r.index if hot_r[k] >= hot_s.get(k, 0)}
    high_s = {k for k in hot_s.index if k not in hot_r.index or hot_s[k] > hot_r[k]}
    dup = s[s.index.isin(high_r)].sum() + r[r.index.isin(high_s)].sum()
    assert needs["full_skew_join"] == dup * 50 and dup > 0


@pytest.mark.spark
@pytest.mark.parametrize("name", ["tree_join_basic", "am_join_basic", "broadcast_join",
                                  "full_skew_join"])
def test_needs_are_what_the_algorithm_checks(spark, tmp_path, name):
    folder = materialize("dpair", PARAMS, root=tmp_path, progress=False)
    left, right = (spark.read.parquet(str(folder / f"{t}.parquet")) for t in ("R", "S"))
    ctx = BatchContext(spark, executors=2, partitions=4, memory_budget_bytes=1.0,
                       record_bytes=PARAMS["size"], params=ALGO)
    with pytest.raises(BudgetExceeded) as exc:
        get(name, kind="batch").load()(ctx, left, right, JoinSpec())
    assert exc.value.needed_bytes == needs_of(*key_counts(PARAMS), PARAMS["size"], ALGO)[name]


def test_sensitivity_table_at_tiny_scale():
    fig = load_figure("amjoin/fig6", "tiny")
    points = [point_needs(fig, x, "tiny") for x in (0.0, 0.9)]
    assert points[0].budget == pytest.approx(8e9 * 22000 / 1.01e9)  # the rule's value
    assert points[1].needs["tree_join_basic"] > points[0].needs["tree_join_basic"]
    table = pd.DataFrame([{"figure": p.figure, "x": p.x, "budget": p.budget, "series": s,
                           "need_bytes": v} for p in points for s, v in p.needs.items()])
    sens = sensitivity(table, factors=(1.0,)).set_index("series")
    assert sens.loc["broadcast_join"].iloc[-1] == "always"
    need = table[table.series == "tree_join_basic"]
    top = float(need.need_bytes.max())
    assert onset(need, top) == "never" and onset(need, top - 1) == ">= 0.9"
