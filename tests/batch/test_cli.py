"""`python -m joins run`: bad options are one usage line and exit 2, before Spark starts."""

from __future__ import annotations

import pandas as pd
import pytest

from joins.cli import main


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


def test_output_folder_must_be_writable(files, capsys, monkeypatch):
    # os.access stands in for a read-only folder: chmod does not stop root, who runs CI here
    monkeypatch.setattr("joins.cli.os.access", lambda path, mode: str(path) != str(files))
    assert main(args(files)) == 2
    assert capsys.readouterr().err == f"error: cannot write {files}/OUT.parquet: " \
        f"folder {files} is not writable\n"


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
