"""`python -m joins compare`: bad options before Spark; each output checked against DuckDB as a
multiset (a lost row and a duplicate do not cancel); a table with units."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from joins.cli import main
from joins.compare import Comparison, format_table, multiset_mismatch
from joins.oracle import oracle_join
from joins.registry import get
from tests.batch.test_cli import SparkStarted, files  # noqa: F401  (the fixture)


def _args(folder: Path, *extra: str) -> list[str]:
    return ["compare", f"left={folder / 'A.parquet'}", f"right={folder / 'B.parquet'}", *extra]


@pytest.mark.parametrize(("extra", "message"), [
    (("algorithms=hash_join,am_jion",), "unknown batch algorithm 'am_jion'"),
    (("algorithms=hash_join,hash_join",), "algorithms= needs distinct names"),
    (("algorithms=hash_join,fgsd_join", "how=left"), "fgsd_join cannot do 'left' joins"),
    (("algorithms=hash_join,am_join", "param.hot_treshold=3"),
     "no algorithm of hash_join, am_join reads param.hot_treshold; did you mean "
     "param.hot_threshold?"),
    (("algorithms=hash_join", "check=maybe"), "check must be true or false"),
    (("algorithms=hash_join", "executor=3"), "did you mean executors?"),
    ((), "missing algorithms"),
])
def test_bad_options_are_one_line_before_spark(files, capsys, extra, message):  # noqa: F811
    assert main(_args(files, *extra)) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_an_existing_out_folder_is_refused(files, capsys):  # noqa: F811
    (files / "mine").mkdir()
    (files / "mine" / "notes.txt").write_text("keep")
    assert main(_args(files, "algorithms=hash_join", f"out={files / 'mine'}")) == 2
    assert (files / "mine" / "notes.txt").read_text() == "keep"
    with pytest.raises(SparkStarted):
        main(_args(files, "algorithms=hash_join,am_join", "param.hot_threshold=3", "check=true",
                   f"out={files / 'new'}"))


def test_the_multiset_check_sees_a_lost_row_and_a_duplicate(tmp_path):
    left = pd.DataFrame({"key": [1, 1, 2, None, 4], "a": [1, 2, 3, 4, 5]})
    right = pd.DataFrame({"key": [1, 2, 2, None], "b": [7, 8, 9, 10]})
    left.to_parquet(tmp_path / "A.parquet")
    right.to_parquet(tmp_path / "B.parquet")
    exact = oracle_join(left, right, "key", "left")
    (tmp_path / "ok").mkdir()
    exact.to_parquet(tmp_path / "ok" / "part-0.parquet")
    args = (tmp_path / "A.parquet", tmp_path / "B.parquet", "key", "left")
    assert multiset_mismatch(tmp_path / "ok", *args) == (0, 0)
    # the same row count: row 0 lost, row 1 twice
    wrong = pd.concat([exact.iloc[1:], exact.iloc[[1]]])
    (tmp_path / "bad").mkdir()
    wrong.to_parquet(tmp_path / "bad" / "part-0.parquet")
    assert len(wrong) == len(exact) and multiset_mismatch(tmp_path / "bad", *args) == (1, 1)


@pytest.mark.spark
def test_compare_runs_each_algorithm_and_checks_it(spark, tmp_path):
    from joins.compare import compare_batch

    left = pd.DataFrame({"key": [1] * 30 + [2, 3, None], "a": range(33)})
    right = pd.DataFrame({"key": [1] * 20 + [3, None], "b": range(22)})
    left.to_parquet(tmp_path / "A.parquet")
    right.to_parquet(tmp_path / "B.parquet")
    cmp = compare_batch(spark, [get("hash_join"), get("am_join")], str(tmp_path / "A.parquet"),
                        str(tmp_path / "B.parquet"), on="key", how="full", executors=2,
                        partitions=4, params={"am_join": {"hot_threshold": 5}}, check=True,
                        scratch=tmp_path, log=lambda *_: None)
    t = cmp.table.set_index("algorithm")
    assert list(t.index) == ["hash_join", "am_join"] and t["exact"].all() and not cmp.errors
    assert (t["output_rows"] == len(oracle_join(left, right, "key", "full"))).all()
    assert (t["modeled_s"] > 0).all() and (t["spark_tasks"] > 0).all()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("check-")]  # tidied up


def test_the_table_prints_counts_as_integers_with_units():
    table = pd.DataFrame([{"algorithm": "hash_join", "modeled_s": 0.5, "wall_s": 2.0,
                           "output_rows": 91600, "shuffle_write_bytes": 1.5e6,
                           "task_imbalance": 3.0, "spark_tasks": 12.0, "exact": True}])
    text = format_table(Comparison(table, "abc", 8, checked=True))
    head, row = text.splitlines()[:2]
    assert "output_rows (rows)" in head and "modeled_s (modeled s)" in head
    assert "91,600" in row and "1,500,000" in row and "9.16e+04" not in text
    assert row.split()[-1] == "yes" and "does not change how many Spark executors run" in text


@pytest.mark.parametrize(("extra", "message"), [
    (("operators=shj,dynamc", "joiners=4"), "unknown online algorithm 'dynamc'"),
    (("operators=shj", "joiners=0"), "joiners must be an integer >= 1"),
    (("operators=shj,dynamic", "joiners=4", "param.esp=2"),
     "no algorithm of shj, dynamic reads param.esp; did you mean param.eps?"),
    (("operators=shj", "joiners=4", "order=sorted"), "unknown order 'sorted'"),
    (("operators=shj",), "missing joiners"),
    # the arena's time model and resources
    (("operators=shj", "joiners=4", "time=a"), "time column 'a' is not in s="),
    (("operators=shj", "joiners=4", "tick=5"), "tick= cuts the stream at event-time ticks: "
                                               "it needs time=COLUMN"),
    (("operators=shj", "joiners=4", "time=key", "tick=0"), "tick must be a number > 0, got '0'"),
    (("operators=shj", "joiners=4", "time=key", "tick=-2"), "tick must be a number > 0"),
    (("operators=shj", "joiners=4", "memory=0"), "memory must be an integer >= 1, got '0'"),
    (("operators=shj", "joiners=4", "memory=-5"), "memory must be an integer >= 1"),
    (("operators=shj", "joiners=4", "memroy=100"), "unknown option(s) memroy; did you mean "
                                                   "memory?"),
    (("operators=shj", "joiners=4", "tck=5"), "did you mean tick?"),
    (("operators=shj", "joiners=4", "resources=equal"),
     "resources must be one of equal_total, equal_per_unit, got 'equal'"),
    (("operators=shj", "joiners=4", "check=false"), "always checks each operator against "
                                                    "DuckDB"),
])
def test_bad_stream_comparisons_are_one_line_before_spark(files, capsys, extra, message):  # noqa: F811
    argv = ["compare", f"r={files / 'A.parquet'}", f"s={files / 'B.parquet'}", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_a_time_column_must_be_event_times(files, capsys):  # noqa: F811
    pd.DataFrame({"key": [1, 2], "ts": ["a", "b"]}).to_parquet(files / "R.parquet")
    pd.DataFrame({"key": [1, 3], "ts": [1.0, None]}).to_parquet(files / "S.parquet")
    base = ["compare", "operators=shj", "joiners=2", "time=ts"]
    assert main([*base, f"r={files / 'R.parquet'}", f"s={files / 'S.parquet'}"]) == 2
    assert "time column 'ts' of r is string, not numeric or a timestamp" in capsys.readouterr().err
    assert main([*base, f"r={files / 'S.parquet'}", f"s={files / 'S.parquet'}"]) == 2
    assert "time column 'ts' of r has 1 null or NaN values" in capsys.readouterr().err


def test_good_stream_options_reach_spark(files):  # noqa: F811
    with pytest.raises(SparkStarted):
        main(["compare", f"r={files / 'A.parquet'}", f"s={files / 'B.parquet'}",
              "operators=shj,diner", "joiners=4", "time=key", "tick=1", "memory=3",
              "resources=equal_per_unit", "check=true", "param.tups_per_block=2"])


def test_the_arena_columns_have_the_arena_units():
    """The table's units are the ones the arena writes with its metrics (joins.arena)."""
    from joins.arena import arena_metrics
    from joins.compare import STREAM_COLUMNS
    from joins.online import CostModel
    from joins.summary import format_value, unit

    m = pd.DataFrame({"batch": [0, 0, 1, 1], "worker": [0, 1, 0, 1], "phase": ["normal"] * 4,
                      "outputs": [1, 0, 2, 1], "received": [2, 1, 1, 1], "migrated": [0] * 4,
                      "r_stored": [1, 1, 2, 1], "s_stored": [1, 0, 1, 1]})
    metrics, series = arena_metrics(m, CostModel(), expected=4, budget=10, total=5,
                                    tups_per_block=1)
    for c in STREAM_COLUMNS:
        if c in metrics:
            assert unit(c) == metrics[c][1], c
    assert series[-1]["value"] == 1.0 and metrics["share_before_end"][0] == 1.0
    assert format_value("modeled_time_100", 0.000123456) == "0.0001235"  # not 0.000
    assert format_value("units", 4) == "4"


