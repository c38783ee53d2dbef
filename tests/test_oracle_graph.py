"""oracle_graph against a brute-force nested loop: any join graph, band, window (no Spark).

Each input is drawn as ``(columns, rows)`` of Python values (None = SQL NULL); the reference
loops over the cross product in pure Python, so it shares nothing with DuckDB. Comparisons
are on multisets (:func:`joins.oracle.assert_same_rows`): a lost row and a duplicate do not
cancel.
"""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.oracle import (
    assert_same_rows,
    multiset_diff,
    oracle_graph,
    oracle_graph_count,
    oracle_join,
)
from tests.examples import examples
from tests.strategies import frames, keyed_rows

Spec = dict[str, tuple[list[str], list[tuple]]]

# ---------------------------------------------------------------- reference and helpers


def brute_force(spec: Spec, edges, band=None, window=None, time=None, prefixes=None):
    """The join by definition: every combination of one row per input, kept if it qualifies."""
    names = list(spec)
    prefixes = prefixes or {}

    def close(x, y, width):
        return x is not None and y is not None and abs(x - y) <= width

    out = []
    for combo in itertools.product(*(spec[n][1] for n in names)):
        value = {n: dict(zip(spec[n][0], row, strict=True)) for n, row in zip(names, combo,
                                                                              strict=True)}
        if band is None:
            ok = all(value[a][ca] is not None and value[a][ca] == value[b][cb]
                     for a, ca, b, cb in edges)
        else:
            ok = all(close(value[a][ca], value[b][cb], band) for a, ca, b, cb in edges)
        if ok and window is not None:
            ok = all(close(value[a][time], value[b][time], window)
                     for a, b in itertools.combinations(names, 2))
        if ok:
            out.append(tuple(v for row in combo for v in row))
    columns = [prefixes.get(n, f"{n}_") + c for n in names for c in spec[n][0]]
    return pd.DataFrame(out, columns=columns, dtype=object)


def to_frames(spec: Spec, dtype: str | dict = "Int64") -> dict[str, pd.DataFrame]:
    """Pandas frames of the drawn rows: payload ``p`` int64, every other column ``dtype``
    (one dtype, or one per input name)."""
    def column(name, i, col):
        typ = "int64" if col == "p" else dtype[name] if isinstance(dtype, dict) else dtype
        return pd.array([row[i] for row in spec[name][1]], dtype=typ)
    return {n: pd.DataFrame({c: column(n, i, c) for i, c in enumerate(cols)})
            for n, (cols, _) in spec.items()}


def check(spec: Spec, edges, dtype="Int64", count=True, **kw) -> pd.DataFrame:
    """oracle_graph (and oracle_graph_count) agree with the brute force; returns the result.

    Each call opens a DuckDB connection (~50 ms), so some property tests skip the count."""
    inputs = to_frames(spec, dtype)
    got = oracle_graph(inputs, edges, **kw)
    want = brute_force(spec, edges, **kw)
    assert list(got.columns) == list(want.columns)
    assert_same_rows(got, want)
    if count:
        assert oracle_graph_count(inputs, edges, **kw) == len(want)
    return got


# ---------------------------------------------------------------- strategies

HOT, SPREAD, DISTINCT = "hot", "spread", "distinct"
KEYS = {HOT: st.sampled_from([1, 1, 1, 1, 1, 2, 3, None]),  # one key holds most rows
        SPREAD: st.one_of(st.none(), st.integers(1, 5)),
        DISTINCT: st.one_of(st.none(), st.integers(1, 12))}


def rows(n_keys: int, skew: str = SPREAD, max_size: int = 7) -> st.SearchStrategy:
    """Rows ``(key_1, ..., key_n, payload)``; DISTINCT: no first-key value twice (no hot key)."""
    row = st.tuples(*[KEYS[skew]] * n_keys, st.integers(0, 2))  # tiny payloads: duplicate rows
    if skew == DISTINCT:
        return st.lists(row, max_size=max_size, unique_by=lambda r: r[0])
    return st.lists(row, max_size=max_size)


# Which inputs have a hot key: all, some, one, none (DISTINCT), none hot but collisions (SPREAD).
SKEWS = st.sampled_from([(HOT, HOT, HOT), (HOT, HOT, SPREAD), (SPREAD, HOT, DISTINCT),
                         (DISTINCT,) * 3, (SPREAD,) * 3])
BANDS = st.sampled_from([None, 0, 1, 1.5])


def property_test(n: int):
    """n examples (times PROPERTY_EXAMPLES_SCALE): DuckDB's connection cost bounds the count."""
    return settings(max_examples=examples(n), deadline=None)

# ---------------------------------------------------------------- shapes


