"""The local join kernel's predicate is pluggable: a predicate the engine does not ship (an
inequality) runs through the same worker steps, migrations and budgets and stays exact."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.online import run_stream
from joins.online.kernel import Band, Equi, SideStore, as_predicate
from joins.oracle import assert_same_rows
from tests.examples import examples


@dataclass(frozen=True)
class Less:
    """r.key < s.key: not symmetric, so the range depends on the probing side."""

    name: str = "less"

    def ranges(self, stored, probe, probes_are_r):
        if probes_are_r:  # stored S keys above the R key
            return np.searchsorted(stored, probe, "right"), np.full(len(probe), len(stored))
        return np.zeros(len(probe), np.int64), np.searchsorted(stored, probe, "left")


def _frame(keys: list, col: str) -> pd.DataFrame:
    return pd.DataFrame({"key": pd.array(keys, dtype="Int64"), col: np.arange(len(keys))})


def _oracle_less(rf: pd.DataFrame, sf: pd.DataFrame) -> pd.DataFrame:
    con = duckdb.connect()
    con.register("r", rf)
    con.register("s", sf)
    return con.sql("SELECT r.key AS l_key, r.a AS l_a, s.key AS r_key, s.b AS r_b "
                   "FROM r JOIN s ON r.key < s.key").df()


def test_shorthands_and_ranges_of_the_shipped_predicates():
    assert as_predicate(None) == Equi() and as_predicate(2) == Band(2.0)
    store = SideStore(np.array([5.0, 1.0, 3.0, 3.0, np.nan]), np.arange(5), np.arange(5),
                      np.zeros(5, np.uint32))
    lo, hi = store.ranges(np.array([3.0, 4.0, np.nan]), None)
    assert list(hi - lo) == [2, 0, 0]  # a null probe key matches nothing
    lo, hi = store.ranges(np.array([3.0, 4.0]), 1.0)
    assert list(hi - lo) == [2, 3]
    lo, hi = store.ranges(np.array([3.0]), Less(), probes_are_r=True)
    assert list(hi - lo) == [1]  # stored 5 > 3
    lo, hi = store.ranges(np.array([3.0]), Less(), probes_are_r=False)
    assert list(hi - lo) == [1]  # stored 1 < 3


key_lists = st.lists(st.one_of(st.integers(0, 6), st.none()), max_size=40)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(r=key_lists, s=key_lists, op=st.sampled_from(["dynamic", "static_mid", "biclique"]),
       batch=st.integers(3, 30), joiners=st.sampled_from([2, 4, 16]),
       budget=st.sampled_from([None, 3]), seed=st.integers(0, 3))
def test_an_inequality_predicate_plugs_in_and_stays_exact(r, s, op, batch, joiners, budget, seed):
    from joins.online import operators

    factory = operators.join_biclique if op == "biclique" else op
    params = dict(eps=0.25, warmup=2) if op == "dynamic" else {}
    rf, sf = _frame(r, "a"), _frame(s, "b")
    res = run_stream(None, rf, sf, operator=factory, joiners=joiners, predicate=Less(),
                     order="fluct", k=2, seed=seed, batch_size=batch, collect_output=True,
                     progress=False, backend="local", memory_budget_tuples=budget, **params)
    assert_same_rows(res.output, _oracle_less(rf, sf))


def test_an_unequal_predicate_is_refused_with_hash_routing():
    rf, sf = _frame([1, 2], "a"), _frame([2, 3], "b")
    with pytest.raises(ValueError, match="content-insensitive"):
        run_stream(None, rf, sf, operator="shj", joiners=2, predicate=Less(), progress=False,
                   backend="local")


def test_an_order_predicate_on_string_keys_follows_the_strings_order():
    """String keys become codes; the codes must keep the strings' order (here 'b' comes
    first but is not below 'a'), or r < s would be decided on arrival order."""
    rf = pd.DataFrame({"key": ["b", "a", None, "c"], "a": range(4)})
    sf = pd.DataFrame({"key": ["a", "c", "b"], "b": range(3)})
    res = run_stream(None, rf, sf, operator="static_mid", joiners=4, predicate=Less(),
                     collect_output=True, progress=False, backend="local")
    assert_same_rows(res.output, _oracle_less(rf, sf))
    assert len(res.output) == 3  # a<b, a<c, b<c


def test_band_and_predicate_together_are_refused_before_reading_input():
    with pytest.raises(ValueError, match="not both"):
        run_stream(None, "/no/such/input", "/no/such/input", operator="static_mid", joiners=2,
                   band=1, predicate=Less(), backend="local")
