"""Bad CLI input fails with a clear message and exit code 2 before Spark starts; a good run
models its cost with the machine's calibration."""

from __future__ import annotations

import pandas as pd
import pytest

import runtime.spark_session
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
    (["operator=dynamic", "joiners=4", "epsilon=0.5"], "unknown parameters"),
    (["operator=dynamic", "joiners=4", "notkeyvalue"], "expected key=value"),
    # numeric options that are not numbers
    (["operator=dynamic", "joiners=4", "k=abc"], "k must be float, got 'abc'"),
    (["operator=dynamic", "joiners=4", "seed=x"], "seed must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "batch_size=x"], "batch_size must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "budget=x"], "budget must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "partitions=x"], "partitions must be int, got 'x'"),
    (["operator=dynamic", "joiners=4", "partitions=0"], "partitions must be >= 1"),
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
])
def test_bad_input_exits_2(files, capsys, args, message):
    base = [f"r={files / 'R.parquet'}", f"s={files / 'S.parquet'}"]
    assert main(base + args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.usefixtures("no_spark")
@pytest.mark.parametrize(("r", "s", "extra", "message"), [
    ("R", "Sstr", [], "key column types differ: r: int64, s: string"),
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
    uncalibrated defaults, and says which calibration it used."""
    from joins.calibrated import cost_model
    from joins.online import CostModel
    from runtime.cost_model import load_calibration

    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda *a, **k: spark)
    out = files / "metrics.parquet"
    assert main(["operator=static_mid", "joiners=4", f"r={files / 'R.parquet'}",
                 f"s={files / 'S.parquet'}", "progress=false", f"metrics={out}"]) == 0
    cal = load_calibration()
    cost = cost_model(cal)
    assert cost != CostModel()
    m = pd.read_parquet(out)
    assert (m["calibration"] == cal.id).all()
    assert (m["calibration_id"] == cost.calibration_id).all()
    assert m["modeled_cost"].tolist() == pytest.approx(cost.worker_cost(m).tolist())
    assert m["modeled_cost"].tolist() != pytest.approx(CostModel().worker_cost(m).tolist())
    printed = capsys.readouterr().out
    assert f"calibration: {cal.id}" in printed
    assert f"calibration_id: {cost.calibration_id}" in printed
