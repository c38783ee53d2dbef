"""`python -m joins run`: bad options are one usage line and exit 2, before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from joins.cli import main
from joins.cli_checks import mark_output_folder


class SparkStarted(Exception):
    pass


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Two tiny Parquet inputs; starting Spark raises, so a test sees whether checks ran first."""
    import runtime.spark_session

    def no_spark(**_kw):
        raise SparkStarted

    monkeypatch.setattr(runtime.spark_session, "get_spark", no_spark)
    pd.DataFrame({"key": [1, 2], "a": [1, 2]}).to_parquet(tmp_path / "A.parquet")
    pd.DataFrame({"key": [1, 3], "b": [1, 2]}).to_parquet(tmp_path / "B.parquet")
    return tmp_path


def args(folder, *extra: str, out: str = "OUT.parquet") -> list[str]:
    return ["run", "algorithm=hash_join", f"left={folder / 'A.parquet'}",
            f"right={folder / 'B.parquet'}", f"out={folder / out}", *extra]


@pytest.mark.parametrize(("option", "message"), [
    ("executors=abc", "executors must be an integer >= 1, got 'abc'"),
    ("executors=0", "executors must be an integer >= 1, got '0'"),
    ("partitions=2.5", "partitions must be an integer >= 1, got '2.5'"),
    ("seed=-1", "seed must be an integer >= 0, got '-1'"),
    ("memory_budget_bytes=lots", "memory_budget_bytes must be a number >= 1, got 'lots'"),
    ("memory_budget_bytes=nan", "memory_budget_bytes must be a number >= 1, got 'nan'"),
    ("memory_budget_bytes=", "memory_budget_bytes must be a number >= 1, got ''"),
    ("record_bytes=1e3", "record_bytes must be an integer >= 1, got '1e3'"),
])
def test_bad_number_is_one_usage_line(files, capsys, option, message):
    assert main(args(files, option)) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_output_folder_must_be_a_folder(files, capsys):
    (files / "plain").write_text("")
    assert main(args(files, out="plain/sub/OUT.parquet")) == 2
    assert capsys.readouterr().err == f"error: cannot write {files}/plain/sub/OUT.parquet: " \
        f"{files}/plain is not a folder\n"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_unwritable_output_is_one_line_before_spark(files, capsys):
    """/proc takes no new files even for root, for whom os.access says it is writable."""
    assert main(args(files, out="/proc/b7.parquet")) == 2
    assert capsys.readouterr().err == "error: cannot write /proc/b7.parquet: cannot create " \
        "anything in /proc (No such file or directory)\n"


def test_output_folder_must_be_writable(files, capsys, monkeypatch):
    """The check creates a file (here refused, as in a read-only folder) and leaves nothing."""
    def refuse(**_kw):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("datagen.outputs.tempfile.mkstemp", refuse)
    assert main(args(files, out="new/deeper/OUT.parquet")) == 2
    assert capsys.readouterr().err == f"error: cannot write {files}/new/deeper/OUT.parquet: " \
        f"cannot create anything in {files}/new/deeper (Permission denied)\n"
    assert not (files / "new").exists()  # the folders it made to try are gone


def test_existing_output_is_refused_and_left_alone(files, capsys):
    (files / "OUT.parquet").mkdir()
    (files / "OUT.parquet" / "notes.txt").write_text("mine")
    for extra in ([], ["force=true"]):
        assert main(args(files, *extra)) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: output {files}/OUT.parquet exists") and err.count("\n") == 1
    assert "_joins_output.json" in err  # force: only outputs this tool wrote (its marker)
    assert (files / "OUT.parquet" / "notes.txt").read_text() == "mine"


def test_force_replaces_only_an_output_this_tool_wrote(files, capsys):
    out = files / "OUT.parquet"
    out.mkdir()
    (out / "part-0.parquet").write_bytes(b"x")
    mark_output_folder(out, "test")
    assert main(args(files)) == 2  # without force: refused
    assert "exists; remove it" in capsys.readouterr().err
    with pytest.raises(SparkStarted):  # ours and nothing else in it: force replaces it
        main(args(files, "force=true"))
    (out / "notes.txt").write_text("mine")  # a user's file in it: force refuses
    assert main(args(files, "force=true")) == 2
    assert "holds files this tool did not write (notes.txt)" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"
    assert main(args(files, "force=yes")) == 2
    assert capsys.readouterr().err == "error: force must be true or false, got 'yes'\n"


def test_empty_output_path_is_refused(files, capsys):
    argv = args(files)
    argv[-1] = "out="
    assert main(argv) == 2
    assert capsys.readouterr().err == "error: out= needs a path\n"