@property_test(15)
@given(data=st.data(), n=st.sampled_from([2, 3]), skews=SKEWS, star=st.booleans(), band=BANDS)
def test_shared_attribute(data, n, skews, star, band):
    """All inputs on one attribute, as a path A-B-C or a star around A (the same join)."""
    names = "ABC"[:n]
    spec = {x: (["k", "p"], data.draw(rows(1, skews[i]), label=x)) for i, x in enumerate(names)}
    if star:
        edges = [("A", "k", b, "k") for b in names[1:]]
    else:
        edges = [(a, "k", b, "k") for a, b in itertools.pairwise(names)]
    check(spec, edges, band=band)


@property_test(12)
@given(data=st.data(), skews=SKEWS, band=BANDS)
def test_chain_on_different_attributes(data, skews, band):
    """R1(a) - R2(a, b) - R3(b)."""
    spec = {"R1": (["a", "p"], data.draw(rows(1, skews[0]), label="R1")),
            "R2": (["a", "b", "p"], data.draw(rows(2, skews[1]), label="R2")),
            "R3": (["b", "p"], data.draw(rows(1, skews[2]), label="R3"))}
    check(spec, [("R1", "a", "R2", "a"), ("R2", "b", "R3", "b")], count=False, band=band)


@property_test(12)
@given(data=st.data(), skews=SKEWS, band=BANDS)
def test_star_fact_and_dimensions(data, skews, band):
    """A fact F(x, y) with dimensions D1(x) and D2(y); one edge written dimension-first."""
    spec = {"F": (["x", "y", "p"], data.draw(rows(2, skews[0]), label="F")),
            "D1": (["x", "p"], data.draw(rows(1, skews[1], max_size=5), label="D1")),
            "D2": (["y", "p"], data.draw(rows(1, skews[2], max_size=5), label="D2"))}
    check(spec, [("F", "x", "D1", "x"), ("D2", "y", "F", "y")], count=False, band=band)


@property_test(6)
@given(r=rows(2), s=rows(2), t=rows(2), band=BANDS)
def test_triangle_cycle_and_two_edges_between_a_pair(r, s, t, band):
    """A cyclic graph R(a,b) S(b,c) T(c,a), and a composite key as two edges R-S."""
    spec = {"R": (["a", "b", "p"], r), "S": (["b", "c", "p"], s), "T": (["c", "a", "p"], t)}
    check(spec, [("R", "b", "S", "b"), ("S", "c", "T", "c"), ("T", "a", "R", "a")], count=False,
          band=band)
    two = {"R": spec["R"], "S": (["a", "b", "p"], s)}
    check(two, [("R", "a", "S", "a"), ("R", "b", "S", "b")], count=False, band=band)


# ---------------------------------------------------------------- band and window

TIMES = st.one_of(st.none(), st.integers(0, 6))


@property_test(12)
@given(data=st.data(), n=st.sampled_from([2, 3]), band=BANDS,
       window=st.sampled_from([0, 1, 2.5]), float_time=st.booleans())
def test_window_with_and_without_band(data, n, band, window, float_time):
    """Kept only if max(times) - min(times) <= window; a null time never qualifies."""
    names = "ABC"[:n]
    row = st.tuples(KEYS[SPREAD], TIMES.map(lambda t: t / 2 if float_time and t else t),
                    st.integers(0, 1))
    spec = {x: (["k", "ts", "p"], data.draw(st.lists(row, max_size=7), label=x)) for x in names}
    dtype = {x: "Int64" for x in names}
    if float_time:
        dtype = {x: "Float64" for x in names}  # Float64 for the key too: the DOUBLE band path
    edges = [(a, "k", b, "k") for a, b in itertools.pairwise(names)]
    check(spec, edges, dtype=dtype, band=band, window=window, time="ts")


def test_window_spans_all_inputs_not_just_the_edges():
    """Times 0, 1, 2 are pairwise-adjacent within 1 along the chain, but span 2 > 1."""
    spec = {x: (["k", "ts", "p"], [(1, t, 0), (1, None, 1)]) for x, t in zip("ABC", (0, 1, 2),
                                                                             strict=True)}
    edges = [("A", "k", "B", "k"), ("B", "k", "C", "k")]
    assert check(spec, edges, window=1, time="ts").empty
    assert len(check(spec, edges, window=2, time="ts")) == 1
    two = {x: spec[x] for x in "AB"}
    assert len(check(two, edges[:1], window=1, time="ts")) == 1


@property_test(8)
@given(base=st.floats(-1e15, 1e15, allow_nan=False), band=st.sampled_from([0, 0.5, 1.0, 1e-3]),
       r=st.lists(st.tuples(st.sampled_from([None, 0, 0.5, 1.0, 1.5, 1e-3, -0.5, -1.0]),
                            st.integers(0, 1)), max_size=6),
       s=st.lists(st.tuples(st.sampled_from([None, 0, 0.25, 1.0, -1.0, 2e-3]),
                            st.integers(0, 1)), max_size=6))
