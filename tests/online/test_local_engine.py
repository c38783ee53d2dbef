"""Exactly-once property tests of the engine's worker steps, run in-process (backend="local":
the same step code as on Spark, state pickled between micro-batches) so that hypothesis can
try many random streams quickly. The Spark runs are in test_spark_engine.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.online import operators, run_stream
from joins.online.controller import Scripted
from joins.online.layouts import GridLayout
from joins.oracle import assert_same_rows, oracle_graph, oracle_join
from tests.examples import examples


def _frame(keys: list, col: str) -> pd.DataFrame:
    return pd.DataFrame({"key": pd.array(keys, dtype="Int64"), col: np.arange(len(keys))})


key_lists = st.lists(st.one_of(st.integers(0, 6), st.none()), max_size=60)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(r=key_lists, s=key_lists,
       op=st.sampled_from(["dynamic", "static_mid", "static_opt", "shj", "biclique",
                           "relocating"]),
       band=st.sampled_from([None, 1.0]), batch=st.integers(3, 40),
       joiners=st.sampled_from([1, 2, 4, 8, 16]), order=st.sampled_from(["random", "fluct"]),
       eps=st.sampled_from([0.2, 0.5, 1.0]), warmup=st.integers(0, 10), seed=st.integers(0, 5),
       budget=st.sampled_from([None, 3]))
def test_exactly_once_on_random_streams(r, s, op, band, batch, joiners, order, eps, warmup,
                                        seed, budget):
    if op in ("shj", "relocating") and band is not None:
        band = None
    if op == "biclique" and joiners < 2:
        joiners = 2
    factory = {"biclique": operators.join_biclique, "relocating": operators.relocating_shj
               }.get(op, op)
    params = dict(eps=eps, warmup=warmup) if op == "dynamic" else {}
    if op == "relocating":
        params = dict(groups=13, theta=0.95)
    rf, sf = _frame(r, "a"), _frame(s, "b")
    res = run_stream(None, rf, sf, operator=factory, joiners=joiners, band=band, order=order,
                     k=2, seed=seed, batch_size=batch, collect_output=True, progress=False,
                     backend="local", memory_budget_tuples=budget, **params)
    assert_same_rows(res.output, oracle_join(rf, sf, band=band))
    m = res.metrics
    if not m.empty and op in ("dynamic", "static_mid", "static_opt"):
        last = m[m["batch"] == m["batch"].max()]
        n, mm = res.summary["final_mapping"]
        assert last["r_stored"].sum() == mm * len(r)  # eventual consistency: each R tuple
        assert last["s_stored"].sum() == n * len(s)  # on exactly the m (n) joiners of its row
        assert last["pending"].sum() == 0
    if budget is not None and not m.empty and (m["r_stored"] + m["s_stored"]).max() > budget:
        assert res.summary["status"] == "overflow"


def test_many_migrations_split_batches_and_stay_exact():
    rng = np.random.default_rng(5)
    rf = _frame(list(rng.integers(0, 20, 300)) + [3] * 40, "a")
    sf = _frame(list(rng.integers(0, 20, 1500)) + [3] * 60, "b")
    res = run_stream(None, rf, sf, operator="dynamic", joiners=16, order="fluct", k=4,
                     batch_size=97, eps=0.25, warmup=10, collect_output=True, progress=False,
                     backend="local")
    assert_same_rows(res.output, oracle_join(rf, sf))
    ep = res.epochs
    assert len(ep) >= 4
    assert (ep["start_tuple"].iloc[1:] % 97 != 0).any()  # epochs start inside micro-batches
    m = res.metrics
    assert m["migrated"].sum() == ep["migration_tuples"].sum() > 0
    assert (m.groupby("batch")["migrated"].sum() > 0).sum() >= 2


def test_migrated_tuples_flow_at_twice_the_new_rate():
    rng = np.random.default_rng(6)
    rf, sf = _frame(list(rng.integers(0, 50, 2000)), "a"), _frame(list(rng.integers(0, 50, 20)), "b")
    res = run_stream(None, rf, sf, operator="dynamic", joiners=16, order="random",
                     batch_size=100, warmup=1000, collect_output=False, progress=False,
                     backend="local")
    m = res.metrics.sort_values(["batch", "worker"])
    assert res.summary["migrations"] >= 1
    sent = m.pivot(index="batch", columns="worker", values="sent").fillna(0)
    recv = m.pivot(index="batch", columns="worker", values="received").fillna(0)
    # mu received in batch b+1 was sent in batch b at up to 2x that batch's new deliveries
    moving = sent.sum(axis=1) > 0
    assert moving.any()
    mean_recv = recv.mean(axis=1)
    for b in sent.index[moving]:
        if b < sent.index.max() - 1:
            got = m[(m["batch"] == b + 1)].set_index("worker")["migrated"]
            cap = 2 * np.maximum(recv.loc[b], mean_recv.loc[b])
            assert (got.reindex(cap.index).fillna(0) <= cap + 1e-9).all()


def test_scale_out_and_scale_in_at_run_time_stay_exact():
    rng = np.random.default_rng(7)
    rf, sf = _frame(list(rng.integers(0, 9, 400)), "a"), _frame(list(rng.integers(0, 9, 500)), "b")

    def elastic(joiners, **_):
        return Scripted(GridLayout.initial(2, 2), [(150, lambda lay: lay.scale_out()),
                                                   (600, lambda lay: lay.scale_in())])

    res = run_stream(None, rf, sf, operator=elastic, joiners=4, batch_size=70,
                     collect_output=True, progress=False, backend="local", band=1.0)
    assert_same_rows(res.output, oracle_join(rf, sf, band=1.0))
    assert list(res.epochs["joiners"]) == [4, 16, 4]
    last = res.metrics[res.metrics["batch"] == res.metrics["batch"].max()]
    assert len(last) == 4 and last["r_stored"].sum() == 2 * 400


def test_several_decisions_in_one_micro_batch_stay_exact():
    """DYNAMIC's trigger fires several times inside one micro-batch: decisions that keep the
    mapping let the scan go on, and the batch may end with one that migrates (it ends at a
    later batch boundary; no decision starts while it runs)."""
    rng = np.random.default_rng(3)
    rf, sf = _frame(list(rng.integers(0, 30, 300)), "a"), _frame(list(rng.integers(0, 30, 300)), "b")
    res = run_stream(None, rf, sf, operator="dynamic", joiners=4, batch_size=200, order="fluct",
                     k=3.0, eps=0.5, warmup=10, collect_output=True, progress=False,
                     backend="local")
    assert_same_rows(res.output, oracle_join(rf, sf))
    d = res.decisions.assign(batch=res.decisions["at"] // 200)
    shared = d.groupby("batch").filter(lambda g: len(g) >= 2 and not g["migrated"].iloc[0]
                                       and g["migrated"].iloc[-1])
    assert shared["batch"].nunique() >= 1  # keep, ..., keep, migrate within one batch
    for _, g in d.groupby("batch"):
        assert g["migrated"].sum() <= 1 and not g["migrated"].iloc[:-1].any()
    moved = d[d["migrated"]]
    assert list(res.epochs["start_tuple"].iloc[1:]) == list(moved["at"])
    changed = (d["from_n"] != d["to_n"]) | (d["from_m"] != d["to_m"])
    assert (d["migrated"] == changed).all()


def test_multi_step_jump_direct_or_one_doubling_per_epoch():
    """R outnumbers S 16:1, so DYNAMIC's first decision jumps (4,4) -> (16,1), two doublings:
    jump="direct" in one epoch, jump="steps" through (8,2), the second step starting at the
    first tuple after the first migration ended; both exact."""
    rng = np.random.default_rng(5)
    rf, sf = _frame(list(rng.integers(0, 20, 400)), "a"), _frame(list(rng.integers(0, 20, 25)), "b")
    maps = {}
    for jump in ("direct", "steps"):
        res = run_stream(None, rf, sf, operator="dynamic", joiners=16, batch_size=40, jump=jump,
                         warmup=50, collect_output=True, progress=False, backend="local")
        assert_same_rows(res.output, oracle_join(rf, sf))
        ep = res.epochs
        maps[jump] = list(zip(ep["n"], ep["m"], strict=True))
        if jump == "steps":
            assert ep["start_tuple"].iloc[2] == 40 * ep["migration_end_batch"].iloc[1]
            assert res.decisions["at"].iloc[1] == ep["start_tuple"].iloc[2]
    assert maps == {"direct": [(4, 4), (16, 1)], "steps": [(4, 4), (8, 2), (16, 1)]}


def test_partition_group_relocation_moves_groups_and_stays_exact():
    rng = np.random.default_rng(8)
    hot = [1] * 300
    rf = _frame(list(rng.integers(0, 200, 300)) + hot, "a")
    sf = _frame(list(rng.integers(0, 200, 300)), "b")
    res = run_stream(None, rf, sf, operator=operators.relocating_shj, joiners=4, groups=64,
                     theta=0.8, batch_size=100, collect_output=True, progress=False,
                     backend="local")
    assert_same_rows(res.output, oracle_join(rf, sf))
    assert res.summary["migrations"] >= 1 and res.summary["migrated_tuples"] > 0


@settings(max_examples=examples(20), deadline=None)
@given(r=st.lists(st.integers(0, 4), max_size=50), s=st.lists(st.integers(0, 4), max_size=50),
       op=st.sampled_from(["static_mid", "shj", "static_opt"]), batch=st.integers(3, 20),
       budget=st.integers(1, 8), band=st.sampled_from([None, 1.0]))
def test_evicted_state_and_clean_up_phase_give_every_result_once(r, s, op, batch, budget, band):
    """D-CAPE-style disk adaptation: evicted tuples stop joining; the clean-up phase after the
    stream adds exactly the missed results (normal run + clean-up = the full join)."""
    if op == "shj":
        band = None
    rf, sf = _frame(r, "a"), _frame(s, "b")
    res = run_stream(None, rf, sf, operator=op, joiners=4, band=band, batch_size=batch,
                     memory_budget_tuples=budget, spill="evict", collect_output=True,
                     progress=False, backend="local")
    assert_same_rows(res.output, oracle_join(rf, sf, band=band))
    m = res.metrics
    if not m.empty and m["spilled"].sum():
        assert res.summary["status"] == "overflow"
        assert (m.groupby("batch")["r_stored"].sum() + m.groupby("batch")["s_stored"].sum()
                <= 4 * budget + 0).all()


@pytest.mark.parametrize("joiners", [1, 3])
def test_eviction_keeps_a_partner_that_expires_before_the_clean_up(joiners):
    """Windows with eviction: R's key-1 tuple is evicted before S's key-1 tuple arrives (so
    their pair is missed), and the S tuple then expires; the clean-up still needs it, so an
    expired tuple goes to disk in evict mode instead of being dropped."""
    rf = pd.DataFrame({"key": pd.array([1, 2, 3, 4, 5], dtype="Int64"), "a": np.arange(5),
                       "t": np.arange(5)})
    sf = pd.DataFrame({"key": pd.array([1] + [9] * 20, dtype="Int64"), "b": np.arange(21),
                       "t": np.r_[5, np.arange(20, 100, 4)]})
    res = run_stream(None, rf, sf, operator="shj", joiners=joiners, batch_size=2,
                     memory_budget_tuples=3, spill="evict", collect_output=True,
                     progress=False, backend="local", time="t", window=10)
    want = oracle_graph({"R": rf, "S": sf}, [("R", "key", "S", "key")], window=10, time="t",
                        prefixes={"R": "l_", "S": "r_"})
    assert len(want) == 1
    assert_same_rows(res.output, want)
    if joiners == 1:  # all five R tuples share one budget of 3: key 1 is evicted
        assert (res.output["phase"] == "cleanup").all()
    assert res.metrics["expired"].sum() > 0


def test_a_program_names_its_own_phases(monkeypatch):
    """Output rows and per-tick counts carry a phase the program names, with no engine edit."""
    from joins.online import programs
    from tests.frames import hot_key_streams
    from tests.online.phased_program import LatePhaseMJoin

    r, s = hot_key_streams()
    monkeypatch.setattr(programs, "load", lambda name: LatePhaseMJoin)
    res = run_stream(None, r, s, operator="mjoin", joiners=3, batch_size=100,
                     collect_output=True, progress=False, backend="local")
    assert_same_rows(res.output, oracle_join(r, s))
    late = res.output["phase"] == "late"
    assert 0 < late.sum() < len(res.output) and set(res.output["phase"]) == {"normal", "late"}
    m = res.metrics
    assert m["outputs_late"].fillna(0).sum() == late.sum()
    assert (m.loc[m["batch"] < 2, "outputs_late"].fillna(0) == 0).all()
    assert m["outputs"].sum() == len(res.output)


def test_tick_rows_carry_their_event_time_range():
    """tick=T: every metric row is one tick [t0, t1), T wide from the first arrival's time,
    empty ticks included."""
    rng = np.random.default_rng(4)
    r = pd.DataFrame({"key": rng.integers(0, 5, 40), "t": np.sort(rng.uniform(0, 95, 40))})
    s = pd.DataFrame({"key": rng.integers(0, 5, 30), "t": np.r_[np.sort(rng.uniform(0, 40, 30))]})
    res = run_stream(None, r, s, operator="shj", joiners=2, time="t", tick=10.0,
                     collect_output=True, progress=False, backend="local")
    assert_same_rows(res.output, oracle_join(r, s))
    m = res.metrics
    start = min(r["t"].min(), s["t"].min())
    assert np.allclose(m["t1"] - m["t0"], 10.0)
    assert np.allclose(m["t0"], start + m["batch"] * 10.0)
    ticks = int((max(r["t"].max(), s["t"].max()) - start) // 10) + 1
    assert sorted(m["batch"].unique()) == list(range(ticks))
    received = m.groupby("batch")["received"].sum()
    late = m["t0"].groupby(m["batch"]).first() >= 40  # S is silent from 40 on: only R arrives
    assert received[late].sum() == sum(((r["t"] >= t) & (r["t"] < t + 10)).sum()
                                       for t in m["t0"].groupby(m["batch"]).first()[late])


def test_a_two_sided_layout_refuses_a_third_input():
    from joins.online import operators

    frames = {nm: pd.DataFrame({"key": [1, 2]}) for nm in "ABC"}
    # a declared operator is refused by its declaration (inputs=2) when the spec is built
    with pytest.raises(ValueError, match="static_mid joins 2 inputs; operator=.*mjoin"):
        run_stream(None, inputs=frames, operator="static_mid", joiners=4, progress=False,
                   backend="local")
    # an undeclared one by its layout, when its policy is checked
    with pytest.raises(ValueError, match="grid layout, which has 2 sides"):
        run_stream(None, inputs=frames, operator=lambda j, **kw: operators.static_mid(j, **kw),
                   joiners=4, progress=False, backend="local")
