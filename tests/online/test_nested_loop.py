"""The windowed nested-loop join (joins/online/operators/nested_loop_join.py), an operator of no
paper added as one module: exact against DuckDB as a multiset of rows, through run_stream's
local backend and through ``python -m joins stream``, with its own counter on every tick."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import runtime.spark_session
from joins.online import run_stream
from joins.online.cli import main
from joins.oracle import assert_same_rows, oracle_graph, oracle_join


def _inputs(seed: int = 0, n: int = 120, keys: int = 15):
    rng = np.random.default_rng(seed)

    def side(col: str) -> pd.DataFrame:
        key = rng.integers(0, keys, n).astype(float)
        key[rng.random(n) < 0.05] = np.nan  # nulls never match
        t = np.sort(rng.uniform(0, 100, n))
        t[n // 2:] += 500.0  # a pause: empty ticks in between
        return pd.DataFrame({"key": key, "t": t, col: np.arange(n)})

    return side("a"), side("b")


@pytest.mark.parametrize("band", [None, 1.0])
@pytest.mark.parametrize("window", [None, 30.0])
def test_exact_against_duckdb_with_a_band_and_a_window(band, window):
    r, s = _inputs()
    res = run_stream(None, r, s, operator="nested_loop", joiners=1, band=band, time="t",
                     tick=25.0, window=window, cells=500, collect_output=True, progress=False,
                     backend="local")
    want = oracle_graph({"R": r, "S": s}, [("R", "key", "S", "key")], band=band,
                        window=window, time="t" if window is not None else None,
                        prefixes={"R": "l_", "S": "r_"})
    assert_same_rows(res.output, want)
    m = res.metrics
    assert res.summary["program"] == "nested_loop" and m["comparisons"].notna().all()
    assert (m.loc[m["received"] == 0, "comparisons"] == 0).any()  # an empty tick: 0, not NaN
    assert m["comparisons"].sum() >= m["outputs"].sum() > 0


def test_the_cli_refuses_what_it_cannot_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runtime.spark_session, "get_spark", None)  # refused before Spark
    r, s = _inputs()
    r.to_parquet(tmp_path / "R.parquet")
    s.to_parquet(tmp_path / "S.parquet")
    ab = [f"r={tmp_path / 'R.parquet'}", f"s={tmp_path / 'S.parquet'}"]
    for args, message in ((["joiners=2"], "nested_loop runs on one site: joiners=1"),
                          (["joiners=1", "cells=0"], "cells must be >= 1"),
                          (["joiners=1", "cell=5"], "did you mean cells=?")):
        assert main(["operator=nested_loop", *ab, *args]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.spark
def test_through_the_stream_cli(tmp_path, monkeypatch, spark):
    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda *a, **k: spark)
    r, s = _inputs(seed=1)
    r.to_parquet(tmp_path / "R.parquet")
    s.to_parquet(tmp_path / "S.parquet")
    out = tmp_path / "out"
    assert main(["operator=nested_loop", "joiners=1", f"r={tmp_path / 'R.parquet'}",
                 f"s={tmp_path / 'S.parquet'}", "band=2", "batch_size=40", f"out={out}",
                 "progress=false"]) == 0
    assert_same_rows(pd.read_parquet(out), oracle_join(r, s, band=2.0))


def test_describe_reads_the_declaration(capsys):
    from joins.cli import main as joins_main

    assert joins_main(["describe", "nested_loop"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:3] == ["paper", "none", "(in"]
    assert any(line.split()[:3] == ["cells", "default", "1000000"] for line in out)
