"""Losing an executor mid-run on ``local_cluster`` (separate executor JVMs): a worker task
kills its own executor's JVM with ``kill -9`` at tick 3 (:mod:`tests.online.killing_program`).
With ``checkpoint_dir=`` the run recovers and is exact, with every count of a run without the
loss (each partition's report counted once, although recomputed tasks report again); without
it the run stops with one clear message, never a silent wrong result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from joins.online import run_stream
from joins.oracle import assert_same_rows, oracle_join
from tests.frames import hot_key_streams

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
KW = dict(operator="static_mid", joiners=4, batch_size=60, partitions=2, checkpoint_every=1)
COUNTS = ["outputs", "received", "probes", "store_received", "probe_received", "stored@0",
          "stored@1"]

_RUN = f"""
import sys
from joins.online import programs, run_stream
from runtime.spark_session import get_spark, spark_preset
from tests.frames import hot_key_streams
from tests.online.killing_program import KillingJoiner

marks, out, ckpt = sys.argv[1:4]
spark = get_spark(**spark_preset("local_cluster"))
programs.load = lambda name: (lambda: KillingJoiner(marks, at=3))
r, s = hot_key_streams()
res = run_stream(spark, r, s, checkpoint_dir=ckpt or None, collect_output=True,
                 progress=False, **{KW!r})
res.output.to_parquet(out + "/out.parquet")
res.metrics.to_parquet(out + "/metrics.parquet")
"""


def _run_with_a_kill(tmp_path: Path, checkpoint: bool) -> subprocess.CompletedProcess:
    marks = tmp_path / "marks"
    marks.mkdir()
    ckpt = str(tmp_path / "ckpt") if checkpoint else ""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _RUN, str(marks), str(tmp_path), ckpt],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert (marks / "killed").read_text().startswith("tick=3 jvm="), done.stderr[-3000:]
    return done


def test_an_executor_loss_with_a_reliable_checkpoint_recovers_exactly(tmp_path):
    done = _run_with_a_kill(tmp_path, checkpoint=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Lost executor" in done.stderr
    r, s = hot_key_streams()
    assert_same_rows(pd.read_parquet(tmp_path / "out.parquet"), oracle_join(r, s))
    got = pd.read_parquet(tmp_path / "metrics.parquet")
    base = run_stream(None, r, s, progress=False, backend="local",
                      **{k: v for k, v in KW.items() if k != "checkpoint_every"}).metrics
    key = ["batch", "worker"]
    got, base = (m.sort_values(key).reset_index(drop=True) for m in (got, base))
    cols = [c for c in COUNTS if c in base.columns]
    pd.testing.assert_frame_equal(got[key + cols], base[key + cols], check_dtype=False)


def test_an_executor_loss_without_one_stops_with_one_clear_message(tmp_path):
    done = _run_with_a_kill(tmp_path, checkpoint=False)
    assert done.returncode != 0 and not (tmp_path / "out.parquet").exists()
    # the Python error ends the driver's output, but a JVM thread may still log after it
    # (a stack trace of the lost executor's connection): the error is the last Python line
    lines = done.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("joins.online.engine.StreamFailure")]
    assert errors, lines[-20:]
    last = errors[-1]
    assert last.startswith("joins.online.engine.StreamFailure: micro-batch 3: an executor was "
                           "lost"), last
    assert "checkpoint_dir=" in last


_PATHS = """
from runtime.spark_session import get_spark, spark_preset
from tests.online.engine_paths import ENGINE_PATHS, run_path

spark = get_spark(**spark_preset("local_cluster"))
for path in ENGINE_PATHS:
    run_path(spark, path)
    print("exact", path, flush=True)
"""


def test_new_engine_paths_on_local_cluster():
    """Each new path of the engine (biclique resizes, relocation with eviction, windows with
    ticks, an n-way rescale, eviction with moves in flight) on local_cluster: state crosses
    executor JVMs; every output is DuckDB's multiset."""
    from tests.online.engine_paths import ENGINE_PATHS

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _PATHS], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [ln.split()[1] for ln in done.stdout.splitlines() if ln.startswith("exact ")] == \
        list(ENGINE_PATHS)
