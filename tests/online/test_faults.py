"""Faults (issue 17, item 11): Spark retries a failed task, and the engine gives the same
output and counts as a run without the failure.

A worker task fails on its first attempt (:mod:`tests.online.faulty_program`, on the shared
``local[2,2]`` session, which retries a failed task once) after it has changed the partition
state it read: in a normal micro-batch, while state moves (grid rejoin, hash relocation at a
boundary, biclique handoff) and in the clean-up phase. The retried run's output is DuckDB's
multiset and every count (per worker and micro-batch, epochs, decisions) equals the run's
without the failure: state carried between micro-batches is recomputed, not doubled, and the
result files written by tasks are committed once per task. A task that fails on every
attempt, or state lost with an executor, stops the run with one line (:class:`StreamFailure`).
Reliable checkpoints (``checkpoint_dir=``) are written to the folder, change no count, and
are deleted after the run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from joins.online import programs, run_stream
from joins.online.engine import Engine, StreamFailure, _step_failure
from joins.online.programs.base import commit_file
from joins.oracle import assert_same_rows, oracle_join
from tests.frames import hot_key_streams as _inputs
from tests.online.faulty_program import FailingJoiner

ROOT = Path(__file__).resolve().parents[2]

TIMING = ("seconds", "cpu_seconds", "batch_wall_seconds", "modeled_cost")  # measured: differ between runs
COUNTS = ("outputs", "received", "migrated", "sent", "spilled", "probes", "expired")


# scenario -> run_stream keywords (joiners=4 or 8 on 2 partitions, 5-6 micro-batches)
SCENARIOS = {
    "normal": dict(operator="static_mid", joiners=4, batch_size=120),
    "grid_rejoin": dict(operator="dynamic", joiners=8, batch_size=120, eps=0.5, warmup=40,
                        order="fluct", k=3),
    "hash_boundary": dict(operator="shj", joiners=4, groups=12, batch_size=120,
                          rescale=[(200, (6,))]),
    "biclique_handoff": dict(operator="join_biclique", joiners=4, batch_size=120,
                             rescale=[(200, (1, 2))]),
    "evict": dict(operator="static_mid", joiners=4, batch_size=120, spill="evict",
                  memory_budget_tuples=40),
    "evict_gather": dict(operator="shj", joiners=4, groups=12, batch_size=120, spill="evict",
                         memory_budget_tuples=40, rescale=[(200, (6,))]),
    # moves in flight with eviction: the clean-up subtracts the workers' output logs
    "evict_log": dict(operator="join_biclique", joiners=4, batch_size=120, spill="evict",
                      memory_budget_tuples=40, rescale=[(200, (1, 2))]),
}
_BASE: dict[str, object] = {}  # scenario -> its run without a failure (computed once)


def _run(spark, scenario: str, out: Path | None = None):
    r, s = _inputs()
    return run_stream(spark, r, s, collect_output=True, progress=False, partitions=2,
                      output=out, **SCENARIOS[scenario])


def _base(spark, scenario: str):
    if scenario not in _BASE:
        _BASE[scenario] = _run(spark, scenario)
    return _BASE[scenario]


def _counts(res) -> pd.DataFrame:
    m = res.metrics
    return m.drop(columns=[c for c in m.columns if c in TIMING]).reset_index(drop=True)


def _with_failure(spark, monkeypatch, tmp_path, scenario, where, at=None, output=False,
                  always=False):
    marks = tmp_path / "marks"
    marks.mkdir()
    with monkeypatch.context() as mp:  # run_stream instantiates the program on the driver
        mp.setattr(programs, "load", lambda name: lambda: FailingJoiner(where, marks, at, always))
        res = _run(spark, scenario, tmp_path / "out" if output else None)
    fired = marks / "fired"
    assert fired.exists(), f"no task failed at {where}"
    failed = dict(kv.split("=") for kv in fired.read_text().split()[1:])
    assert fired.read_text().startswith(where)
    return res, failed


def _check_same(spark, scenario, res) -> None:
    """The oracle's multiset, and every count of the run without the failure."""
    r, s = _inputs()
    base = _base(spark, scenario)
    assert_same_rows(res.output, oracle_join(r, s))
    assert_same_rows(base.output, oracle_join(r, s))
    pd.testing.assert_frame_equal(_counts(res), _counts(base))
    for c in COUNTS:
        assert res.metrics[c].sum() == base.metrics[c].sum(), c
    pd.testing.assert_frame_equal(res.epochs, base.epochs)
    pd.testing.assert_frame_equal(res.decisions, base.decisions)
    for k in ("outputs", "migrated_tuples", "spilled", "batches", "migrations"):
        assert res.summary[k] == base.summary[k], k


