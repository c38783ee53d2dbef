"""Per-row seeded randomness (datagen.bijection): a bijection any slice can compute alone."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from datagen.bijection import permute, uniform


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 17, 64, 65, 1000, 4097])
def test_permute_is_a_bijection_of_0_to_n(n):
    out = permute(np.arange(n), n, key=11)
    assert np.array_equal(np.sort(out), np.arange(n))


def test_permute_slices_agree_keys_differ_and_bad_rows_are_refused():
    n = 100_003
    whole = permute(np.arange(n), n, key=7)
    assert np.array_equal(permute(np.arange(500, 900), n, key=7), whole[500:900])
    assert np.mean(permute(np.arange(n), n, key=8) == whole) < 0.001
    with pytest.raises(ValueError, match="outside"):
        permute(np.array([n]), n, key=7)


def test_permute_scatters_a_block_evenly():
    """Rows landing in one block of positions (one hot key's rows) are spread over the table:
    their row indices are uniform (Kolmogorov-Smirnov at a fixed seed; fails on e.g. the
    identity or a rotation)."""
    n = 200_000
    pos = permute(np.arange(n), n, key=3)
    rows = np.flatnonzero(pos < 5_000)
    assert len(rows) == 5_000
    assert stats.kstest(rows / n, "uniform").pvalue > 0.001
    assert abs(np.corrcoef(np.arange(n), pos)[0, 1]) < 0.01


def test_uniform_is_uniform_and_per_row():
    u = uniform(np.arange(100_000), key=5)
    assert u.min() >= 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 0.001
    assert np.array_equal(uniform(np.arange(10, 20), key=5), u[10:20])
