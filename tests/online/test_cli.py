"""Bad CLI input fails with a clear message and exit code 2 before Spark starts."""

from __future__ import annotations

import pandas as pd
import pytest

from joins.online.cli import main


@pytest.fixture
def files(tmp_path):
    pd.DataFrame({"key": [1, 2], "a": [1, 2]}).to_parquet(tmp_path / "R.parquet")
    pd.DataFrame({"key": [1, 3], "b": [1, 2]}).to_parquet(tmp_path / "S.parquet")
    return tmp_path


@pytest.mark.parametrize(("args", "message"), [
    (["operator=nope", "joiners=4"], "unknown operator"),
    (["operator=dynamic", "joiners=0"], "joiners must be >= 1"),
    (["operator=dynamic", "joiners=x"], "joiners must be an integer"),
    (["operator=dynamic", "joiners=4", "on=missing"], "no column 'missing'"),
    (["operator=dynamic", "joiners=4", "order=zigzag"], "unknown order"),
    (["operator=shj", "joiners=4", "band=1"], "equi-join operator"),
    (["operator=dynamic", "joiners=4", "controller=psychic"], "controller must be"),
    (["operator=dynamic", "joiners=4", "epsilon=0.5"], "unknown parameters"),
    (["operator=dynamic", "joiners=4", "notkeyvalue"], "expected key=value"),
])
def test_bad_input_exits_2(files, capsys, args, message):
    base = [f"r={files / 'R.parquet'}", f"s={files / 'S.parquet'}"]
    assert main(base + args) == 2
    assert message in capsys.readouterr().err


def test_missing_file_exits_2(files, capsys):
    assert main(["operator=dynamic", "joiners=4", f"r={files / 'nope.parquet'}",
                 f"s={files / 'S.parquet'}"]) == 2
    assert "no such file" in capsys.readouterr().err
