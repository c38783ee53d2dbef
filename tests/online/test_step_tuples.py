"""Micro-batches sharing a Spark step (``step_tuples``, issue 36): a static run's count-cut
micro-batches, and its event-time ticks, grouped into fewer steps report the same rows per
micro-batch, the same output multiset and DuckDB's join, across windows, bands, eviction with
its clean-up phase, three inputs and a join-biclique."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joins.online import run_stream
from joins.oracle import assert_same_rows, oracle_join
from tests.online.shared_steps import LOCAL_TIME


def _side(rng, n: int, col: str, domain: int, hot: float, nulls: float) -> pd.DataFrame:
    k = rng.integers(0, domain, n).astype(float)
    k[rng.random(n) < hot] = 3.0  # a hot key on both sides
    k[rng.random(n) < nulls] = np.nan
    return pd.DataFrame({"key": k, "t": np.sort(rng.random(n) * 100), col: np.arange(n)})


def _both(r, s, **kw):
    """The run at one micro-batch per step and with steps of up to 5 micro-batches."""
    base = dict(collect_output=True, progress=False, backend="local", batch_size=23, **kw)
    alone = run_stream(None, r, s, **base)
    grouped = run_stream(None, r, s, step_tuples=5 * 23, **base)
    return alone, grouped


def _assert_same(alone, grouped, fewer: bool = True) -> None:
    assert_same_rows(grouped.output, alone.output)
    if alone.metrics.empty:  # no tuple: no micro-batch
        assert grouped.metrics.empty
        return
    cols = [c for c in alone.metrics.columns if c not in LOCAL_TIME]
    key = ["batch", "worker", "phase"]
    pd.testing.assert_frame_equal(
        grouped.metrics[cols].sort_values(key).reset_index(drop=True),
        alone.metrics[cols].sort_values(key).reset_index(drop=True))
    steps = grouped.metrics["step"].nunique()
    assert steps <= alone.metrics["step"].nunique()
    if fewer and alone.metrics["batch"].nunique() > 5:
        assert steps < alone.metrics["step"].nunique()
    # a step's wall time is split evenly among its micro-batches, not repeated in each: the
    # micro-batches' walls add up to at most the run's own (repeated, they add up to more)
    m = grouped.metrics
    for _, rows in m.groupby("step"):
        assert rows["batch_wall_seconds"].nunique() == 1
    per_batch = m.groupby("batch")["batch_wall_seconds"].first().sum()
    assert per_batch <= grouped.summary["local_wall_time"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nr=st.integers(0, 120), ns=st.integers(0, 120), domain=st.integers(1, 30),
       operator=st.sampled_from(["static_mid", "join_biclique", "shj"]),
       band=st.sampled_from([None, 1.0]), hot=st.sampled_from([0.0, 0.3]),
       nulls=st.sampled_from([0.0, 0.1]), seed=st.integers(0, 3))
def test_property_count_cut_steps_change_no_count(nr, ns, domain, operator, band, hot, nulls,
                                                   seed):
    if operator == "shj":
        band = None  # hash routing is an equi-join's
    rng = np.random.default_rng(seed)
    r, s = _side(rng, nr, "a", domain, hot, nulls), _side(rng, ns, "b", domain, hot, nulls)
    alone, grouped = _both(r, s, operator=operator, joiners=4, on="key", band=band, seed=seed)
    _assert_same(alone, grouped)
    want = oracle_join(r, s, band=band) if band is not None else oracle_join(r, s)
    assert_same_rows(grouped.output, want)


def test_eviction_and_its_clean_up_across_shared_steps():
    """A memory budget evicts within the shared steps; the clean-up after the stream is its
    own micro-batch, numbered after the stream's."""
    rng = np.random.default_rng(5)
    r, s = _side(rng, 300, "a", 20, 0.2, 0.05), _side(rng, 250, "b", 20, 0.2, 0.05)
    alone, grouped = _both(r, s, operator="static_mid", joiners=4, on="key",
                           memory_budget_tuples=15, spill="evict")
    _assert_same(alone, grouped)
    assert (grouped.metrics["phase"] == "cleanup").any()
    assert_same_rows(grouped.output, oracle_join(r, s))


def test_windowed_ticks_share_larger_steps():
    """Event-time ticks of a windowed run shared steps up to ``batch_size`` tuples; with
    ``step_tuples`` up to that many: the same expiry per tick."""
    rng = np.random.default_rng(7)
    r, s = _side(rng, 400, "a", 15, 0.1, 0.0), _side(rng, 400, "b", 15, 0.1, 0.0)
    alone, grouped = _both(r, s, operator="shj", joiners=4, on="key", time="t", tick=2.0,
                           window=10.0)
    _assert_same(alone, grouped)
    assert grouped.metrics["batch"].nunique() == 50


def test_three_inputs_share_steps():
    rng = np.random.default_rng(11)
    frames = {nm: _side(rng, 150, "v", 12, 0.2, 0.05) for nm in ("A", "B", "C")}
    base = dict(on="key", operator="mjoin", joiners=3, collect_output=True, progress=False,
                backend="local", batch_size=31)
    alone = run_stream(None, inputs=frames, **base)
    grouped = run_stream(None, inputs=frames, step_tuples=4 * 31, **base)
    _assert_same(alone, grouped)


def test_a_deciding_policy_keeps_one_count_cut_batch_per_step():
    """DYNAMIC decides inside micro-batches: its count-cut batches never share a step."""
    rng = np.random.default_rng(2)
    r, s = _side(rng, 300, "a", 50, 0.0, 0.0), _side(rng, 30, "b", 50, 0.0, 0.0)
    alone, grouped = _both(r, s, operator="dynamic", joiners=4, on="key")
    assert grouped.metrics["step"].nunique() == alone.metrics["step"].nunique()
    _assert_same(alone, grouped, fewer=False)


def test_step_tuples_must_be_positive():
    r = pd.DataFrame({"key": [1.0]})
    with pytest.raises(ValueError, match="step_tuples"):
        run_stream(None, r, r, operator="shj", joiners=1, backend="local", progress=False,
                   step_tuples=0)