@pytest.mark.spark
@pytest.mark.parametrize("where", ["end_tick", "commit"])
def test_retry_in_a_normal_micro_batch(spark, monkeypatch, tmp_path, where):
    """Micro-batch 2 fails on every partition: after its deliveries were stored and its
    reports counted (end_tick), or as its last act, after its result file was written
    (commit). The retry starts from micro-batch 1's state, and the result written to out=
    has each pair once."""
    res, failed = _with_failure(spark, monkeypatch, tmp_path, "normal", where, at=2,
                                output=True)
    assert failed["tick"] == "2"
    _check_same(spark, "normal", res)
    r, s = _inputs()
    written = pd.read_parquet(tmp_path / "out")
    assert_same_rows(written, oracle_join(r, s))
    assert res.summary["outputs"] == len(written)


@pytest.mark.spark
@pytest.mark.parametrize(("scenario", "where"), [
    ("grid_rejoin", "receive"), ("grid_rejoin", "begin_move"),
    ("hash_boundary", "receive"), ("biclique_handoff", "receive")])
def test_retry_during_a_migration(spark, monkeypatch, tmp_path, scenario, where):
    """Every task that starts a move (begin_move) or takes in moved state (receive) fails
    once, after the move changed its state; the moves end with the same tuples moved."""
    res, _ = _with_failure(spark, monkeypatch, tmp_path, scenario, where)
    assert res.summary["migrations"] >= 1 and res.summary["migrated_tuples"] > 0
    _check_same(spark, scenario, res)


@pytest.mark.spark
@pytest.mark.parametrize(("scenario", "where", "at"), [
    ("evict", "end_tick", 2), ("evict", "cleanup", None), ("evict_gather", "cleanup_pieces", None),
    ("evict_gather", "cleanup", None), ("evict_log", "end_tick", 2),
    ("evict_log", "cleanup_pieces", None), ("evict_log", "cleanup", None)])
def test_retry_with_eviction_and_clean_up(spark, monkeypatch, tmp_path, scenario, where, at):
    """spill=evict: a task fails after it evicted tuples to its file (end_tick; with an output
    log also after logging its tick's pairs), after the evicted state (or, with an output log,
    everything it held) left for the gathering workers (cleanup_pieces), or after the clean-up
    phase emitted the missed pairs (cleanup); the clean-up still emits each of them once."""
    res, _ = _with_failure(spark, monkeypatch, tmp_path, scenario, where, at)
    assert res.summary["spilled"] > 0
    m = res.metrics
    assert m.loc[m["phase"] == "cleanup", "outputs"].sum() > 0
    _check_same(spark, scenario, res)


@pytest.mark.spark
def test_a_task_failing_on_every_attempt_stops_the_run_with_one_line(spark, monkeypatch,
                                                                      tmp_path):
    with pytest.raises(StreamFailure) as err:
        _with_failure(spark, monkeypatch, tmp_path, "normal", "end_tick", at=2, always=True)
    msg = str(err.value)
    assert msg.startswith("micro-batch 2 failed on Spark: ") and "\n" not in msg, msg
    assert "FaultInjected: injected failure: end_tick at tick 2" in msg


@pytest.mark.spark
def test_a_failed_tidy_up_of_checkpoints_does_not_hide_the_cause(spark, monkeypatch, tmp_path):
    """checkpoint_dir=: when the run fails for good and removing its checkpoint folder fails
    too (the JVM going down), the message is still the task's failure."""
    marks = tmp_path / "marks"
    marks.mkdir()

    def broken(self, path):
        raise OSError("cannot remove the checkpoint folder")

    monkeypatch.setattr(Engine, "_drop_checkpoint", broken)
    monkeypatch.setattr(programs, "load",
                        lambda name: lambda: FailingJoiner("end_tick", marks, 2, True))
    r, s = _inputs()
    with pytest.raises(StreamFailure) as err:
        run_stream(spark, r, s, collect_output=True, progress=False, partitions=2,
                   checkpoint_dir=tmp_path / "ck", checkpoint_every=2, **SCENARIOS["normal"])
    assert "FaultInjected: injected failure: end_tick at tick 2" in str(err.value)


