"""The runner's resume, failure and atomicity paths, with a scripted kind (no Spark)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from experiments import kinds, results
from experiments.config import compose
from experiments.results import Point, finished, read_results, write_point
from experiments.run import run_point
from tests.experiments import fake_kind


def test_point_written_with_provenance(scripted):
    run, root = scripted
    assert run("hash_join", 0.5) == "ok"
    frame = pd.read_parquet(root / "amjoin" / "fig5")
    row = frame[frame.metric == "modeled_time"].iloc[0]
    assert row.value == 1.5 and row.status == "ok" and row.series == "hash_join"
    for col in ("config_hash", "git_commit", "calibration_id", "start_time", "scale"):
        assert row[col], col
    assert row.scale == "tiny" and row.seed == 0


def test_finished_points_are_skipped_and_force_redoes(scripted):
    run, _ = scripted
    assert run("hash_join", 0.0) == "ok"
    assert run("hash_join", 0.0) == "skipped"
    assert run("hash_join", 0.0, "force=true") == "ok"
    assert fake_kind.CALLS == [("hash_join", 0.0), ("hash_join", 0.0)]


def test_changed_config_reruns(scripted):
    run, _ = scripted
    run("hash_join", 0.0)
    assert run("hash_join", 0.0, "seed=7") == "ok"
    assert len(fake_kind.CALLS) == 2


def test_each_seed_keeps_its_own_result(scripted):
    run, root = scripted
    for seed in (0, 1, 2):
        assert run("hash_join", 0.5, f"seed={seed}") == "ok"
    assert run("hash_join", 0.5, "seed=1") == "skipped"
    frame = read_results(root, "amjoin/fig5")
    assert sorted(frame.groupby("point_id")["seed"].first().tolist()) == [0, 1, 2]
    assert sorted(p.name for p in (root / "amjoin" / "fig5").glob("*.parquet")) == [
        "hash_join__0.5.parquet", "hash_join__0.5__seed1.parquet", "hash_join__0.5__seed2.parquet"]


def test_a_series_with_its_own_x_values_runs_only_there(scripted):
    run, root = scripted
    own = "+figure.series.hj_seed1={algorithm:hash_join,x_values:[0.5]}"
    assert run("hj_seed1", 0.0, own) == "skipped"
    assert run("hj_seed1", 0.5, own) == "ok"
    assert fake_kind.CALLS == [("hj_seed1", 0.5)]
    from experiments.figures import load_figure
    from experiments.report import missing_points

    figure = load_figure("amjoin/fig5", "tiny")
    figure["series"] = {"hj_seed1": {"algorithm": "hash_join", "x_values": [0.5]}}
    assert missing_points(figure, read_results(root, "amjoin/fig5"), "tiny") == []


def test_failures_are_results_and_sweep_goes_on(scripted):
    run, root = scripted
    assert run("spark3_join", 0.0) == "error"
    assert run("broadcast_join", 0.0) == "oom"
    assert run("hash_join", 1.0) == "ok"
    frame = read_results(root, "amjoin/fig5")
    status = frame.groupby("series")["status"].first().to_dict()
    assert status == {"spark3_join": "error", "broadcast_join": "oom", "hash_join": "ok"}
    assert "scripted crash" in frame[frame.series == "spark3_join"].error.iloc[0]
    # an error is retried on rerun, an oom is a final result
    assert run("spark3_join", 0.0) == "error"
    assert run("broadcast_join", 0.0) == "skipped"


def test_unknown_series_is_a_usage_error(scripted):
    run, _ = scripted
    with pytest.raises(ValueError, match="valid: .*hash_join"):
        run("no_such_join", 0.0)


def test_unwritable_results_folder(monkeypatch, tmp_path):
    monkeypatch.setitem(kinds.KINDS, "batch_join", "tests.experiments.fake_kind:run_point")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if os.access(locked, os.W_OK):  # running as root: permissions are not enforced
        locked = tmp_path / "a_file"
        locked.write_text("")
    cfg = compose(["figure=amjoin/fig5", "scale=tiny", f"results_root={locked}",
                   "point.series=hash_join", "point.x=0.0"])
    with pytest.raises(results.ResultsError, match="not writable"):
        run_point(cfg)


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    """Run the figure runner's command line; no point may start (bad input is found first)."""
    from experiments import run as run_mod

    def no_points():
        raise AssertionError("a point started")

    monkeypatch.setattr(run_mod, "_task", no_points)

    def call(*args: str, root=tmp_path) -> str:
        with pytest.raises(SystemExit) as exc:
            run_mod.main(["figure=amjoin/fig5", "scale=tiny", f"results_root={root}", *args])
        assert exc.value.code == 2
        assert not list(tmp_path.rglob("*.parquet"))
        err = capsys.readouterr().err
        assert err.startswith("error:") and len(err.strip().splitlines()) == 1
        return err

    return call


