"""The engine's exactness property: random layout-change schedules x spill modes x budgets x
equality/band x windows and ticks x 2- and 3-input joins, every output compared with DuckDB's
multiset (a lost row and a duplicate must not cancel). ``backend="local"``: the same executor
steps as on Spark, state pickled between micro-batches."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.online import operators, run_stream
from joins.oracle import assert_same_rows, oracle_graph
from tests.examples import examples

keys = st.lists(st.one_of(st.integers(0, 6), st.none()), max_size=50)


def _frame(ks: list, col: str, times: list[int] | None) -> pd.DataFrame:
    f = pd.DataFrame({"key": pd.array(ks, dtype="Int64"), col: np.arange(len(ks))})
    if times is not None:
        f["t"] = np.asarray(times[: len(ks)], dtype=np.int64)
    return f


def _times(draw, n: int) -> list[int]:
    return draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))


def _rescale(draw, op: str, total: int) -> list | None:
    if total < 2 or not draw(st.booleans()):
        return None
    points = sorted(draw(st.lists(st.integers(0, total - 1), min_size=1, max_size=3)))
    if op == "join_biclique":
        return [(p, (draw(st.integers(1, 4)), draw(st.integers(1, 4)))) for p in points]
    return [(p, (draw(st.integers(1, 6)),)) for p in points]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_two_inputs_exact(data):
    draw = data.draw
    op = draw(st.sampled_from(["static_mid", "shj", "join_biclique", "dynamic", "relocating"]))
    r, s = draw(keys), draw(keys)
    timed = draw(st.booleans())
    rf = _frame(r, "a", _times(draw, len(r)) if timed else None)
    sf = _frame(s, "b", _times(draw, len(s)) if timed else None)
    band = draw(st.sampled_from([None, 1.0])) if op in ("static_mid", "join_biclique",
                                                         "dynamic") else None
    window = draw(st.sampled_from([None, 0, 3, 10])) if timed else None
    tick = draw(st.sampled_from([None, 1, 4])) if timed else None
    spill = draw(st.sampled_from(["charge", "disk", "evict"]))
    budget = draw(st.sampled_from([None, 4, 15]))
    rescale = _rescale(draw, op, len(r) + len(s)) if op in ("static_mid", "shj",
                                                             "join_biclique") else None
    joiners = draw(st.sampled_from([2, 4, 8]))
    params: dict = {}
    factory = op
    if op == "relocating":
        factory, params = operators.relocating_shj, dict(groups=13, theta=0.95)
    if op == "dynamic":
        params = dict(eps=draw(st.sampled_from([0.25, 1.0])), warmup=draw(st.integers(0, 10)))
    res = run_stream(None, rf, sf, operator=factory, joiners=joiners, band=band,
                     batch_size=draw(st.integers(3, 30)), seed=draw(st.integers(0, 3)),
                     memory_budget_tuples=budget, spill=spill, collect_output=True,
                     progress=False, backend="local", time="t" if timed else None,
                     tick=tick, window=window, rescale=rescale, **params)
    want = oracle_graph({"R": rf, "S": sf}, [("R", "key", "S", "key")], band=band,
                        window=window, time="t" if window is not None else None,
                        prefixes={"R": "l_", "S": "r_"})
    assert_same_rows(res.output, want)
    assert len(res.output) == len(want) == res.summary["outputs"]
    m = res.metrics
    if not m.empty:
        assert res.summary["migrated_tuples"] == m["sent"].sum()
        assert (m["store_received"] + m["probe_received"] >= m["received"]).all()
        if tick is not None:  # every tick reports, empty ones included
            ticks = m.loc[m["phase"] == "normal", "batch"].unique()
            span = int(np.floor((max(rf["t"].max() if len(rf) else 0,
                                     sf["t"].max() if len(sf) else 0)
                                 - min(rf["t"].min() if len(rf) else 99,
                                       sf["t"].min() if len(sf) else 99)) / tick)) + 1
            if len(rf) + len(sf):
                assert set(range(span)) <= set(ticks)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_three_inputs_exact(data):
    draw = data.draw
    chain = draw(st.booleans())
    timed = draw(st.booleans())
    frames = {}
    for name in "ABC":
        ks = draw(keys)
        f = _frame(ks, name.lower(), _times(draw, len(ks)) if timed else None)
        if chain:
            f["x"] = pd.array(draw(st.lists(st.one_of(st.integers(0, 4), st.none()),
                                            min_size=len(ks), max_size=len(ks))), dtype="Int64")
        frames[name] = f
    if chain:  # A.key = B.key, B.x = C.x (MINER's chain on different attributes)
        on, edges = "A.key=B.key,B.x=C.x", [("A", "key", "B", "key"), ("B", "x", "C", "x")]
        joiners = 1
    else:
        on, edges = "key", [("A", "key", "B", "key"), ("B", "key", "C", "key")]
        joiners = draw(st.sampled_from([1, 2, 3, 5]))
    band = draw(st.sampled_from([None, 1.0])) if joiners == 1 else None
    window = draw(st.sampled_from([None, 0, 5])) if timed else None
    tick = draw(st.sampled_from([None, 2])) if timed else None
    total = sum(len(f) for f in frames.values())
    rescale = _rescale(draw, "mjoin", total) if not chain else None
    res = run_stream(None, inputs=frames, on=on, operator="mjoin", joiners=joiners, band=band,
                     batch_size=draw(st.integers(2, 25)), seed=draw(st.integers(0, 3)),
                     memory_budget_tuples=draw(st.sampled_from([None, 5])),
                     collect_output=True, progress=False, backend="local",
                     time="t" if timed else None, tick=tick, window=window, rescale=rescale)
    want = oracle_graph(frames, edges, band=band, window=window,
                        time="t" if window is not None else None)
    assert_same_rows(res.output, want)
    assert len(res.output) == len(want) == res.summary["outputs"]
    if not res.metrics.empty:
        assert {"store_received_A", "store_received_C", "stored_B"} <= set(res.metrics.columns)
