"""MINER and MJoin's coordinated flushing (paper ``diner``, section 4 and Fig 22) against the
DuckDB oracle as multisets: every budget, block size and pause pattern, across flushes,
reactive episodes (with handovers mid-batch) and the clean-up."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.online import run_stream
from joins.oracle import assert_same_rows, oracle_graph

CHAIN = [("R1", "a1", "R2", "a1"), ("R2", "a2", "R3", "a2"), ("R3", "a3", "R4", "a3")]
COLS = {"R1": ["a1"], "R2": ["a1", "a2"], "R3": ["a2", "a3"], "R4": ["a3"]}


def _rel(rng, n: int, cols, keys, pause: float | None) -> pd.DataFrame:
    """Exponential gaps of mean 10, a pause of 800 at ``pause`` of the way."""
    t = np.cumsum(rng.exponential(10.0, n))
    if pause is not None and n:
        t[int(pause * n):] += 800.0
    out = {c: keys(rng, n) for c in cols}
    return pd.DataFrame({**out, "t": t, "x": np.arange(n) % 5})


def _inputs(rng, sizes: dict, keys, star: bool = False) -> dict:
    pauses = {"R1": 0.5, "R2": 0.3, "R3": 0.6, "R4": 0.4}
    return {name: _rel(rng, n, ["a"] if star else COLS[name], keys, pauses[name])
            for name, n in sizes.items()}


def _edges(names, star: bool = False):
    edges = [e for e in CHAIN if e[0] in names and e[2] in names]
    return [(a, "a", b, "a") for a, _, b, _ in edges] if star else edges


def _run(inputs, budget, operator="miner", star=False, **kw):
    on = ",".join(f"{a}.{ca}={b}.{cb}" for a, ca, b, cb in _edges(list(inputs), star))
    params = dict(tups_per_block=6, wait_thresh=25.0)
    if operator == "miner":
        params.update(max_outer_mem=3, max_new_arr=20)
    else:
        params.update(flushing="coordinated", n_part=5)
    return run_stream(None, inputs=inputs, operator="mjoin" if operator != "miner" else
                      "miner", joiners=1, on=on, time="t", tick=400.0,
                      memory_budget_tuples=budget, collect_output=True, progress=False,
                      backend="local", **{**params, **kw})


def _check(res, inputs, budget=None, star=False):
    want = oracle_graph(inputs, _edges(list(inputs), star))
    assert_same_rows(res.output, want)
    m = res.metrics
    assert m["outputs"].sum() == len(want)
    for phase in ("arriving", "reactive"):
        col = m[f"outputs_{phase}"].fillna(0).sum() if f"outputs_{phase}" in m else 0
        assert col == (res.output["phase"] == phase).sum()
    if budget is not None:
        assert m["memory_max"].max() <= budget


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_in=st.integers(2, 4), sizes=st.lists(st.integers(0, 50), min_size=4, max_size=4),
       domain=st.integers(3, 9), budget=st.integers(20, 150), block=st.integers(1, 8),
       outer=st.integers(1, 4), new_arr=st.integers(0, 25), wait=st.floats(1.0, 60.0),
       seed=st.integers(0, 9))
def test_property_miner_exact_for_any_parameters(n_in, sizes, domain, budget, block, outer,
                                                 new_arr, wait, seed):
    names = {2: ["R2", "R3"], 3: ["R1", "R2", "R3"], 4: ["R1", "R2", "R3", "R4"]}[n_in]
    rng = np.random.default_rng(seed)
    inputs = _inputs(rng, dict(zip(names, sizes, strict=False)),
                     lambda g, n: g.integers(0, domain, n))
    budget = max(budget, (outer + n_in) * block + 2)
    res = _run(inputs, budget, tups_per_block=block, max_outer_mem=outer,
               max_new_arr=new_arr, wait_thresh=wait)
    _check(res, inputs, budget)


@pytest.mark.parametrize("case", ["hot_all", "one_key", "nulls_dups", "empty_end",
                                  "unbounded"])
def test_edge_cases_are_exact(case):
    rng = np.random.default_rng(5)

    def hot(g, n):
        return np.where(g.random(n) < 0.6, 3, g.integers(0, 30, n))

    keys = {"one_key": lambda g, n: np.full(n, 7)}.get(case, hot)
    sizes = {"R1": 15, "R2": 60, "R3": 60, "R4": 15}
    if case == "one_key":
        sizes = {"R1": 8, "R2": 30, "R3": 30, "R4": 8}
    if case == "empty_end":
        sizes["R4"] = 0
    inputs = _inputs(rng, sizes, keys)
    if case == "nulls_dups":
        r2 = inputs["R2"]
        r2["a2"] = pd.array(np.where(rng.random(len(r2)) < 0.1, None, r2["a2"]), dtype="Int64")
        r3 = pd.concat([inputs["R3"], inputs["R3"].iloc[:30]], ignore_index=True)
        r3["t"] = np.sort(r3["t"].to_numpy())
        inputs["R3"] = r3
    budget = None if case == "unbounded" else 40
    res = _run(inputs, budget)
    _check(res, inputs, budget)
    if case == "unbounded":  # all memory: every result online, as MJoin's
        assert (res.output["phase"] == "arriving").all()


def test_reactive_phase_joins_disk_blocks_and_resumes_after_handovers():
    rng = np.random.default_rng(2)
    inputs = _inputs(rng, {"R1": 100, "R2": 100, "R3": 100, "R4": 100},
                     lambda g, n: g.integers(0, 8, n))
    res = _run(inputs, 60, max_new_arr=0)  # hands over after every unit when one waits
    _check(res, inputs, 60)
    last = res.metrics.iloc[-1]
    assert (res.output["phase"] == "reactive").sum() > 0
    assert last["handovers"] > 1 and last["blocks_read"] > 0


@pytest.mark.parametrize("n_part", [1, 4, 50])
def test_mjoin_coordinated_flushing_is_exact_on_a_star(n_part):
    rng = np.random.default_rng(3)
    inputs = _inputs(rng, {"R1": 80, "R2": 200, "R3": 200, "R4": 80},
                     lambda g, n: g.integers(0, 25, n), star=True)
    res = _run(inputs, 70, operator="mjoin", star=True, n_part=n_part)
    _check(res, inputs, 70, star=True)
    assert res.metrics.iloc[-1]["buckets_flushed"] > 0
    assert (res.output["phase"] == "cleanup").any()


def test_miner_runs_the_star_too_and_wrong_graphs_are_refused():
    rng = np.random.default_rng(4)
    inputs = _inputs(rng, {"R1": 50, "R2": 120, "R3": 120}, lambda g, n: g.integers(0, 9, n),
                     star=True)
    _check(_run(inputs, 50, star=True), inputs, 50, star=True)
    chain = _inputs(rng, {"R1": 20, "R2": 20, "R3": 20}, lambda g, n: g.integers(0, 9, n))
    with pytest.raises(ValueError, match="shared join attribute"):
        _run(chain, 30, operator="mjoin")
    with pytest.raises(ValueError, match="tree"):  # a cycle R1 - R2 - R3 - R1
        run_stream(None, inputs=chain, operator="miner", joiners=1, on="R1.a1=R2.a1,"
                   "R2.a2=R3.a2,R3.a2=R1.a1", time="t", memory_budget_tuples=30,
                   progress=False, backend="local")


# MINER on trees other than chains: a star on three attributes of its hub (the hub first or
# last in the input order) and a snowflake (a spoke with a spoke of its own)
TREES = {
    "star": (["H", "S1", "S2", "S3"],
             [("H", "a1", "S1", "a1"), ("H", "a2", "S2", "a2"), ("H", "a3", "S3", "a3")]),
    "star_hub_last": (["S1", "S2", "S3", "H"],
                      [("S1", "a1", "H", "a1"), ("H", "a2", "S2", "a2"),
                       ("S3", "a3", "H", "a3")]),
    "snowflake": (["S1", "H", "T1", "S2"],
                  [("H", "a1", "S1", "a1"), ("S1", "b1", "T1", "b1"),
                   ("H", "a2", "S2", "a2")]),
}


def _tree_inputs(rng, shape: str, sizes: list[int], domain: int) -> dict:
    names, edges = TREES[shape]
    cols = {nm: sorted({ca for a, ca, _, _ in edges if a == nm} |
                       {cb for _, _, b, cb in edges if b == nm}) for nm in names}
    return {nm: _rel(rng, n, cols[nm], lambda g, k: g.integers(0, domain, k), 0.5)
            for nm, n in zip(names, sizes, strict=True)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(sorted(TREES)),
       sizes=st.lists(st.integers(0, 40), min_size=4, max_size=4), domain=st.integers(3, 8),
       budget=st.integers(20, 120), block=st.integers(1, 6), outer=st.integers(1, 3),
       new_arr=st.integers(0, 20), wait=st.floats(1.0, 60.0), seed=st.integers(0, 9))
def test_property_miner_exact_on_stars_and_snowflakes(shape, sizes, domain, budget, block,
                                                      outer, new_arr, wait, seed):
    inputs = _tree_inputs(np.random.default_rng(seed), shape, sizes, domain)
    edges = TREES[shape][1]
    budget = max(budget, (outer + 4) * block + 2)
    res = run_stream(None, inputs=inputs, operator="miner", joiners=1,
                     on=",".join(f"{a}.{ca}={b}.{cb}" for a, ca, b, cb in edges), time="t",
                     tick=400.0, memory_budget_tuples=budget, collect_output=True,
                     progress=False, backend="local", tups_per_block=block,
                     max_outer_mem=outer, max_new_arr=new_arr, wait_thresh=wait)
    want = oracle_graph(inputs, edges)
    assert_same_rows(res.output.drop(columns="phase"), want)
    m = res.metrics
    assert m["memory_max"].max() <= budget
    reactive = m["outputs_reactive"].fillna(0).sum() if "outputs_reactive" in m else 0
    assert reactive == (res.output["phase"] == "reactive").sum()


@pytest.mark.slow
def test_star_reactive_phase_runs_on_the_hub_attributes():
    """With every relation flushed, the reactive phase joins hub and spoke blocks (the
    odometer over a star's digits)."""
    inputs = _tree_inputs(np.random.default_rng(1), "star", [120, 120, 120, 120], 6)
    edges = TREES["star"][1]
    res = run_stream(None, inputs=inputs, operator="miner", joiners=1,
                     on=",".join(f"{a}.{ca}={b}.{cb}" for a, ca, b, cb in edges), time="t",
                     tick=400.0, memory_budget_tuples=60, collect_output=True,
                     progress=False, backend="local", tups_per_block=5, max_outer_mem=2,
                     max_new_arr=0)
    assert_same_rows(res.output.drop(columns="phase"), oracle_graph(inputs, edges))
    assert (res.output["phase"] == "reactive").sum() > 0