def test_cli_unknown_series(cli):
    err = cli("point.series=hash_join,no_such_join")
    assert "unknown series 'no_such_join'" in err and "valid: " in err and "spark3_join" in err


def test_cli_unwritable_results_folder(cli, tmp_path):
    blocker = tmp_path / "a_file"  # a file where a folder must go: unwritable even as root
    blocker.write_text("")
    err = cli(root=blocker)
    assert "not writable" in err and str(blocker) in err and "results_root=" in err


def test_cli_cluster_preset_without_master_url(cli, monkeypatch):
    monkeypatch.delenv("SPARK_MASTER_URL", raising=False)
    err = cli("spark=standalone")
    assert "$SPARK_MASTER_URL" in err and "not set" in err and "local_cluster" in err
    assert "no cluster is up (make cluster-up starts one" in err  # conftest hides the user's


@pytest.mark.parametrize(("override", "expected"), [
    ("figure.series.hash_join.algorithm=no_such_algo", "unknown batch algorithm 'no_such_algo'"),
    # a series named after no algorithm runs the algorithm of its name
    ("+figure.series.nameless={label: x}", "unknown batch algorithm 'nameless'"),
])
def test_cli_unregistered_algorithm(cli, override, expected):
    err = cli(override)
    assert expected in err and "valid: " in err and "tree_join" in err


def test_progress_total_counts_every_swept_dimension():
    from experiments.run import sweep_overrides

    base = ["figure=amjoin/fig5", "scale=tiny", "point.series=hash_join,spark3_join"]
    assert sweep_overrides([*base, "point.x=0,0.5,1"])[1] == 6
    assert sweep_overrides([*base, "point.x=0,0.5,1", "seed=0,1"])[1] == 12
    added, total = sweep_overrides([*base, "seed=range(0,3)"])
    assert added[0].startswith("point.x=") and total == 2 * 3 * len(added[0].split(","))