def test_band_on_floats_is_exact_at_every_magnitude(base, band, r, s):
    """DOUBLE keys near ``base`` (rounding at large magnitudes), then an integer-float edge."""
    def shift(rows):
        return [(None if k is None else base + k, p) for k, p in rows]
    spec = {"R": (["k", "p"], shift(r)), "S": (["k", "p"], shift(s))}
    check(spec, [("R", "k", "S", "k")], dtype="Float64", count=False, band=band)
    ints = {"R": (["k", "p"], [(None if k is None else round(base) + round(k), p) for k, p in r]),
            "S": (["k", "p"], [(None if k is None else round(base) + 3 * k, p) for k, p in s])}
    check(ints, [("R", "k", "S", "k")], dtype={"R": "Int64", "S": "Float64"}, count=False,
          band=band)


def test_band_on_64_bit_extremes_does_not_overflow():
    """Integer bands are tested in HUGEINT: no overflow at the ends of (U)BIGINT."""
    lo, hi = -(2**63), 2**63 - 1
    spec = {"R": (["k", "p"], [(lo, 0), (hi, 1), (0, 2), (None, 3)]),
            "S": (["k", "p"], [(lo + 1, 0), (hi, 1), (hi - 2, 2), (1, 3), (lo, 4)])}
    for band in (0, 1, 2.5, 2**64, 1e300):
        check(spec, [("R", "k", "S", "k")], band=band)
    unsigned = {"R": (["k", "p"], [(0, 0), (2**64 - 1, 1)]),
                "S": (["k", "p"], [(1, 0), (2**64 - 2, 1)])}
    check(unsigned, [("R", "k", "S", "k")], dtype="UInt64", band=1)


# ---------------------------------------------------------------- skew, nulls, empties

HOT_CASES = {  # key 7 hot in: every input / one input / none
    "all": ([7] * 4 + [1], [7] * 3 + [2], [7] * 5),
    "one": ([7] * 6 + [1, 2], [7, 1, 3], [2, 7, 4]),
    "none": ([1, 2, 3, 7], [2, 3, 4, 7], [3, 4, 7, 8]),
}


@pytest.mark.parametrize("hot", list(HOT_CASES))
@pytest.mark.parametrize("band", [None, 1])
def test_hot_key_in_every_input_one_or_none(hot, band):
    spec = {x: (["k", "p"], [(k, i % 2) for i, k in enumerate(keys)] + [(None, 0)])
            for x, keys in zip("ABC", HOT_CASES[hot], strict=True)}
    got = check(spec, [("A", "k", "B", "k"), ("B", "k", "C", "k")], band=band)
    if hot == "all" and band is None:
        assert len(got) == 4 * 3 * 5


def test_null_keys_never_match_and_duplicates_multiply():
    spec = {"A": (["k", "p"], [(None, 0), (None, 0), (1, 0), (1, 0)]),
            "B": (["k", "p"], [(None, 0), (1, 5), (1, 5), (1, 5)])}
    got = check(spec, [("A", "k", "B", "k")])
    assert len(got) == 6  # 2 x 3 identical rows, no null pairs


def test_empty_inputs():
    spec = {"A": (["k", "p"], [(1, 0)]), "B": (["k", "p"], []), "C": (["k", "p"], [(1, 1)])}
    got = check(spec, [("A", "k", "B", "k"), ("B", "k", "C", "k")], band=1)
    assert got.empty and list(got.columns) == ["A_k", "A_p", "B_k", "B_p", "C_k", "C_p"]
    untyped = {"A": pd.DataFrame({"k": [1]}), "B": pd.DataFrame({"k": []})}
    assert oracle_graph_count(untyped, [("A", "k", "B", "k")], window=1, time="k") == 0


def test_a_lost_row_and_a_duplicate_do_not_cancel():
    spec = {"A": (["k", "p"], [(1, 0), (1, 1)]), "B": (["k", "p"], [(1, 0)])}
    got = check(spec, [("A", "k", "B", "k")])
    tampered = pd.concat([got.iloc[[0]], got.iloc[[0]]])
    missing, extra = multiset_diff(tampered, got)
    assert sum(missing.values()) == 1 and sum(extra.values()) == 1
    with pytest.raises(AssertionError, match="1 rows missing"):
        assert_same_rows(tampered, got)


# ---------------------------------------------------------------- two inputs = oracle_join


