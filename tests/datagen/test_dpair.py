import numpy as np
import pyarrow.parquet as pq
import pytest

from datagen import materialize, read_manifest
from datagen.chunks import named_rng
from datagen.errors import GeneratorError

from .helpers import part_bytes, read


def _gen(tmp_path, **kw):
    return materialize("dpair", kw, root=tmp_path, progress=False)


def test_tables_schema_sizes_and_exact_counts(tmp_path):
    f = _gen(tmp_path, alpha=0.9, size=40, keys=50, rows=3000, uniform_rows=700,
             uniform_range=10**15, chunk_rows=1000)
    m = read_manifest(f)
    assert m["rows"] == {"R": 3700, "S": 3700}
    assert m["tables"]["R"]["parts"] == 4
    schema = pq.read_schema(next((f / "R.parquet").glob("part-*.parquet")))
    assert str(schema.field("key").type) == "int64" and not schema.field("key").nullable
    for t in ("R", "S"):
        df = read(f, t)
        assert len(df) == 3700
        assert set(df.payload.str.len()) == {40 - 8}
        # uniform keys come from [1, 1e15]: (almost surely) none fall in the Zipf domain 1..50
        assert (df.key > 50).sum() == 700
        assert df.key.min() >= 1


def test_rank_one_is_hot_on_both_sides_with_independent_draws(tmp_path):
    f = _gen(tmp_path, alpha=1.0, keys=100, rows=5000, uniform_rows=0)
    r, s = read(f, "R"), read(f, "S")
    assert r.key.value_counts().idxmax() == 1 and s.key.value_counts().idxmax() == 1
    assert not np.array_equal(r.key.to_numpy(), s.key.to_numpy())


def test_permute_keys_moves_the_hot_key_consistently(tmp_path):
    f = _gen(tmp_path, alpha=1.2, keys=100, rows=4000, uniform_rows=0, permute_keys=True, seed=3)
    perm = named_rng(3, "dpair", "key_permutation").permutation(100) + 1
    r, s = read(f, "R"), read(f, "S")
    assert r.key.value_counts().idxmax() == perm[0] == s.key.value_counts().idxmax()
    assert perm[0] != 1 and r.key.between(1, 100).all()


def test_uniform_and_zipf_records_are_spread_over_chunks(tmp_path):
    f = _gen(tmp_path, alpha=0.5, keys=10, rows=1000, uniform_rows=3000, uniform_range=10**15,
             chunk_rows=400)
    for part in sorted((f / "R.parquet").glob("part-*.parquet")):
        keys = pq.read_table(part)["key"].to_numpy()
        assert (keys <= 10).sum() == len(keys) // 4  # the exact share of every chunk


def test_same_config_same_bytes_other_seed_other_bytes(tmp_path):
    kw = dict(alpha=0.7, keys=30, rows=900, uniform_rows=100, chunk_rows=256)
    a = part_bytes(materialize("dpair", kw, root=tmp_path / "a", progress=False))
    b = part_bytes(materialize("dpair", kw, root=tmp_path / "b", progress=False))
    c = part_bytes(materialize("dpair", {**kw, "seed": 1}, root=tmp_path / "c", progress=False))
    assert a == b and len(a) == 8
    assert a != c


def test_empty_relation_still_has_a_typed_part(tmp_path):
    f = _gen(tmp_path, rows=0, uniform_rows=0)
    assert read_manifest(f)["rows"] == {"R": 0, "S": 0}
    assert len(read(f, "R")) == 0 and list(read(f, "R").columns) == ["key", "payload"]


@pytest.mark.parametrize("bad", [{"alpha": -0.5}, {"keys": 0}, {"size": 8}, {"seed": -1},
                                 {"payload": "zeros"}, {"rows": 1.5}, {"nokey": 1}])
def test_bad_parameters_raise_before_writing(tmp_path, bad):
    with pytest.raises(GeneratorError):
        _gen(tmp_path, **bad)
    assert not any(tmp_path.iterdir())