def _timed_pair(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two tiny timed relations with a hot key (and nulls, which match nothing)."""
    left = pd.DataFrame({"key": [1] * 40 + [2, 3, None] * 5, "a": range(55),
                         "ts": [float(i) for i in range(55)]})
    right = pd.DataFrame({"key": [1] * 30 + [3, None] * 5, "b": range(40),
                          "ts": [1.5 * i for i in range(40)]})
    left.to_parquet(folder / "R.parquet")
    right.to_parquet(folder / "S.parquet")
    return left, right


@pytest.mark.spark
def test_compare_stream_checks_each_operator(spark, tmp_path):
    from joins.compare import compare_stream

    left, right = _timed_pair(tmp_path)
    cmp = compare_stream(spark, ["shj"], str(tmp_path / "R.parquet"),
                         str(tmp_path / "S.parquet"), on="key", joiners=4,
                         scratch=tmp_path, log=lambda *_: None, batch_size=30, partitions=2)
    t = cmp.table.set_index("algorithm")
    assert t["exact"].all() and not cmp.errors
    assert (t["output_rows"] == len(oracle_join(left, right, "key", "inner"))).all()
    assert "modeled_time_100 (modeled s)" in format_table(cmp).splitlines()[0]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("stream-")]  # tidied up


@pytest.mark.spark
def test_compare_operators_prints_the_arena_metrics_and_draws_the_curve(
        spark, tmp_path, capsys, monkeypatch):
    """Three operators (two distributed, one single site) on a user's timed stream cut at
    event-time ticks: the arena's metrics, a mismatch reported for its operator only, the
    curve of every operator."""
    import joins.compare
    import runtime.spark_session

    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda **_kw: spark)  # shared
    left, right = _timed_pair(tmp_path)
    calls, real = [], joins.compare.multiset_mismatch

    def third_differs(*args, **kw):  # the third operator's rows "lose" one row
        calls.append(1)
        missing, extra = real(*args, **kw)
        return (missing + 1, extra) if len(calls) == 3 else (missing, extra)

    monkeypatch.setattr(joins.compare, "multiset_mismatch", third_differs)
    out = tmp_path / "cmp"
    assert main(["compare", "operators=shj,dynamic,diner", f"r={tmp_path / 'R.parquet'}",
                 f"s={tmp_path / 'S.parquet'}", "joiners=4", "time=ts", "tick=10",
                 "memory=40", f"out={out}"]) == 1
    printed = capsys.readouterr()
    assert "error: diner: output differs from DuckDB's join: 1 rows missing" in printed.err
    head = printed.out.split("algorithm", 1)[1].splitlines()[0]
    for c in ("modeled_time_50", "modeled_time_100", "share_before_end", "peak_memory_per_unit",
              "network_tuples", "load_max_mean", "exact"):
        assert c in head
    table = pd.read_csv(out / "compare.csv").set_index("algorithm")
    assert list(table.index) == ["shj", "dynamic", "diner"]
    assert list(table["exact"]) == [True, True, False]
    n = len(oracle_join(left, right, "key", "inner"))
    assert (table["output_rows"] == n).all() and (table.loc[["shj", "dynamic"], "oracle_rows"] == n).all()
    assert list(table["units"]) == [4, 4, 1]  # a single site runs on one unit with all of M
    assert list(table["memory_per_unit_tuples"]) == [10, 10, 40]
    # a distributed unit's overflow is charged as spilled (a single site's input buffer counts)
    dist = table.loc[["shj", "dynamic"]]
    assert (dist["peak_memory_per_unit"] <= dist["memory_per_unit_tuples"]).all()
    assert (dist["modeled_time_50"] <= dist["modeled_time_100"]).all()
    assert pd.isna(table.loc["diner", "modeled_time_100"])  # a row short: never 100%
    curve = pd.read_csv(out / "compare_curve.csv")
    shares = curve[curve["metric"] == "results_share_t"].groupby("algorithm", sort=False)
    assert list(shares.groups) == ["shj", "dynamic", "diner"]
    assert (shares["value"].last().loc[["shj", "dynamic"]] == 1.0).all()
    assert (shares["t"].apply(lambda t: t.is_monotonic_increasing)).all()
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.spark
def test_compare_command_writes_its_table_and_chart(spark, tmp_path, capsys, monkeypatch):
    import runtime.spark_session

    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda **_kw: spark)  # shared
    pd.DataFrame({"key": [1] * 20 + [2], "a": range(21)}).to_parquet(tmp_path / "A.parquet")
    pd.DataFrame({"key": [1] * 9 + [3], "b": range(10)}).to_parquet(tmp_path / "B.parquet")
    out = tmp_path / "cmp"
    assert main(_args(tmp_path, "algorithms=hash_join,broadcast_join", "executors=2",
                      f"out={out}", "check=true")) == 0
    table = pd.read_csv(out / "compare.csv")
    assert list(table["algorithm"]) == ["hash_join", "broadcast_join"]
    assert (table["output_rows"] == 180).all() and table["exact"].all()
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"{out}/compare.csv" in capsys.readouterr().out
