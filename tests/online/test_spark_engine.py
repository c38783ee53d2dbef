"""The engine on Spark (shared local[2] session): every operator's output equals the DuckDB
oracle exactly once, across migrations, spills and micro-batch boundaries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.online import run_stream
from joins.oracle import assert_same_rows, oracle_join
from tests.examples import examples
from tests.frames import hot_key_streams as _inputs
from tests.frames import to_spark
from tests.online.engine_paths import ENGINE_PATHS, run_path

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


OPS = [("dynamic", None), ("static_mid", None), ("static_opt", None), ("shj", None),
       ("dynamic", 1.0), ("static_mid", 2.0), ("static_opt", 1.0)]


@pytest.mark.parametrize(("operator", "band"), OPS)
def test_operator_matches_oracle(spark, operator, band):
    r, s = _inputs()
    params = dict(eps=0.5, warmup=40) if operator == "dynamic" else {}
    res = run_stream(spark, r, s, operator=operator, joiners=16, band=band, order="fluct", k=3,
                     batch_size=160, collect_output=True, progress=False, partitions=2,
                     transport="broadcast" if band is None else "shuffle", **params)
    expected = oracle_join(r, s, band=band)
    assert_same_rows(res.output, expected)
    assert res.summary["outputs"] == len(expected)
    m = res.metrics
    assert set(m["worker"]) == set(range(16))
    assert (m.groupby("batch")["tuples"].first().sum()) == len(r) + len(s)
    if operator == "dynamic":
        assert res.summary["migrations"] >= 1
        assert res.summary["migrated_tuples"] == res.epochs["migration_tuples"].sum() > 0
        # a decision takes effect at its trigger tuple, inside a micro-batch
        assert (res.epochs["start_tuple"].iloc[1:] % 160 != 0).any()


def test_empty_sides(spark):
    r, s = _inputs()
    empty = s.iloc[:0]
    res = run_stream(spark, r, empty, operator="dynamic", joiners=4, batch_size=500,
                     collect_output=True, progress=False)
    assert res.summary["outputs"] == 0 and len(res.output) == 0
    assert res.metrics["r_stored"].sum() > 0
    both = run_stream(spark, r.iloc[:0], empty, operator="static_mid", joiners=4,
                      collect_output=True, progress=False)
    assert both.summary["outputs"] == 0 and both.summary["batches"] == 0


@pytest.mark.parametrize("spill", ["charge", "disk", "evict"])
def test_tiny_memory_budget_overflows_and_stays_exact(spark, spill):
    r, s = _inputs()
    op, params = ("static_mid", {}) if spill == "evict" else ("dynamic", dict(eps=0.5, warmup=30))
    res = run_stream(spark, r, s, operator=op, joiners=4, batch_size=200,
                     memory_budget_tuples=40, spill=spill, collect_output=True, progress=False,
                     **params)
    assert_same_rows(res.output, oracle_join(r, s))
    assert res.summary["status"] == "overflow"
    assert res.summary["spilled"] > 0
    m = res.metrics
    held = m["r_stored"] + m["s_stored"] + m["pending"]
    if spill == "evict":  # evicted tuples left memory; the clean-up batch added the rest
        assert (held <= 40).all()
        assert m.loc[m["batch"] == m["batch"].max(), "outputs"].sum() > 0
    else:
        assert (held[m["overflow"]] > 40).all()


def test_parquet_and_spark_inputs_written_output(spark, tmp_path):
    r, s = _inputs()
    r.to_parquet(tmp_path / "R.parquet", index=False)
    out = tmp_path / "out"
    res = run_stream(spark, str(tmp_path / "R.parquet"), to_spark(spark, s), operator="static_mid",
                     joiners=4, batch_size=200, output=out, progress=False)
    written = pd.read_parquet(out)
    assert list(written.columns) == ["l_key", "l_a", "r_key", "r_b", "phase", "produced_at"]
    assert set(written["phase"]) <= {"normal"}
    assert_same_rows(written, oracle_join(r, s))
    assert res.summary["outputs"] == len(written)


@settings(max_examples=examples(5), deadline=None)
@given(r=st.lists(st.integers(0, 5), max_size=40), s=st.lists(st.integers(0, 5), max_size=40),
       batch=st.integers(5, 30), seed=st.integers(0, 3))
def test_property_dynamic_on_spark(spark, r, s, batch, seed):
    rf = pd.DataFrame({"key": pd.array(r, dtype="Int64"), "a": np.arange(len(r))})
    sf = pd.DataFrame({"key": pd.array(s, dtype="Int64"), "b": np.arange(len(s))})
    res = run_stream(spark, rf, sf, operator="dynamic", joiners=8, batch_size=batch, seed=seed,
                     eps=0.3, warmup=5, collect_output=True, progress=False)
    assert_same_rows(res.output, oracle_join(rf, sf))


@pytest.mark.slow
@pytest.mark.cluster
def test_cli_on_local_cluster(tmp_path):
    """Separate executor JVMs: no state can hide on the driver. Runs the stream CLI in a
    subprocess (its own Spark application) and checks the written rows against the oracle."""
    r, s = _inputs()
    r.to_parquet(tmp_path / "R.parquet", index=False)
    s.to_parquet(tmp_path / "S.parquet", index=False)
    cmd = [sys.executable, "-m", "joins.online.cli", "operator=dynamic",
           f"r={tmp_path / 'R.parquet'}", f"s={tmp_path / 'S.parquet'}", "joiners=8",
           "order=fluct", "k=3", f"out={tmp_path / 'out'}", f"metrics={tmp_path / 'm.parquet'}",
           "batch_size=200", "warmup=40", "eps=0.5", "partitions=2", "spark=local_cluster",
           "progress=false"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_rows(pd.read_parquet(tmp_path / "out"), oracle_join(r, s))
    m = pd.read_parquet(tmp_path / "m.parquet")
    need = {"batch", "worker", "epoch", "r_stored", "s_stored", "received", "outputs",
            "migrated", "r_seen", "s_seen", "n", "m"}
    assert need <= set(m.columns)
    assert m["migrated"].sum() > 0


def test_scale_out_and_scale_in_at_run_time_on_spark(spark):
    """J grows 4 -> 16 and shrinks back to 4 inside micro-batches on the Spark backend: the
    stored tuples really move between partitions and every result comes out once."""
    from joins.online.controller import Scripted
    from joins.online.layouts import GridLayout

    r, s = _inputs()

    def elastic(joiners, **_):
        return Scripted(GridLayout.initial(2, 2), [(150, lambda lay: lay.scale_out()),
                                                   (350, lambda lay: lay.scale_in())])

    res = run_stream(spark, r, s, operator=elastic, joiners=4, band=1.0, batch_size=120,
                     collect_output=True, progress=False, partitions=2)
    assert_same_rows(res.output, oracle_join(r, s, band=1.0))
    assert list(res.epochs["joiners"]) == [4, 16, 4]
    assert list(res.epochs["start_tuple"]) == [0, 150, 350]
    assert res.summary["migrated_tuples"] > 0
    m = res.metrics
    assert m.loc[m["epoch"] == 1, "worker"].nunique() == 16
    last = m[m["batch"] == m["batch"].max()]
    assert len(last) == 4 and last["r_stored"].sum() == 2 * len(r)


@pytest.mark.parametrize("path", ENGINE_PATHS)
def test_new_engine_paths_on_spark(spark, path):
    """Each new path of the engine on the Spark backend: state really moves between
    partitions; every output is DuckDB's multiset (the same paths run on local_cluster in
    tests/online/test_executor_loss.py)."""
    run_path(spark, path)


@pytest.mark.spark
@pytest.mark.parametrize("inline_bytes", [0, 256 * 1024])
def test_chunks_by_broadcast_and_inside_the_tasks_are_both_exact(spark, monkeypatch,
                                                                 inline_bytes):
    """Test chunks are small, so they always travel inside the tasks; with the limit at 0
    every step broadcasts its (pickled once) chunks instead, across moves and a clean-up."""
    from joins.online import engine

    monkeypatch.setattr(engine, "INLINE_CHUNK_BYTES", inline_bytes)
    r, s = _inputs()
    res = run_stream(spark, r, s, operator="shj", joiners=4, batch_size=60,
                     rescale=[(200, 6), (400, 3)], memory_budget_tuples=30, spill="evict",
                     collect_output=True, progress=False, partitions=2)
    assert_same_rows(res.output, oracle_join(r, s))
