"""The pair counts of joins.online.pair_counts equal a brute-force listing."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.online.pair_counts import (
    pairs_across_groups,
    pairs_not_met,
    pairs_not_produced,
)


@settings(max_examples=200, deadline=None)
@given(na=st.integers(0, 30), nb=st.integers(0, 30), keys=st.integers(1, 5),
       seed=st.integers(0, 10**6))
def test_counts_equal_brute_force(na, nb, keys, seed):
    rng = np.random.default_rng(seed)
    ka, kb = rng.integers(0, keys, na).astype(float), rng.integers(0, keys, nb).astype(float)
    ats_a, ats_b = rng.integers(0, 50, na), rng.integers(0, 50, nb)
    dts_a, dts_b = ats_a + rng.integers(0, 30, na), ats_b + rng.integers(0, 30, nb)
    ga, gb = rng.integers(0, 4, na), rng.integers(0, 4, nb)
    not_met = sum(1 for i in range(na) for j in range(nb) if ka[i] == kb[j] and
                  max(ats_a[i], ats_b[j]) > min(dts_a[i], dts_b[j]))
    across = sum(1 for i in range(na) for j in range(nb) if ka[i] == kb[j] and ga[i] != gb[j])
    assert pairs_not_met(ka, ats_a, dts_a, kb, ats_b, dts_b) == not_met
    assert pairs_across_groups(ka, ga, kb, gb) == across
    band = sum(1 for i in range(na) for j in range(nb) if abs(ka[i] - kb[j]) <= 1.0 and
               ga[i] != gb[j])
    assert pairs_across_groups(ka, ga, kb, gb, width=1.0) == band


@settings(max_examples=200, deadline=None)
@given(na=st.integers(0, 30), nb=st.integers(0, 30), keys=st.integers(1, 5),
       seed=st.integers(0, 10**6))
def test_not_produced_equals_brute_force(na, nb, keys, seed):
    """A pair is produced when the intervals overlap or a's latest pass (``last``, inside its
    memory life) came after b left, or the other way round."""
    rng = np.random.default_rng(seed)
    ka, kb = rng.integers(0, keys, na).astype(float), rng.integers(0, keys, nb).astype(float)
    ats_a, ats_b = rng.integers(0, 50, na), rng.integers(0, 50, nb)
    dts_a, dts_b = ats_a + rng.integers(1, 30, na), ats_b + rng.integers(1, 30, nb)
    last_a = np.where(rng.random(na) < 0.5, -1, ats_a + rng.integers(0, 30, na) % (dts_a - ats_a))
    last_b = np.where(rng.random(nb) < 0.5, -1, ats_b + rng.integers(0, 30, nb) % (dts_b - ats_b))

    def produced(i, j):
        met = max(ats_a[i], ats_b[j]) <= min(dts_a[i], dts_b[j])
        return met or dts_b[j] <= last_a[i] or dts_a[i] <= last_b[j]

    want = sum(1 for i in range(na) for j in range(nb) if ka[i] == kb[j] and not produced(i, j))
    assert pairs_not_produced(ka, ats_a, dts_a, last_a, kb, ats_b, dts_b, last_b) == want