@property_test(10)
@given(left=keyed_rows(), right=keyed_rows(), band=BANDS)
def test_two_inputs_equal_oracle_join(left, right, band):
    """Two inputs with the l_/r_ prefixes are the existing oracle_join, also for a band."""
    r, s = frames(left, right)
    got = oracle_graph({"R": r, "S": s}, [("R", "key", "S", "key")], band=band,
                       prefixes={"R": "l_", "S": "r_"})
    want = oracle_join(r, s, "key", band=band)
    assert list(got.columns) == list(want.columns) == ["l_key", "l_a", "r_key", "r_b"]
    assert_same_rows(got, want)


def test_parquet_file_and_folder_inputs(tmp_path):
    """A file, a folder with a sub-folder (read recursively) and a quote in a path."""
    spec = {"A": (["k", "p"], [(1, 0), (1, 0), (2, 1), (None, 2)]),
            "B": (["k", "p"], [(1, 3), (2, 4), (2, 4)]),
            "C": (["k", "p"], [(1, 5), (2, 6)])}
    a, b, c = to_frames(spec).values()
    folder = tmp_path / "it's B"
    (folder / "sub").mkdir(parents=True)
    b.iloc[:1].to_parquet(folder / "b0.parquet")
    b.iloc[1:].to_parquet(folder / "sub" / "b1.parquet")
    a.to_parquet(tmp_path / "a.parquet")
    edges = [("A", "k", "B", "k"), ("A", "k", "C", "k")]
    inputs = {"A": str(tmp_path / "a.parquet"), "B": folder, "C": c}
    assert_same_rows(oracle_graph(inputs, edges), brute_force(spec, edges))
    assert oracle_graph_count(inputs, edges, band=1) == len(brute_force(spec, edges, band=1))


def test_quoted_identifiers_and_prefixes():
    """Spaces, a double quote, upper case, an SQL keyword and the internal alias as names."""
    spec = {"Left side": (["My Key", 'odd"name', "p"], [(1, 2, 0), (2, 2, 1), (None, 2, 2)]),
            "select": (["KEY", "p"], [(1, 0), (2, 1), (2, 1)]),
            "t0": (["Time", "p"], [(1, 0), (3, 0)])}
    edges = [("Left side", "My Key", "select", "KEY"), ("t0", "Time", "Left side", "My Key")]
    got = check(spec, edges, prefixes={"select": "S."})
    assert list(got.columns) == ["Left side_My Key", 'Left side_odd"name', "Left side_p",
                                 "S.KEY", "S.p", "t0_Time", "t0_p"]
    assert len(got) == 1
    check(spec, edges, band=1, prefixes={"t0": ""})


# ---------------------------------------------------------------- errors

AB = {"A": pd.DataFrame({"k": [1], "t": [0]}), "B": pd.DataFrame({"k": [1], "t": [0]})}
ABC = {**AB, "C": pd.DataFrame({"k": [1], "s": ["x"]})}
E = [("A", "k", "B", "k")]


@pytest.mark.parametrize(("inputs", "edges", "kw", "match"), [
    ({"A": AB["A"]}, [], {}, "at least 2"),
    (AB, [("A", "k", "X", "k"), ("Y", "k", "B", "k")], {}, r"unknown inputs \['X', 'Y'\]"),
    (AB, [("A", "k", "B", "nope"), ("A", "zz", "B", "k")], {},
     r"unknown columns \['A.zz', 'B.nope'\]"),
    (ABC, E, {}, r"\['C'\] not connected"),
    (AB, [], {}, r"\['B'\] not connected"),
    ({**ABC, "D": AB["A"]}, [("A", "k", "B", "k"), ("C", "k", "D", "k")], {}, r"\['C', 'D'\] not"),
    (AB, [("A", "k", "A", "t"), *E], {}, "two different inputs"),
    (AB, [("A", "k", "B")], {}, "edges are"),
    (AB, E, {"window": 1}, "window needs time"),
    (AB, E, {"window": -1, "time": "t"}, "window must be a finite number >= 0"),
    (AB, E, {"window": math.nan, "time": "t"}, "finite"),
    (AB, E, {"time": "t"}, "without a window"),
    (ABC, [("A", "k", "B", "k"), ("B", "k", "C", "k")], {"window": 1, "time": "t"},
     r"missing from inputs \['C'\]"),
    (AB, E, {"band": -0.5}, "band must be a finite number >= 0"),
    (AB, E, {"band": math.inf}, "finite"),
    (AB, E, {"band": "1"}, "band must be a number"),
    (ABC, [("A", "k", "B", "k"), ("B", "k", "C", "s")], {"band": 1}, r"not numeric: \['C.s"),
    (AB, E, {"prefixes": {"Z": "z_"}}, r"unknown inputs \['Z'\]"),
    (AB, E, {"prefixes": {"A": "", "B": ""}}, r"clash \['k', 't'\]"),
])
def test_errors(inputs, edges, kw, match):
    for fn in (oracle_graph, oracle_graph_count):
        with pytest.raises(ValueError, match=match):
            fn(inputs, edges, **kw)