def test_output_may_not_be_an_input(files, capsys):
    pd.DataFrame({"key": [1]}).to_parquet(files / "C.parquet")
    mark_output_folder(files, "test")  # even when force could replace the folder
    assert main(["run", "algorithm=hash_join", f"left={files / 'A.parquet'}",
                 f"right={files / 'B.parquet'}", f"out={files}", "force=true"]) == 2
    assert "overlaps the input left=" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "message"), [
    (["param.hot_treshold=10"], "error: unknown parameter param.hot_treshold for am_join; did you "
     "mean param.hot_threshold? (valid: param.broadcast_rule, "),
    (["param.epsilon=1"], "error: unknown parameter param.epsilon for am_join (valid: "),
    (["outt=X"], "error: unknown option(s) outt; did you mean out? (valid: algorithm, "),
])
def test_unknown_parameter_names_the_closest(files, capsys, extra, message):
    argv = args(files, *extra)
    argv[1] = "algorithm=am_join"
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_parameter_of_an_algorithm_without_parameters(files, capsys):
    assert main(args(files, "param.hot_threshold=10")) == 2
    assert capsys.readouterr().err == "error: unknown parameter param.hot_threshold for " \
        "hash_join (valid: none, hash_join takes no param.*)\n"


def test_valid_parameters_reach_spark(files):
    argv = args(files, "param.hot_threshold=10", "param.lambda=2")
    argv[1] = "algorithm=am_join"
    with pytest.raises(SparkStarted):
        main(argv)


@pytest.mark.parametrize("command", ["run", "list", "describe"])
def test_help_after_a_command_is_its_usage(capsys, command):
    assert main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m joins {command}")
    assert main(["run", "algorithm=am_join", "-h"]) == 0


def test_stream_without_arguments_is_a_usage_error(capsys):
    assert main(["stream"]) == 2
    assert "python -m joins stream operator=" in capsys.readouterr().out
    assert main(["stream", "--help"]) == 0


def test_good_options_reach_spark(files):
    """Valid numbers and a new output under a not yet existing folder pass every check."""
    extra = ["executors=3", "partitions=9", "seed=2", "memory_budget_bytes=1e6", "record_bytes=8"]
    with pytest.raises(SparkStarted):
        main(args(files, *extra, out="new/OUT.parquet"))


def test_cluster_preset_without_its_master_url_is_one_usage_line(files, capsys, monkeypatch):
    monkeypatch.delenv("SPARK_MASTER_URL", raising=False)
    assert main(args(files, "spark=standalone")) == 2  # no traceback from get_spark
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "SPARK_MASTER_URL" in err and err.count("\n") == 1


def test_an_existing_metrics_file_is_refused_before_spark(files, capsys):
    (files / "M.parquet").write_text("mine")
    assert main(args(files, f"metrics={files / 'M.parquet'}")) == 2
    assert "metrics" in capsys.readouterr().err and (files / "M.parquet").read_text() == "mine"
    assert main(args(files, "explain=maybe")) == 2
    with pytest.raises(SparkStarted):
        main(args(files, f"metrics={files / 'new.parquet'}", "explain=true"))


@pytest.mark.spark
def test_run_writes_its_output_and_metrics(spark, tmp_path, capsys, monkeypatch):
    """The whole command on real Spark: the output is DuckDB's join as a multiset and the
    metrics file holds the run's row (modeled time, tasks, the calibration it used). On the
    tests' shared session (a session of the preset's own settings would replace it)."""
    import runtime.spark_session
    from joins.oracle import assert_same_rows, oracle_join

    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda **_kw: spark)

    left = pd.DataFrame({"key": [1] * 12 + [2, None], "a": range(14)})
    right = pd.DataFrame({"key": [1] * 5 + [2, 2, None], "b": range(8)})
    left.to_parquet(tmp_path / "A.parquet")
    right.to_parquet(tmp_path / "B.parquet")
    metrics = tmp_path / "M.parquet"
    assert main(args(tmp_path, f"metrics={metrics}", "executors=2", "partitions=4")) == 0
    assert_same_rows(pd.read_parquet(tmp_path / "OUT.parquet"),
                     oracle_join(left, right, "key", "inner"))
    m = pd.read_parquet(metrics)
    assert len(m) == 1 and m.loc[0, "output_rows"] == 12 * 5 + 2
    assert m.loc[0, "modeled_s"] > 0 and m.loc[0, "calibration_id"] and m.loc[0, "executors"] == 2
    assert "calibration" in capsys.readouterr().out
