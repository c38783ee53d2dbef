"""Unit tests without Spark: hashing, kernel, controller (Alg 2), layouts and migration plans."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joins.online import migration
from joins.online.controller import DynamicGrid, best_mapping, ilf, ilf_opt
from joins.online.hashing import part_of, tuple_u
from joins.online.kernel import ProbeResult, SideStore, probe
from joins.online.layouts import BicliqueLayout, GridLayout, HashLayout
from tests.examples import examples


def test_parts_nest_when_n_doubles_and_routing_is_reproducible():
    u = tuple_u(3, np.ones(5000, bool), np.arange(5000))
    assert np.array_equal(u, tuple_u(3, np.ones(5000, bool), np.arange(5000)))
    for n in (1, 2, 4, 8, 16):
        assert np.array_equal(part_of(u, 2 * n) // 2, part_of(u, n))
    counts = np.bincount(part_of(u, 8), minlength=8)
    assert counts.min() > 500  # roughly uniform rows


keys = st.lists(st.one_of(st.integers(-5, 5).map(float), st.just(float("nan"))), max_size=40)


@settings(max_examples=examples(60), deadline=None)
@given(stored=keys, probes=keys, band=st.sampled_from([None, 0.0, 1.0, 2.5]))
def test_probe_matches_brute_force(stored, probes, band):
    a = SideStore(np.array(stored, float), np.arange(len(stored)), np.arange(len(stored)),
                  np.zeros(len(stored), np.uint32))
    half = len(stored) // 2
    b = a.select(np.arange(len(a)) < half)
    b.insert(a.select(np.arange(len(a)) >= half))  # insert keeps the index sorted
    q = SideStore(np.array(probes, float), 100 + np.arange(len(probes)),
                  100 + np.arange(len(probes)), np.zeros(len(probes), np.uint32))
    out = ProbeResult()
    probe(b, q, True, band, out, want_pairs=True)
    got = sorted(zip(*out.pairs(), strict=True))
    w = 0.0 if band is None else band
    want = sorted((100 + i, j) for i, x in enumerate(probes) for j, y in enumerate(stored)
                  if not np.isnan(x) and not np.isnan(y) and abs(x - y) <= w)
    assert got == want
    counted = ProbeResult()
    probe(b, q, True, band, counted, want_pairs=False)
    assert counted.count == len(want)


def test_fig2_ilf_and_best_mapping():
    # catalogue T1: |R| = 1 GB, |S| = 64 GB, J = 64
    assert ilf(1, 64, 8, 8) == pytest.approx(8.125)
    assert 64 * ilf(1, 64, 8, 8) == pytest.approx(520)
    assert ilf(1, 64, 1, 64) == pytest.approx(2)
    assert best_mapping(1, 64, 64) == (1, 64)
    assert best_mapping(64, 1, 64) == (64, 1)
    assert best_mapping(10, 10, 16) == (4, 4)
    assert best_mapping(10, 10, 16, current=(4, 4)) == (4, 4)


def test_doubling_trigger_fires_at_the_exact_tuple():
    c = DynamicGrid(16, initial=(4, 4), warmup=10)
    is_r = np.array([True, False] * 20)
    f = c.scan(is_r, 0)
    assert f == 9  # the 10th tuple reaches the warm-up
    c.decide(9)
    assert (c.R, c.S) == (5, 5)
    # next fire: when either side has doubled (|dR| >= 5 or |dS| >= 5), counting the trigger
    f2 = c.scan(is_r[10:], 10)
    assert f2 == 8  # 5th R tuple after the decision (R at indices 10,12,14,16,18)
    c.decide(18)
    assert (c.R, c.S) == (10, 9)


def test_eps_fraction_and_deferral_while_migrating():
    c = DynamicGrid(4, initial=(2, 2), eps=0.5, warmup=4)
    is_r = np.ones(20, bool)
    assert c.scan(is_r, 0) == 3
    c.decide(3)
    c.observe(is_r[4:8], 4)  # a migration runs: counts accumulate, no decision
    assert c.dR == 4
    assert c.scan(is_r[8:], 8) == 0  # fires on the first tuple after the migration


def test_sampled_controller_counts_multiples_of_j():
    c = DynamicGrid(8, initial=(2, 4), controller="sampled", warmup=10**9)
    c.observe(np.ones(4000, bool), 0)
    assert c.dR % 8 == 0 and 0.8 * 4000 < c.dR < 1.2 * 4000  # unbiased estimate


def test_decide_on_previous_reading():
    c = DynamicGrid(16, initial=(4, 4), warmup=1, decide_on="previous")
    is_r = np.zeros(10, bool)
    c.scan(is_r, 0)
    assert c.decide(0).layout is None  # previous totals are (0, 0): keep the mapping
    c2 = DynamicGrid(16, initial=(4, 4), warmup=1)
    c2.scan(is_r, 0)
    assert c2.decide(0).layout.mapping == (1, 16)


@pytest.mark.parametrize("joiners", [2, 4, 8, 16, 32])
def test_lemma_4_3_bound_by_brute_force(joiners):
    """ILF under the mapping chosen at the last decision stays within 1.25 ILF* until the
    next trigger (|dR| <= |R|, |dS| <= |S|), for 1/J <= |R|/|S| <= J (Thm 4.1)."""
    worst = 0.0
    sizes = range(1, 41)
    for r, s in itertools.product(sizes, sizes):
        if not (1 / joiners <= r / s <= joiners):
            continue
        n, m = best_mapping(r, s, joiners)
        dr, ds = np.arange(r + 1)[:, None], np.arange(s + 1)[None, :]
        now = (r + dr) / n + (s + ds) / m
        worst = max(worst, float((now / ilf_opt(r + dr, s + ds, joiners)).max()))
    assert worst <= 1.25 + 1e-12
    if joiners >= 4:
        assert worst > 1.2  # the bound is tight (Lemma 4.3's vertex)


def test_pairwise_exchange_fig3():
    """(8,2) -> (4,4), J = 16: partners 1<->3, 2<->4, 5<->7, ... swap their R; no S moves;
    every joiner sends |R|/8 (catalogue 2.8, T2)."""
    old = GridLayout.initial(8, 2)
    new = old.halve_rows()
    assert new.mapping == (4, 4)
    rng = np.random.default_rng(0)
    is_r = rng.random(20000) < 0.5
    u = tuple_u(0, is_r, np.arange(len(is_r)))
    key = np.zeros(len(is_r))
    plan = migration.plan(old, new, is_r, key, u)
    pairs = {(0, 2), (2, 0), (1, 3), (3, 1)}
    assert pairs <= set(plan)
    assert all(a // 4 == b // 4 and abs(a - b) == 2 for a, b in plan)
    assert all(v[1] == 0 for v in plan.values())  # no S sent
    rows_r = np.bincount(part_of(u[is_r], 8), minlength=8)
    for (src, _), (nr, _) in plan.items():
        assert nr == rows_r[old.rows[src]]  # its whole R row (|R|/8)
    assert len(plan) == 16
    assert sum(v[0] for v in plan.values()) == 2 * is_r.sum()  # |R|/4 per pair, both ways


def _holders_after(old, new, plan_is_r, key, u):
    """Simulate the plan: each worker's tuple set after the migration."""
    out = {}
    for w in new.workers:
        for rel in (True, False):
            m = plan_is_r == rel
            keep = new.holds(rel, key[m], u[m], int(w))
            out[(int(w), rel)] = int(keep.sum())
    return out


