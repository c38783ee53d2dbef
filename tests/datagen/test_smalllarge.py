import pytest

from datagen import materialize, read_manifest
from datagen.errors import GeneratorError
from joins.oracle import oracle_count

from .helpers import read


def _gen(tmp_path, **kw):
    return materialize("smalllarge", kw, root=tmp_path, progress=False)


def test_keyspace_reading_even_small_keys_inside_large_range(tmp_path):
    f = _gen(tmp_path, large_rows=5000, small_rows=300, key_range=100, size=20)
    assert read_manifest(f)["rows"] == {"L": 5000, "S": 300}
    big, small = read(f, "L"), read(f, "S")
    assert big.key.between(1, 200).all() and big.key.nunique() == 200
    assert (small.key % 2 == 0).all() and small.key.between(2, 200).all()
    assert set(small.payload.str.len()) == {12}
    # 5000 large records over 200 keys: every even key occurs, so every small record matches
    unmatched = oracle_count(big, small, how="right") - oracle_count(big, small, how="inner")
    assert unmatched == 0


def test_unmatched_reading_leaves_exactly_the_fraction_without_match(tmp_path):
    f = _gen(tmp_path, large_rows=5000, small_rows=301, key_range=100, reading="unmatched",
             chunk_rows=64)
    big, small = read(f, "L"), read(f, "S")
    assert (small.key % 2 == 0).all()
    absent = small.key > 200
    assert absent.sum() == round(0.5 * 301)
    assert not small.key[absent].isin(big.key).any()
    unmatched = oracle_count(big, small, how="right") - oracle_count(big, small, how="inner")
    assert unmatched == absent.sum()


def test_bad_reading_names_choices(tmp_path):
    with pytest.raises(GeneratorError, match="keyspace, unmatched"):
        _gen(tmp_path, reading="half")
