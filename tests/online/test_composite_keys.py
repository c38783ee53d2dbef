"""Stream joins on a composite key (``on=a,b``, ``on=a=x,b=y``): exact against DuckDB as a
multiset, with a hot key tuple on both sides, nulls in either part (they match nothing),
duplicates, across a migration (DYNAMIC) and with three inputs (mjoin)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from joins.online import run_stream
from joins.online.source import JoinGraph, SourceError
from joins.oracle import assert_same_rows, oracle_graph, oracle_join


def _inputs(seed: int = 0, n: int = 300):
    rng = np.random.default_rng(seed)

    def side(cols, n):
        f = pd.DataFrame({c: pd.array(rng.integers(0, 4, n), dtype="Int64") for c in cols})
        f.loc[: n // 3, cols[0]] = 1  # a hot tuple (1, 1) on both sides
        f.loc[: n // 3, cols[1]] = 1
        f.loc[rng.choice(n, n // 20, replace=False), cols[rng.integers(0, 2)]] = pd.NA
        return f.assign(v=rng.integers(0, 3, n))  # duplicates
    return side(["a", "b"], n), side(["x", "y"], n + 37)


@pytest.mark.parametrize("operator", ["shj", "static_mid", "dynamic", "join_biclique"])
def test_two_inputs_on_a_composite_key_with_other_names(operator):
    r, s = _inputs()
    res = run_stream(None, r, s, operator=operator, joiners=4, on="a=x,b=y", batch_size=60,
                     collect_output=True, progress=False, backend="local")
    assert_same_rows(res.output, oracle_join(r, s, "a=x,b=y", "inner"))
    if operator == "dynamic":
        assert res.summary["migrations"] >= 1


def test_three_inputs_on_shared_composite_columns():
    rng = np.random.default_rng(1)
    frames = {nm: pd.DataFrame({"a": rng.integers(0, 3, 60), "b": rng.integers(0, 2, 60),
                                nm.lower(): range(60)}) for nm in "ABC"}
    res = run_stream(None, inputs=frames, operator="mjoin", joiners=2, on="a,b",
                     batch_size=40, collect_output=True, progress=False, backend="local")
    edges = [("A", "a", "B", "a"), ("A", "b", "B", "b"), ("B", "a", "C", "a"),
             ("B", "b", "C", "b")]
    assert_same_rows(res.output, oracle_graph(frames, edges))


def test_composite_key_parsing():
    g = JoinGraph.parse(["R", "S"], "a=x,b=y")
    assert g.shared and g.composite == (("a", "b"), ("x", "y")) and g.columns(1) == ["x", "y"]
    assert JoinGraph.parse(["A", "B", "C"], "a,b").composite == (("a", "b"),) * 3
    with pytest.raises(SourceError, match="pairs two inputs"):
        JoinGraph.parse(["A", "B", "C"], "a=x,b=y")
    assert JoinGraph.parse(["R", "S"], "R.a=S.x").composite is None  # edges, as before


@pytest.mark.spark
def test_composite_key_on_spark(spark, tmp_path):
    r, s = _inputs(2, 200)
    r.to_parquet(tmp_path / "R.parquet")
    s.to_parquet(tmp_path / "S.parquet")
    res = run_stream(spark, str(tmp_path / "R.parquet"), str(tmp_path / "S.parquet"),
                     operator="dynamic", joiners=4, on="a=x,b=y", batch_size=80,
                     collect_output=True, progress=False, partitions=2)
    assert_same_rows(res.output, oracle_join(r, s, "a=x,b=y", "inner"))