@pytest.mark.parametrize("change", ["jump", "scale_out", "scale_in", "back"])
def test_every_needed_tuple_has_one_sender(change):
    rng = np.random.default_rng(1)
    is_r = rng.random(5000) < 0.3
    u = tuple_u(1, is_r, np.arange(5000))
    key = rng.integers(0, 50, 5000).astype(float)
    old = GridLayout.initial(8, 2) if change != "scale_in" else GridLayout.initial(4, 4)
    new = {"jump": lambda: old.regrid(1, 16), "scale_out": old.scale_out,
           "scale_in": old.scale_in, "back": lambda: old.regrid(2, 8)}[change]()
    plan = migration.plan(old, new, is_r, key, u)
    got: dict = {}
    for (src, dest), (nr, ns) in plan.items():
        assert old.is_active(src)
        got[(dest, True)] = got.get((dest, True), 0) + nr
        got[(dest, False)] = got.get((dest, False), 0) + ns
    for w in new.workers:
        for rel in (True, False):
            m = is_r == rel
            need = new.holds(rel, key[m], u[m], int(w))
            if old.is_active(int(w)):
                need &= ~old.holds(rel, key[m], u[m], int(w))
            assert got.get((int(w), rel), 0) == need.sum()


def test_multistep_jump_moves_as_much_as_the_steps():
    rng = np.random.default_rng(2)
    is_r = rng.random(8000) < 0.5
    u = tuple_u(2, is_r, np.arange(8000))
    key = np.zeros(8000)
    a = GridLayout.initial(8, 8)
    direct = migration.plan(a, a.regrid(2, 32), is_r, key, u)
    b = a.halve_rows()
    step1 = migration.plan(a, b, is_r, key, u)
    step2 = migration.plan(b, b.halve_rows(), is_r, key, u)
    total = lambda p: sum(sum(v) for v in p.values())  # noqa: E731
    assert total(direct) == total(step1) + total(step2)


def test_hash_and_biclique_layouts_route_each_pair_once():
    rng = np.random.default_rng(3)
    n = 300
    is_r = rng.random(n) < 0.5
    key = rng.integers(0, 10, n).astype(float)
    u = tuple_u(0, is_r, np.arange(n))
    for lay in (HashLayout.initial(5, 17), BicliqueLayout(3, 4), GridLayout.initial(2, 4)):
        t, w, role = lay.route(is_r, key, u)
        stored = {(int(a), int(b)) for a, b, c in zip(t, w, role, strict=True) if c & 1}
        probed = {(int(a), int(b)) for a, b, c in zip(t, w, role, strict=True) if c & 2}
        for i, j in itertools.product(np.flatnonzero(is_r)[:30], np.flatnonzero(~is_r)[:30]):
            if key[i] != key[j]:
                continue
            # the pair meets where the later tuple probes the earlier one's stored copy
            later, earlier = (i, j) if i > j else (j, i)
            meets = [x for x in lay.workers if (earlier, x) in stored and (later, x) in probed]
            assert len(meets) == 1, (lay.kind, i, j)
