"""Bad CLI input fails with a clear message and exit code 2 before Spark starts; a good run
models its cost with the machine's calibration."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import runtime.spark_session
from joins.cli_checks import MARKER, mark_output_folder
from joins.online.cli import main


@pytest.fixture
def files(tmp_path):
    pd.DataFrame({"key": [1, 2], "a": [1, 2]}).to_parquet(tmp_path / "R.parquet")
    pd.DataFrame({"key": [1, 3], "b": [1, 2]}).to_parquet(tmp_path / "S.parquet")
    pd.DataFrame({"key": ["x", "y"], "b": [1, 2]}).to_parquet(tmp_path / "Sstr.parquet")
    pd.DataFrame({"key": ["x", "z"], "a": [1, 2]}).to_parquet(tmp_path / "Rstr.parquet")
    return tmp_path


@pytest.fixture
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the CLI started Spark on bad input")

    monkeypatch.setattr(runtime.spark_session, "get_spark", refuse)


@pytest.mark.usefixtures("no_spark")
@pytest.mark.parametrize(("args", "message"), [
    (["operator=nope", "joiners=4"], "unknown operator"),
    (["operator=dynamic", "joiners=0"], "joiners must be >= 1"),
    (["operator=dynamic", "joiners=x"], "joiners must be an integer"),
    (["operator=dynamic", "joiners=4", "on=missing"], "key column 'missing' is not in r"),
    (["operator=dynamic", "joiners=4", "order=zigzag"], "unknown order"),
    (["operator=shj", "joiners=4", "band=1"], "equi-join operator"),
    (["operator=dynamic", "joiners=4", "controller=psychic"], "controller must be"),
    (["operator=dynamic", "joiners=4", "epsilon=0.5"],
     "unknown parameter epsilon= for dynamic; did you mean eps=? (its parameters: decide_on, "
     "eps, initial, jump, warmup; engine options: archive, band, "),
    # param.<name>= (describe's and compare's spelling) is the operator's parameter too
    (["operator=dynamic", "joiners=4", "param.eps=5"], "dynamic: eps must be in (0, 1], got 5.0"),
    (["operator=dynamic", "joiners=4", "param.epsilon=0.5"],
     "unknown parameter epsilon= for dynamic; did you mean eps=?"),
    (["operator=dynamic", "joiners=4", "extra=1"], "unknown parameter extra= for dynamic"),
    (["operator=dynamic", "joiners=4", "n_r=1"], "unknown parameter n_r= for dynamic"),
    (["operator=static_mid", "joiners=4", "batchsize=10"],
     "unknown parameter batchsize= for static_mid; did you mean batch_size=? (its parameters: "
     "none; "),
    (["operator=dynamic", "joiners=4", "notkeyvalue"], "expected key=value"),
    # numeric options that are not numbers
    (["operator=dynamic", "joiners=4", "k=abc"], "k must be float, got 'abc'"),
    (["operator=dynamic", "joiners=4", "seed=x"], "seed must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "batch_size=x"], "batch_size must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "budget=x"], "budget must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "partitions=x"], "partitions must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "partitions=0"], "partitions must be >= 1"),
    (["operator=dynamic", "joiners=4", "step_tuples=0"], "step_tuples must be >= 1"),
    (["operator=dynamic", "joiners=4", "eps=abc"], "eps must be float, got 'abc'"),
    # values the operator's policy or the order rejects
    (["operator=dynamic", "joiners=4", "eps=5"], "dynamic: eps must be in (0, 1], got 5.0"),
    (["operator=dynamic", "joiners=4", "warmup=-3"], "dynamic: warmup must be >= 0"),
    (["operator=dynamic", "joiners=4", "decide_on=x"], "dynamic: decide_on must be updated"),
    (["operator=dynamic", "joiners=4", "order=fluct", "k=-1"],
     "order fluct: fluctuation factor k must be > 1, got -1.0"),
    (["operator=dynamic", "joiners=4", "seed=-1"], "seed must be >= 0"),
    (["operator=dynamic", "joiners=4", "migration_rate=nan"], "migration_rate must be > 0"),
    (["operator=dynamic", "joiners=4", "migration_rate=inf"], "migration_rate must be > 0"),
    (["operator=static_mid", "joiners=4", "band=nan"], "band must be >= 0, got nan"),
    # an empty path would be the current folder
    (["operator=static_mid", "joiners=4", "out="], "out= needs a path"),
    (["operator=static_mid", "joiners=4", "metrics= "], "metrics= needs a path"),
    (["operator=static_mid", "joiners=4", "force=maybe"], "force must be bool, got 'maybe'"),
])
def test_bad_input_exits_2(files, capsys, args, message):
    base = [f"r={files / 'R.parquet'}", f"s={files / 'S.parquet'}"]
    assert main(base + args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("error: ")


def test_no_arguments_is_a_usage_error_and_help_anywhere_is_usage(capsys):
    assert main([]) == 2
    assert "python -m joins stream operator=" in capsys.readouterr().out
    for argv in (["--help"], ["-h"], ["operator=dynamic", "--help"]):
        assert main(argv) == 0
        assert "python -m joins stream operator=" in capsys.readouterr().out


def _stream(files, *extra):
    return ["operator=static_mid", "joiners=4", f"r={files / 'R.parquet'}",
            f"s={files / 'S.parquet'}", "progress=false", *extra]


@pytest.mark.usefixtures("no_spark")
def test_existing_out_folder_is_refused_and_left_alone(files, capsys):
    out = files / "OUT.parquet"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(_stream(files, f"out={out}")) == 2
    assert capsys.readouterr().err == f"error: output {out} exists; remove it or choose " \
        "another path\n"
    assert main(_stream(files, f"out={out}", "force=true")) == 2  # no marker: not ours
    err = capsys.readouterr().err
    assert err.startswith(f"error: output {out} exists and was not written by this tool (no "
                          "_joins_output.json in it") and err.count("\n") == 1
    mark_output_folder(out, "test")  # ours, but a user's file was put in it later
    (out / "later.txt").write_text("mine too")
    assert main(_stream(files, f"out={out}", "force=true")) == 2
    assert "holds files this tool did not write (later.txt)" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "later.txt").read_text() == "mine too"


@pytest.mark.usefixtures("no_spark")
def test_metrics_path_is_checked_before_spark(files, capsys):
    (files / "folder").mkdir()
    (files / "m.parquet").write_text("mine")
    for metrics, message in [
        (files / "folder", f"metrics {files / 'folder'} is a folder; give a file path"),
        (files / "m.parquet", f"metrics {files / 'm.parquet'} exists; remove it or choose "
         "another path"),
        (files / "m.parquet force=true", f"metrics {files / 'm.parquet'} exists and was not "
         "written by this tool"),
        (files / "R.parquet", f"metrics {files / 'R.parquet'} exists"),
        (files / "OUT.parquet" / "m.parquet", "out= and metrics= overlap"),
    ]:
        metrics, _, extra = str(metrics).partition(" ")
        out = [f"out={files / 'OUT.parquet'}"] if "overlap" in message else []
        assert main(_stream(files, f"metrics={metrics}", *out, *extra.split())) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert (files / "m.parquet").read_text() == "mine"


@pytest.mark.usefixtures("no_spark")
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("option", ["out=/proc/b7.parquet", "metrics=/proc/m.parquet"])
def test_unwritable_output_is_one_line_before_spark(files, capsys, option):
    path = option.partition("=")[2]
    assert main(_stream(files, option)) == 2
    assert capsys.readouterr().err == f"error: cannot write {path}: cannot create anything in " \
        "/proc (No such file or directory)\n"


@pytest.mark.usefixtures("no_spark")
def test_checkpoint_dir_is_checked_before_spark(files, capsys):
    """checkpoint_dir=: a folder this process can write in, not inside out= or an input."""
    (files / "afile").write_text("")
    cases = [(f"checkpoint_dir={files / 'afile'}", "is not a folder"),
             ("checkpoint_dir= ", "checkpoint_dir= needs a path"),
             (f"checkpoint_dir={files / 'out' / 'ck'}", f"lies inside out={files / 'out'}"),
             (f"checkpoint_dir={files / 'R.parquet' / 'ck'}", "lies inside R="),
             ("checkpoint_every=-1", "checkpoint_every must be >= 0")]
    if Path("/proc/self").is_dir():
        cases.append(("checkpoint_dir=/proc/ck", "checkpoint_dir=/proc/ck: cannot write"))
    for option, message in cases:
        assert main(_stream(files, option, f"out={files / 'out'}")) == 2, option
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and err.startswith("error: "), err


@pytest.mark.usefixtures("no_spark")
@pytest.mark.parametrize(("r", "s", "extra", "message"), [
    ("R", "Sstr", [], "key column types differ for 'key': r: int64, s: string"),
    ("Rstr", "Sstr", ["band=1"], "a band join needs numeric keys; 'key' is string"),
])
def test_bad_key_types_exit_2(files, capsys, r, s, extra, message):
    args = ["operator=dynamic", "joiners=4", f"r={files / r}.parquet", f"s={files / s}.parquet"]
    assert main(args + extra) == 2
    assert message in capsys.readouterr().err


@pytest.mark.usefixtures("no_spark")
def test_missing_file_exits_2(files, capsys):
    assert main(["operator=dynamic", "joiners=4", f"r={files / 'nope.parquet'}",
                 f"s={files / 'S.parquet'}"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_metrics_use_the_calibrated_cost_model(files, capsys, monkeypatch, spark):
    """The CLI's modeled cost is the figures' (experiments' calibration), not the engine's
    uncalibrated defaults, and says which calibration it used. Its outputs are marked as its
    own: a second run refuses them, and force=true replaces them."""
    from joins.calibrated import cost_model
    from joins.online import CostModel
    from runtime.cost_model import load_calibration

    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda *a, **k: spark)
    out = files / "metrics.parquet"
    rows = files / "OUT.parquet"
    argv = ["operator=static_mid", "joiners=4", f"r={files / 'R.parquet'}",
            f"s={files / 'S.parquet'}", "progress=false", f"metrics={out}", f"out={rows}"]
    assert main(argv) == 0
    joined = pd.read_parquet(rows)
    assert joined[["l_key", "l_a", "r_key", "r_b"]].values.tolist() == [[1, 1, 1, 1]]
    assert (rows / MARKER).is_file()
    assert main(argv) == 2 and "exists" in capsys.readouterr().err
    assert main([*argv, "force=true"]) == 0
    cal = load_calibration()
    cost = cost_model(cal)
    assert cost != CostModel()
    m = pd.read_parquet(out)
    assert (m["calibration"] == cal.id).all()
    assert (m["calibration_id"] == cost.calibration_id).all()
    assert m["modeled_cost"].tolist() == pytest.approx(cost.worker_cost(m).tolist())
    assert m["modeled_cost"].tolist() != pytest.approx(CostModel().worker_cost(m).tolist())
    printed = capsys.readouterr().out
    assert f"calibration {cal.id} " in printed  # one id: the internal one is in metrics=
    assert cost.calibration_id not in printed


@pytest.fixture
def three(tmp_path):
    for name, col in (("A", "a"), ("B", "b"), ("C", "c")):
        pd.DataFrame({"k": [1, 2, 2, None], "x": [5, 5, 6, 7], "t": [0.0, 1.5, 2.0, 3.0],
                      col: [1, 2, 3, 4]}).to_parquet(tmp_path / f"{name}.parquet")
    pd.DataFrame({"k": [1.0], "t": ["late"]}).to_parquet(tmp_path / "Tstr.parquet")
    pd.DataFrame({"k": [1.0, 2.0], "t": [0.0, None]}).to_parquet(tmp_path / "Tnull.parquet")
    return tmp_path


@pytest.mark.usefixtures("no_spark")
@pytest.mark.parametrize(("extra", "message"), [
    (["on=A.k=D.k"], "no input named 'D'"),
    (["on=A.k=B.k"], "do not connect C"),
    (["on=A.k=B.nope,B.k=C.k"], "B has no column 'nope'"),
    (["time=t", "window=-1"], "window must be >= 0"),
    (["window=3"], "need an event-time column"),
    (["time=missing"], "has no column 'missing'"),
    (["time=t", "tick=0"], "tick must be > 0"),
    (["rescale=100:2"], "rescale point 100 is past the end of the stream (12 tuples)"),
    (["rescale=3:0"], "units must be >= 1"),
    (["rescale=3"], "expected AT:UNITS"),
])
def test_bad_nway_input_exits_2(three, capsys, extra, message):
    inputs = ",".join(f"{n}={three / n}.parquet" for n in "ABC")
    args = ["operator=mjoin", "joiners=2", f"inputs={inputs}", "on=k"]
    args = [a for a in args if not (a.startswith("on=") and any(e.startswith("on=")
                                                                  for e in extra))]
    assert main(args + extra) == 2
    assert message in capsys.readouterr().err


@pytest.mark.usefixtures("no_spark")
def test_time_column_must_be_numeric_and_two_input_operators_refuse_three(three, capsys):
    assert main(["operator=static_mid", "joiners=4", f"r={three / 'A.parquet'}",
                 f"s={three / 'Tstr.parquet'}", "on=k", "time=t"]) == 2
    assert "time column 't' of S is string" in capsys.readouterr().err
    inputs = ",".join(f"{n}={three / n}.parquet" for n in "ABC")
    assert main(["operator=shj", "joiners=2", f"inputs={inputs}", "on=k"]) == 2
    err = capsys.readouterr().err  # the n-way operators named, read from their declarations
    assert "shj joins 2 inputs; operator=" in err and "mjoin" in err and "joins 3" in err
    assert main(["operator=join_biclique", "joiners=4", f"r={three / 'A.parquet'}",
                 f"s={three / 'B.parquet'}", "on=k", "rescale=2:5"]) == 2
    assert "a join-biclique rescales to R+S units, e.g. 6+4" in capsys.readouterr().err
    ab = [f"r={three / 'A.parquet'}", f"s={three / 'B.parquet'}", "on=k"]
    assert main(["operator=dynamic", "joiners=4", *ab, "rescale=2:5"]) == 2
    assert "this operator's controller decides its own layout" in capsys.readouterr().err
    assert main(["operator=shj", "joiners=4", *ab, "rescale=2:3+3"]) == 2
    assert "a hash layout rescales to a worker count" in capsys.readouterr().err
    # a program that never moves state (one site) refuses rescale= before Spark starts
    assert main(["operator=diner", "joiners=1", *ab, "rescale=2:2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "never moves state" in err
    # a ContRand join-biclique needs a unit per subgroup on each side
    assert main(["operator=join_biclique", "contrand=2", "joiners=4", *ab,
                 "rescale=2:1+4"]) == 2
    assert "with 2 R subgroups needs at least 2 R units, got 1" in capsys.readouterr().err
    assert main(["operator=static_mid", "joiners=4", *ab, "rescale=-1:5"]) == 2
    assert "rescale point -1 must be >= 0" in capsys.readouterr().err
    assert main(["operator=static_mid", "joiners=4", f"r={three / 'A.parquet'}",
                 f"s={three / 'Tnull.parquet'}", "on=k", "time=t"]) == 2
    assert "time column 't' of S has 1 null or NaN values" in capsys.readouterr().err


@pytest.mark.spark
def test_three_inputs_and_a_biclique_rescale_through_the_cli(three, tmp_path, monkeypatch,
                                                            spark):
    from joins.oracle import assert_same_rows, oracle_graph

    # the shared session: the CLI's own preset would replace it, stopping it under later tests
    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda *a, **k: spark)

    frames = {n: pd.read_parquet(three / f"{n}.parquet") for n in "ABC"}
    inputs = ",".join(f"{n}={three / n}.parquet" for n in "ABC")
    out = tmp_path / "out3"
    assert main(["operator=mjoin", "joiners=2", f"inputs={inputs}", "on=A.k=B.k,B.x=C.x",
                 f"out={out}", "progress=false"]) == 2  # several attributes: one worker
    assert main(["operator=mjoin", "joiners=1", f"inputs={inputs}", "on=A.k=B.k,B.x=C.x",
                 f"out={out}", "time=t", "window=1.5", "progress=false", "batch_size=3"]) == 0
    want = oracle_graph(frames, [("A", "k", "B", "k"), ("B", "x", "C", "x")], window=1.5,
                        time="t")
    got = pd.read_parquet(out)
    assert_same_rows(got, want)
    assert {"A_k", "B_x", "C_c", "phase"} <= set(got.columns)
    out2 = tmp_path / "outb"
    assert main(["operator=join_biclique", "joiners=4", f"r={three / 'A.parquet'}",
                 f"s={three / 'B.parquet'}", "on=k", "rescale=2:3+1,5:1+2", "batch_size=2",
                 f"out={out2}", "progress=false"]) == 0
    assert_same_rows(pd.read_parquet(out2), oracle_join_ab(frames))


def oracle_join_ab(frames):
    from joins.oracle import oracle_join

    return oracle_join(frames["A"], frames["B"], "k")


def test_the_summary_is_readable_without_duplicates(capsys):
    from joins.online.cli import _print_summary

    _print_summary({"operator": "shj", "joiners": 4, "outputs": 91600, "batches": 7,
                    "modeled_time": 0.874, "final_avg_ilf": 3.0, "ilf_final": 3.0,
                    "calibration_id": "internal", "cost_model": {"fixed_per_batch": 0.124},
                    "window": None}, "c7e14bd15b")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "run: operator=shj joiners=4"
    assert "91,600 rows" in out and "9.16e+04" not in out
    assert "modeled_fixed_per_batch" in out and "0.868 modeled s" in out
    assert "ilf_final" not in out and "internal" not in out and "window" not in out
    assert out.count("c7e14bd15b") == 1
