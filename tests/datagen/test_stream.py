import sys

import numpy as np
import pandas as pd
import pytest

import datagen.dpair
from datagen import materialize, orders, read_manifest
from datagen.cli import main
from datagen.errors import GeneratorError

from .helpers import read

SOURCE = {"alpha": 0.8, "keys": 20, "rows": 400, "uniform_rows": 50, "size": 16}


def _stream(tmp_path, **kw):
    return materialize("stream", kw, root=tmp_path, progress=False)


def _check_stream(folder, source_r: pd.DataFrame, source_s: pd.DataFrame):
    r, s = read(folder, "R"), read(folder, "S")
    seq = np.sort(np.concatenate([r.seq, s.seq]))
    np.testing.assert_array_equal(seq, np.arange(len(r) + len(s)))  # each index exactly once
    assert r.seq.is_monotonic_increasing and s.seq.is_monotonic_increasing
    for got, src in ((r, source_r), (s, source_s)):
        cols = list(src.columns)
        a = got[cols].sort_values(cols).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, src.sort_values(cols).reset_index(drop=True))
    return r, s


def test_fluct_stream_from_generator_spec(tmp_path):
    f = _stream(tmp_path, source="dpair", source_params=SOURCE, order="fluct", k=3,
                chunk_rows=128)
    src = materialize("dpair", SOURCE, root=tmp_path / "src", progress=False)
    r, s = _check_stream(f, read(src, "R"), read(src, "S"))
    is_r = np.zeros(len(r) + len(s), dtype=bool)
    is_r[r.seq] = True
    np.testing.assert_array_equal(is_r, orders.arrival("fluct", 450, 450, seed=0, k=3))
    # without a within-relation reorder, R keeps its source file order
    np.testing.assert_array_equal(r.key, read(src, "R").key)
    m = read_manifest(f)
    assert m["params"]["order"] == "fluct" and m["params"]["order_params"]["k"] == 3.0
    assert m["params"]["source_params"]["alpha"] == 0.8
    assert not (f / ".source").exists()


def test_rate_stream_from_paths_has_event_times(tmp_path):
    src = materialize("smalllarge", {"large_rows": 500, "small_rows": 80}, root=tmp_path,
                      progress=False)
    f = _stream(tmp_path, r=str(src / "L.parquet"), s=str(src / "S.parquet"), order="rate",
                times=[0, 1], rate_r=[400, 100], rate_s=[50, 50], seed=2)
    r, s = _check_stream(f, read(src, "L"), read(src, "S"))
    both = pd.concat([r, s]).sort_values("seq")
    assert both.event_time.is_monotonic_increasing
    assert r.event_time.iloc[-1] == pytest.approx(1 + (499 - 400) / 100)  # tuple i at Lambda^-1(i)


def test_random_stream_is_seeded(tmp_path):
    a = read(_stream(tmp_path, source="dpair", source_params=SOURCE, seed=1), "R").seq
    b = read(_stream(tmp_path / "b", source="dpair", source_params=SOURCE, seed=1), "R").seq
    c = read(_stream(tmp_path, source="dpair", source_params=SOURCE, seed=2), "R").seq
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


BY_KEY = '''"""A test-only order that needs the keys: each relation in key order, R first."""
import numpy as np

from datagen.orders import Arrival

NAME = "by_key"


def by_key(n_r, n_s, rng, *, keys_r, keys_s, first: str = "R"):
    if first != "R":
        raise ValueError("only R first")
    return Arrival(np.r_[np.ones(n_r, bool), np.zeros(n_s, bool)],
                   perm_r=np.argsort(keys_r, kind="stable"),
                   perm_s=np.argsort(keys_s, kind="stable"))


ORDER = by_key
'''


@pytest.fixture
def dropped_in_order(tmp_path, monkeypatch):
    """``by_key.py`` written into a folder on the orders package's path, as a user would add it
    to datagen/orders/ (nothing else is registered anywhere)."""
    extra = tmp_path / "more_orders"
    extra.mkdir()
    (extra / "by_key.py").write_text(BY_KEY)
    monkeypatch.setattr(orders, "__path__", [*orders.__path__, str(extra)])
    yield
    sys.modules.pop("datagen.orders.by_key", None)


def test_a_new_order_is_one_module_dropped_into_the_package(tmp_path, capsys, dropped_in_order):
    assert main(["list"]) == 0
    assert "stream orders: by_key, fluct, intervals, random, rate" in capsys.readouterr().out
    with pytest.raises(ValueError, match="only R first"):  # checked up front, like any order
        orders.resolve("by_key", {"first": "S"})
    f = _stream(tmp_path, source="dpair", source_params=SOURCE, order="by_key", chunk_rows=100)
    assert read_manifest(f)["params"]["order_params"] == {"first": "R"}
    src = materialize("dpair", SOURCE, root=tmp_path / "src", progress=False)
    r, s = _check_stream(f, read(src, "R"), read(src, "S"))
    assert r.key.is_monotonic_increasing and s.key.is_monotonic_increasing
    assert r.seq.tolist() == list(range(450))


def test_an_order_module_without_its_names_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "helper.py").write_text("X = 1\n")
    monkeypatch.setattr(orders, "__path__", [*orders.__path__, str(tmp_path)])
    try:
        with pytest.raises(GeneratorError, match="datagen.orders.helper must define NAME"):
            orders.names()
    finally:
        sys.modules.pop("datagen.orders.helper", None)


@pytest.mark.parametrize("bad,needle", [
    (("order=fluct", "k=0.5"), "fluctuation factor k must be > 1, got 0.5"),
    (("order=fluct", "first=X"), "first must be R or S, got 'X'"),
    (("order=random", "p_r=2"), "p_r must be in [0, 1], got 2.0"),
])
def test_bad_order_parameters_fail_before_any_input_is_generated(tmp_path, capsys, monkeypatch,
                                                                 bad, needle):
    calls = []
    monkeypatch.setattr(datagen.dpair, "generate", lambda *a: calls.append(a) or {})
    assert main(["stream", "source=dpair", *bad, f"root={tmp_path}", "progress=false"]) == 2
    assert capsys.readouterr().err == f"datagen: error: {needle}\n"
    assert calls == [] and list(tmp_path.iterdir()) == []  # the source was never generated
    with pytest.raises(GeneratorError, match="k must be > 1"):
        materialize("stream", {"source": "dpair", "order": "fluct", "k": 0.5}, root=tmp_path)
    assert calls == []


def test_stream_input_errors(tmp_path):
    with pytest.raises(GeneratorError, match="either r=PATH"):
        _stream(tmp_path, order="random")
    with pytest.raises(GeneratorError, match="does not exist"):
        _stream(tmp_path, r=str(tmp_path / "x"), s=str(tmp_path / "y"))
    with pytest.raises(GeneratorError, match="valid: .*k"):
        _stream(tmp_path, source="dpair", order="fluct", kk=2)
    f = _stream(tmp_path, source="dpair", source_params=SOURCE)
    with pytest.raises(GeneratorError, match="already has column"):
        _stream(tmp_path, r=str(f / "R.parquet"), s=str(f / "S.parquet"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f.name]  # nothing half-written