def test_write_is_atomic(tmp_path, monkeypatch):
    point = Point("amjoin/fig5", "hash_join", 0.5, "0.5")
    folder = tmp_path / "amjoin" / "fig5"
    row = {"figure": "amjoin/fig5", "series": "hash_join", "x": 0.5, "x_label": "0.5",
           "metric": "m", "value": 1.0, "unit": "u", "status": "ok", "seed": 0,
           "config_hash": "h", "wall_time_s": 1.0}
    write_point(folder, point, [row])
    assert finished(folder, point, "h") and not finished(folder, point, "other")

    def crash(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", crash)
    with pytest.raises(OSError):
        write_point(folder, point, [{**row, "value": 2.0}])
    monkeypatch.undo()
    assert sorted(p.name for p in folder.iterdir()) == [point_file := "hash_join__0.5.parquet"]
    assert pd.read_parquet(folder / point_file).value.tolist() == [1.0]


def test_read_results_ignores_in_progress_files(tmp_path):
    folder = tmp_path / "amjoin" / "fig5"
    folder.mkdir(parents=True)
    (folder / ".hash_join__0.5.parquet.123.tmp").write_bytes(b"partial")
    assert read_results(tmp_path, "amjoin/fig5").empty


@pytest.mark.spark
def test_failed_point_resets_the_spark_session(scripted, monkeypatch, spark):
    import runtime.spark_session as session

    class Dead:
        """A session whose JVM died: stopping it fails too."""

        @property
        def sparkContext(self):
            raise RuntimeError("JVM is gone")

    run, _ = scripted
    monkeypatch.setattr(session, "_session", Dead())
    monkeypatch.setattr(session, "_session_key", ("local[2]",))
    assert run("spark3_join", 0.0) == "error"
    assert session._session is None and session._session_key is None
    # only the broken session is forgotten: the live JVM (and the test run's session) still work
    assert spark.range(3).selectExpr("id * 2 AS x").agg({"x": "sum"}).collect()[0][0] == 6


@pytest.mark.spark
def test_failed_point_keeps_a_healthy_session(scripted, spark):
    import runtime.spark_session as session

    run, _ = scripted
    assert session._session is spark
    assert run("spark3_join", 0.0) == "error"
    assert session._session is spark and spark.range(3).count() == 3


def test_error_text_keeps_the_jvm_cause():
    from experiments.run import _error_text

    exc = RuntimeError("An error occurred while calling o1.count.\n: org.apache.spark.SparkException"
                       "\n\tat x\nCaused by: java.lang.OutOfMemoryError: Java heap space\n\tat y")
    text = _error_text(exc)
    assert text.startswith("RuntimeError: An error occurred") and "OutOfMemoryError" in text



@pytest.mark.spark
@pytest.mark.parametrize("driver_work_s", [0.0, 1.5])
def test_wall_clock_guard_cancels_a_job_running_or_started_late(spark, driver_work_s):
    """The limit may pass during a job or between two jobs; either way the point times out."""
    import time

    from experiments.kinds import WallClockTimeout, wall_clock_guard

    start = time.monotonic()
    with pytest.raises(WallClockTimeout), wall_clock_guard(spark, 1.0, "slow"):
        time.sleep(driver_work_s)  # e.g. an algorithm's driver loop between two Spark jobs
        spark.range(10**12, numPartitions=2).selectExpr("sum(id % 7)").collect()
    assert time.monotonic() - start < 60
    assert spark.range(3).count() == 3  # the session survives the cancellation
    with wall_clock_guard(spark, 30.0, "fast"):
        assert spark.range(5).count() == 5


def test_first_checksum_on_the_same_inputs_is_the_reference(tmp_path):
    from experiments.kinds.batch_join import _agreed_checksum

    cols = ["l_key", "r_key"]
    assert _agreed_checksum(tmp_path, "R", "S", "key", "inner", cols, 2**70) == 2**70
    assert _agreed_checksum(tmp_path, "R", "S", "key", "inner", cols, 5) == 2**70
    # another join type or output layout is another reference
    assert _agreed_checksum(tmp_path, "R", "S", "key", "left", cols, 5) == 5
    assert _agreed_checksum(tmp_path, "R", "S", "key", "inner", ["l_key"], 7) == 7


def test_git_commit_is_dirty_for_code_changes_not_for_sweep_outputs(tmp_path, monkeypatch):
    import subprocess

    from experiments import run as run_mod

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    for rel in ("figures/plot.py", "figures/amjoin/fig5.png", "results/amjoin/p.parquet",
                "REPORT.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("v1")
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.setattr(run_mod, "ROOT", tmp_path)
    clean = run_mod.git_commit()
    assert clean and not clean.endswith("-dirty") and clean != "unknown"
    for rel in ("figures/amjoin/fig5.png", "results/amjoin/p.parquet", "REPORT.md"):
        (tmp_path / rel).write_text("v2")
    assert run_mod.git_commit() == clean  # what a sweep writes
    (tmp_path / "figures/plot.py").write_text("v2")
    assert run_mod.git_commit() == clean + "-dirty"  # code