def test_state_lost_with_an_executor_is_one_clear_message():
    """Spark's error when a local checkpoint's block went with its executor."""
    class Java:
        def getMessage(self):  # noqa: N802 (py4j's name)
            return ("Job aborted due to stage failure: Task 1 in stage 57.0 failed 4 times, "
                    "most recent failure: Lost task 1.3 in stage 57.0 (TID 130) (10.0.0.2 "
                    "executor 2): org.apache.spark.SparkException: Checkpoint block rdd_61_1 "
                    "not found! Either the executor that originally checkpointed this "
                    "partition is no longer alive, or the original RDD is unpersisted.\n\tat "
                    "org.apache.spark.rdd.LocalCheckpointRDD.compute(LocalCheckpointRDD.scala:59)")

    err = Exception("An error occurred while calling o1.count")
    err.java_exception = Java()
    msg = str(_step_failure(12, err))
    assert msg.startswith("micro-batch 12: an executor was lost") and "\n" not in msg
    assert "checkpoint_dir=" in msg


def test_a_killed_attempt_leaves_no_result_file(tmp_path):
    """A task killed between writing its result file and renaming it into place leaves
    nothing a reader (Spark, pyarrow: they skip names starting with "." or "_") takes for a
    result; the retry commits the file once."""
    path = tmp_path / "b000002-p0001-normal.parquet"
    table = pa.table({"tid_0": [1, 2, 3], "tid_1": [4, 5, 6]})
    script = ("import os, signal, pyarrow as pa, pyarrow.parquet as pq\n"
              "from joins.online.programs.base import commit_file\n"
              "def write(tmp):\n"
              f"    pq.write_table(pa.table({table.to_pydict()!r}), tmp)\n"
              "    os.kill(os.getpid(), signal.SIGKILL)\n"
              f"commit_file({str(path)!r}, write)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert any(tmp_path.iterdir())  # the killed attempt's partial file is there...
    assert ds.dataset(str(tmp_path), format="parquet").count_rows() == 0  # ...and hidden
    commit_file(str(path), lambda tmp: pq.write_table(table, tmp))  # the retry
    commit_file(str(path), lambda tmp: pq.write_table(table, tmp))  # a recomputation
    assert ds.dataset(str(tmp_path), format="parquet").to_table().equals(table)


@pytest.mark.spark
def test_reliable_checkpoints_on_a_shared_folder(spark, monkeypatch, tmp_path):
    """checkpoint_dir=: every 2nd micro-batch the state is checkpointed in the folder (the
    Parquet inputs once); the counts are those of local checkpoints, the output is exact, and
    the folder is left empty."""
    r, s = _inputs()
    r.to_parquet(tmp_path / "R.parquet", index=False)
    s.to_parquet(tmp_path / "S.parquet", index=False)
    dropped = []
    drop = Engine._drop_checkpoint

    def spy(self, path):
        folder = Path(path.removeprefix("file:"))
        dropped.append(sorted(str(p.relative_to(folder)) for p in folder.rglob("part-*")))
        drop(self, path)

    monkeypatch.setattr(Engine, "_drop_checkpoint", spy)
    ck = tmp_path / "ck"
    res = run_stream(spark, str(tmp_path / "R.parquet"), str(tmp_path / "S.parquet"),
                     collect_output=True, progress=False, partitions=2, checkpoint_dir=ck,
                     checkpoint_every=2, **SCENARIOS["normal"])
    assert_same_rows(res.output, oracle_join(r, s))
    pd.testing.assert_frame_equal(_counts(res), _counts(_base(spark, "normal")))
    steps = res.metrics["step"].nunique()
    assert res.summary["reliable_checkpoints"] == steps // 2 >= 2
    # the superseded checkpoint (step 1), then the run's folder with the last one (step 3)
    assert dropped[0] == ["part-00000", "part-00001"]
    assert len(dropped[-1]) == 2 and all(p.startswith("rdd-") for p in dropped[-1])
    assert ck.is_dir() and not any(ck.iterdir())
