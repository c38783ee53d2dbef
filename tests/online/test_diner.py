"""DINER and its baselines (HMJ) as worker programs: arriving + reactive + clean-up is DuckDB's join as a multiset
(no pair twice, none lost) for memory budgets from 1% of the input to all of it, with steady
arrivals, pauses (the reactive phase), unequal sizes and sorted intervals; hot keys on both
sides, on one, on none; one key value; nulls; duplicates; an empty input; band joins. With
memory for the whole input every result is online and equals SHJ's; the memory (tuples, input
buffer and loaded blocks) never passes the budget; a seed gives the same metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.online import run_stream
from joins.oracle import assert_same_rows, oracle_join

SMALL = dict(tups_per_block=8, max_outer_mem=3, max_new_arr=15, wait_thresh=25.0)
OPS = {"diner": SMALL, "hmj": dict(tups_per_block=8, n_part=7, fan_in=3, wait_thresh=25.0),
       "rpj": dict(tups_per_block=8, n_part=7, fan_in=3, wait_thresh=25.0),
       "xjoin": dict(tups_per_block=8, n_part=7, fan_in=3, wait_thresh=25.0),
       "pmj": dict(tups_per_block=8, fan_in=4, wait_thresh=25.0)}


def _stream(rng, n: int, keys, col: str, pause_at: float | None = None,
            sort_keys: bool = False) -> pd.DataFrame:
    """Exponential gaps of mean 10 (lambda = 0.1), a pause of 800 at ``pause_at`` of the way."""
    t = np.cumsum(rng.exponential(10.0, n))
    if pause_at is not None and n:
        t[int(pause_at * n):] += 800.0
    k = keys(rng, n)
    if sort_keys:
        k = np.sort(k)
    return pd.DataFrame({"key": k, "t": t, col: np.arange(n) % 7})


def _run(r, s, budget, band=None, operator="diner", **kw):
    return run_stream(None, r, s, operator=operator, joiners=1, time="t", tick=400.0,
                      memory_budget_tuples=budget, band=band, collect_output=True,
                      progress=False, backend="local", **{**OPS[operator], **kw})


def _check(res, r, s, band=None, budget=None):
    expected = oracle_join(r, s, band=band) if band is not None else oracle_join(r, s)
    assert_same_rows(res.output, expected)
    assert set(res.output["phase"]) <= {"arriving", "reactive", "cleanup"}
    m = res.metrics
    labelled = sum(m[f"outputs_{p}"].fillna(0) for p in ("arriving", "reactive")
                   if f"outputs_{p}" in m)
    assert m["outputs"].sum() == len(expected)
    for phase in ("arriving", "reactive"):  # each row's count is the phase's output rows
        col = m[f"outputs_{phase}"].fillna(0).sum() if f"outputs_{phase}" in m else 0
        assert col == (res.output["phase"] == phase).sum()
    assert (m["outputs"] - labelled).sum() == (res.output["phase"] == "cleanup").sum()
    if budget is not None:  # only an input buffer that itself outgrew the budget passes it
        assert m["memory_max"].max() <= budget or m["buffer_max"].max() > budget


def zipf_keys(a):
    return lambda rng, n: np.minimum(rng.zipf(a, n), 999)


def uniform_keys(rng, n):
    return rng.integers(0, 40, n)


@pytest.mark.parametrize("operator", list(OPS))
@pytest.mark.parametrize("share", [0.01, 0.05, 0.2])
@pytest.mark.parametrize("pause", [None, 0.5])
def test_every_budget_is_exact_with_steady_arrivals_and_pauses(share, pause, operator):
    rng = np.random.default_rng(int(share * 100) + (pause is not None))
    r = _stream(rng, 900, uniform_keys, "a", pause)
    s = _stream(rng, 700, zipf_keys(1.5), "b", pause)
    budget = max(int(share * (len(r) + len(s))), 2 * SMALL["tups_per_block"])
    res = _run(r, s, budget, operator=operator)
    _check(res, r, s, budget=budget)
    m = res.metrics
    assert m["blocks_written"].max() > 0  # the budget made it flush
    if pause is not None and operator != "pmj":  # the pause ran the reactive phase (PMJ has
        # none: it merges after the last arrival)
        assert m["reactive_episodes"].max() > 0 and (res.output["phase"] == "reactive").any()


@pytest.mark.parametrize("operator", [op for op in OPS if op != "pmj"])
def test_memory_for_the_whole_input_is_fully_online_and_equals_shj(operator):
    """(PMJ joins only when the memory is full: with memory for everything it is blocking,
    every result in the clean-up; test_pmj_is_blocking_between_loads.)"""
    rng = np.random.default_rng(5)
    r = _stream(rng, 400, zipf_keys(2.0), "a", 0.5)
    s = _stream(rng, 300, zipf_keys(2.0), "b", 0.5)
    res = _run(r, s, 10_000, operator=operator)
    _check(res, r, s)
    assert set(res.output["phase"]) == {"arriving"}
    shj = run_stream(None, r, s, operator="shj", joiners=1, time="t", tick=400.0,
                     collect_output=True, progress=False, backend="local")
    assert_same_rows(res.output, shj.output.drop(columns=["phase", "produced_at", "unit"]))
    assert res.metrics["blocks_written"].max() == 0


@pytest.mark.parametrize("operator", list(OPS))
@pytest.mark.parametrize("case", ["hot_both", "hot_one", "one_key", "nulls_dups",
                                  "empty_r", "empty_s", "unequal", "sorted"])
def test_edge_cases_are_exact(case, operator):
    rng = np.random.default_rng(11)

    def hot(rng, n):
        return np.where(rng.random(n) < 0.6, 3, rng.integers(0, 50, n))

    r_keys, s_keys, nr, ns, srt = uniform_keys, uniform_keys, 500, 500, False
    if case == "hot_both":
        r_keys = s_keys = hot
    elif case == "hot_one":
        r_keys = hot
    elif case == "one_key":
        r_keys = s_keys = lambda rng, n: np.full(n, 7)  # noqa: E731
    elif case == "empty_r":
        nr = 0
    elif case == "empty_s":
        ns = 0
    elif case == "unequal":
        nr, ns = 900, 90
    elif case == "sorted":
        srt = True
    r = _stream(rng, nr, r_keys, "a", 0.5, sort_keys=srt)
    s = _stream(rng, ns, s_keys, "b", 0.5, sort_keys=srt)
    if case == "nulls_dups":
        r["key"] = pd.array(np.where(rng.random(nr) < 0.1, None, r["key"]), dtype="Int64")
        s = pd.concat([s, s.iloc[:50]], ignore_index=True)  # duplicate rows
        s["t"] = np.sort(s["t"].to_numpy())
        s["key"] = pd.array(np.where(rng.random(len(s)) < 0.1, None, s["key"]), dtype="Int64")
    budget = 60
    _check(_run(r, s, budget, operator=operator), r, s, budget=budget)


@pytest.mark.parametrize("operator", ["diner", "pmj"])
@pytest.mark.parametrize("band", [0.0, 2.0])
def test_band_joins_are_exact(band, operator):
    rng = np.random.default_rng(3)
    r = _stream(rng, 600, uniform_keys, "a", 0.5)
    s = _stream(rng, 500, uniform_keys, "b", 0.5)
    _check(_run(r, s, 80, band=band, operator=operator), r, s, band=band, budget=80)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nr=st.integers(0, 120), ns=st.integers(0, 120), domain=st.integers(1, 12),
       budget=st.integers(16, 200), block=st.integers(1, 9), outer=st.integers(1, 4),
       new_arr=st.integers(0, 30), wait=st.floats(1.0, 60.0), seed=st.integers(0, 9))
def test_property_diner_exact_for_any_parameters(nr, ns, domain, budget, block, outer,
                                                 new_arr, wait, seed):
    rng = np.random.default_rng(seed)
    r = _stream(rng, nr, lambda g, n: g.integers(0, domain, n), "a", 0.3)
    s = _stream(rng, ns, lambda g, n: g.integers(0, domain, n), "b", 0.6)
    budget = max(budget, 2 * block + 2)
    res = _run(r, s, budget, tups_per_block=block, max_outer_mem=outer, max_new_arr=new_arr,
               wait_thresh=wait)
    _check(res, r, s, budget=budget)


def test_the_same_seed_gives_the_same_metrics():
    rng = np.random.default_rng(8)
    r = _stream(rng, 500, zipf_keys(1.2), "a", 0.5)
    s = _stream(rng, 500, zipf_keys(1.2), "b", 0.5)
    timing = ["seconds", "cpu_seconds", "batch_wall_seconds", "modeled_cost"]
    a, b = (_run(r, s, 50, seed=4).metrics.drop(columns=timing, errors="ignore")
            for _ in range(2))
    pd.testing.assert_frame_equal(a, b)


def test_bad_parameters_are_refused():
    r = pd.DataFrame({"key": [1], "t": [0.0]})
    with pytest.raises(ValueError, match="single-site"):
        run_stream(None, r, r, operator="diner", joiners=2, progress=False, backend="local")
    with pytest.raises(ValueError, match="tups_per_block"):
        _run(r, r, 10, tups_per_block=0)


@pytest.mark.spark
def test_spark_backend_gives_the_local_counts(spark):
    rng = np.random.default_rng(2)
    r = _stream(rng, 400, zipf_keys(1.5), "a", 0.5)
    s = _stream(rng, 400, uniform_keys, "b", 0.5)
    local = _run(r, s, 40)
    on_spark = run_stream(spark, r, s, operator="diner", joiners=1, time="t", tick=400.0,
                          memory_budget_tuples=40, collect_output=True, progress=False,
                          **SMALL)
    _check(on_spark, r, s, budget=40)
    counts = ["outputs", "outputs_arriving", "outputs_reactive", "flushed_up", "flushed_md",
              "flushed_lw", "reactive_episodes", "blocks_written", "blocks_read"]
    pd.testing.assert_frame_equal(on_spark.metrics[counts].reset_index(drop=True),
                                  local.metrics[counts].reset_index(drop=True))


@pytest.mark.parametrize("seed", range(6))
def test_arriving_phase_flushes_as_a_pure_python_reference(seed):
    """Algs 1-3 tuple by tuple in plain Python (tests/online/diner_reference.py): the same
    arriving-phase results and the same tuples flushed from each region, per tick (no
    reactive phase, no costs: arrivals never wait)."""
    from tests.online.diner_reference import Reference

    rng = np.random.default_rng(100 + seed)
    keys = [uniform_keys, zipf_keys(1.3), zipf_keys(2.5)][seed % 3]
    r = _stream(rng, 700, keys, "a")
    s = _stream(rng, 500, keys, "b")
    budget, block = 60 + 20 * seed, 5 + seed
    res = _run(r, s, budget, tups_per_block=block, wait_thresh=1e12, c_read=0.0,
               c_write=0.0, c_join=0.0, seed=seed)
    arrivals = pd.concat([r.assign(rel=0), s.assign(rel=1)]).sort_values("t", kind="stable")
    ref = Reference(budget, block, seed)
    start, per_tick = arrivals["t"].min(), {}
    for t, rel, key in zip(arrivals["t"], arrivals["rel"], arrivals["key"], strict=True):
        ref.arrive(int(rel), float(key))
        per_tick[int((t - start) // 400.0)] = (ref.outputs, *ref.flushed)
    m = res.metrics[res.metrics["phase"] == "normal"].set_index("batch")
    got = pd.DataFrame({"outputs": m["outputs_arriving"].fillna(0).cumsum(),
                        "up": m["flushed_up"], "lw": m["flushed_lw"], "md": m["flushed_md"]})
    want = pd.DataFrame(per_tick, index=["outputs", "up", "lw", "md"]).T
    pd.testing.assert_frame_equal(got.loc[want.index].astype(int), want.astype(int),
                                  check_names=False)
    flushed = want.iloc[-1][["up", "lw", "md"]]
    assert (flushed > 0).sum() >= 2 and (seed % 3 or flushed.min() > 0)  # uniform: all three


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nr=st.integers(0, 120), ns=st.integers(0, 120), domain=st.integers(1, 12),
       budget=st.integers(12, 200), block=st.integers(1, 9), n_part=st.integers(1, 9),
       fan_in=st.integers(2, 5), wait=st.floats(1.0, 60.0), seed=st.integers(0, 9))
def test_property_hmj_exact_for_any_parameters(nr, ns, domain, budget, block, n_part, fan_in,
                                               wait, seed):
    rng = np.random.default_rng(seed)
    r = _stream(rng, nr, lambda g, n: g.integers(0, domain, n), "a", 0.3)
    s = _stream(rng, ns, lambda g, n: g.integers(0, domain, n), "b", 0.6)
    res = _run(r, s, budget, operator="hmj", tups_per_block=block, n_part=n_part,
               fan_in=fan_in, wait_thresh=wait)
    _check(res, r, s, budget=budget)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nr=st.integers(0, 120), ns=st.integers(0, 120), domain=st.integers(1, 12),
       budget=st.integers(12, 200), block=st.integers(1, 9), n_part=st.integers(1, 9),
       fan_in=st.integers(2, 5), n_flush=st.integers(1, 12), wait=st.floats(1.0, 60.0),
       seed=st.integers(0, 9))
def test_property_rpj_exact_for_any_parameters(nr, ns, domain, budget, block, n_part, fan_in,
                                               n_flush, wait, seed):
    """Passes, merges and clean-up interleaved at random: no pair lost or produced twice
    (XJoin: passes only, the largest bucket flushed)."""
    rng = np.random.default_rng(seed)
    r = _stream(rng, nr, lambda g, n: g.integers(0, domain, n), "a", 0.3)
    s = _stream(rng, ns, lambda g, n: g.integers(0, domain, n), "b", 0.6)
    res = _run(r, s, budget, operator="rpj", tups_per_block=block, n_part=n_part,
               fan_in=fan_in, n_flush=n_flush, wait_thresh=wait)
    _check(res, r, s, budget=budget)
    res = _run(r, s, budget, operator="xjoin", tups_per_block=block, n_part=n_part,
               fan_in=fan_in, wait_thresh=wait)
    _check(res, r, s, budget=budget)


def test_rpj_runs_both_kinds_of_reactive_task():
    """A long pause after much flushing: RPJ both passes disk buckets against memory and
    merges segment groups, and produces results in its reactive phase."""
    rng = np.random.default_rng(21)
    r = _stream(rng, 1500, uniform_keys, "a", 0.5)
    s = _stream(rng, 1500, uniform_keys, "b", 0.5)
    res = _run(r, s, 150, operator="rpj")
    _check(res, r, s, budget=150)
    last = res.metrics.iloc[-1]
    assert last["passes"] > 0 and last["merges"] > 0
    assert res.metrics["outputs_reactive"].fillna(0).sum() > 0


@pytest.mark.parametrize("operator", ["hmj", "rpj", "xjoin"])
def test_hash_baselines_refuse_a_band_join(operator):
    r = pd.DataFrame({"key": [1], "t": [0.0]})
    with pytest.raises(ValueError, match="cannot run a band join"):
        _run(r, r, 10, band=1.0, operator=operator)


@pytest.mark.parametrize("operator", list(OPS))
@pytest.mark.parametrize("z", [1.2, 3.0])
def test_counting_without_rows_gives_the_exact_total(operator, z):
    """Without collected rows the disk joins count pairs (never list them): the total, and
    every per-phase count, equal the run that lists them."""
    from joins.oracle import oracle_count

    rng = np.random.default_rng(int(z * 10))
    r = _stream(rng, 800, zipf_keys(z), "a", 0.5)
    s = _stream(rng, 600, zipf_keys(z), "b", 0.5)
    listed = _run(r, s, 60, operator=operator)
    counted = run_stream(None, r, s, operator=operator, joiners=1, time="t", tick=400.0,
                         memory_budget_tuples=60, progress=False, backend="local",
                         **OPS[operator])
    cols = [c for c in listed.metrics if c.startswith("outputs")]
    pd.testing.assert_frame_equal(counted.metrics[cols], listed.metrics[cols])
    assert counted.metrics["outputs"].sum() == oracle_count(r, s, "key", "inner")


def test_pmj_is_blocking_between_loads():
    """PMJ produces results only when a load fills the memory (all of them, as SHJ, in the
    clean-up when the memory holds the whole input), and never in a reactive phase."""
    rng = np.random.default_rng(6)
    r = _stream(rng, 400, uniform_keys, "a", 0.5)
    s = _stream(rng, 300, uniform_keys, "b", 0.5)
    whole = _run(r, s, 10_000, operator="pmj")
    _check(whole, r, s)
    assert set(whole.output["phase"]) == {"cleanup"}
    loads = _run(r, s, 100, operator="pmj")
    _check(loads, r, s, budget=100)
    m = loads.metrics
    assert m["loads"].max() >= 700 // 100 and m["reactive_episodes"].max() == 0
    assert (loads.output["phase"] == "arriving").sum() > 0


@pytest.mark.parametrize("operator", ["diner", "hmj", "rpj", "xjoin", "pmj"])
def test_the_ticks_do_not_change_a_run(operator):
    """Slow disk units (costly blocks) push the clock past several ticks; the loop waits for
    every arrival up to its clock, so the input buffer it counts, its decisions and its
    results are those of one delivery of the whole stream."""
    rng = np.random.default_rng(13)
    r = _stream(rng, 700, zipf_keys(1.3), "a", 0.5)
    s = _stream(rng, 700, zipf_keys(1.3), "b", 0.5)
    runs = [run_stream(None, r, s, operator=operator, joiners=1, time="t", tick=tick,
                       memory_budget_tuples=80, collect_output=True, progress=False,
                       backend="local", **{**OPS[operator], "c_read": 10.0, "c_join": 1.0})
            for tick in (50.0, 1e9)]
    stats = ["buffer_max", "buffer_at_handover_max", "memory_max", "blocks_read",
             "blocks_written", "handovers"]
    a, b = (x.metrics.iloc[-1][stats].rename(None) for x in runs)
    pd.testing.assert_series_equal(a, b)
    if operator != "pmj":  # (PMJ has no reactive unit) slow units span ticks of ~10 arrivals
        assert a["buffer_max"] > 20
    for x in runs:
        _check(x, r, s)
    assert (runs[0].output["phase"].value_counts().sort_index()
            .equals(runs[1].output["phase"].value_counts().sort_index()))


def test_disk_blocks_live_in_the_runs_folder_and_go_with_it(monkeypatch, tmp_path):
    """The single-site operators' disk blocks are files in the run's spill folder, removed
    when the run ends (they once filled the machine's /tmp, one folder per run)."""
    import joins.online.engine as engine
    import runtime.paths

    scratch = tmp_path / "online"
    monkeypatch.setattr(runtime.paths, "ONLINE_SCRATCH", scratch)
    made = []
    real = engine.Engine.run

    def spy(self):
        made.extend(scratch.glob("spill-*/*.blocks"))
        out = real(self)
        made.extend(scratch.glob("spill-*/*.blocks"))
        return out

    monkeypatch.setattr(engine.Engine, "run", spy)
    rng = np.random.default_rng(4)
    r = _stream(rng, 400, uniform_keys, "a", 0.5)
    s = _stream(rng, 400, uniform_keys, "b", 0.5)
    for operator in OPS:
        _check(_run(r, s, 60, operator=operator), r, s, budget=60)
    assert made  # the blocks were written there
    assert not list(scratch.glob("spill-*"))  # and removed with each run


@pytest.mark.parametrize("operator", list(OPS))
def test_rows_carry_their_virtual_time_and_no_reactive_row_follows_the_last_arrival(operator):
    """A pause just before the end leaves disk work when the last tuples arrive: that work is
    the clean-up's, so every online (arriving, reactive) row comes by the last arrival, but
    for the reactive unit under way then (DINER's rule alone would let the disk join run on
    while the last arrivals wait: 73 rows later here)."""
    rng = np.random.default_rng(1)
    r = _stream(rng, 1000, uniform_keys, "a", pause_at=0.97)
    s = _stream(rng, 1000, uniform_keys, "b", pause_at=0.97)
    res = _run(r, s, 30, operator=operator)
    _check(res, r, s, budget=30)
    o = res.output
    last = max(r["t"].max(), s["t"].max())
    unit = 5 * 0.2 + 0.05  # one unit's reads (outer batch of 3, an inner block) and join
    online = o[o["phase"] != "cleanup"]
    assert o["produced_at"].notna().all()
    assert (online["produced_at"] <= last + unit).all()
    assert (o.loc[o["phase"] == "cleanup", "produced_at"] >= last).all()
    arriving = o[o["phase"] == "arriving"]  # an arrival's results come at or after its time
    assert (arriving["produced_at"] >= arriving[["l_t", "r_t"]].max(axis=1) - 1e-9).all()
