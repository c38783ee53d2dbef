import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datagen import orders
from datagen.errors import GeneratorError
from datagen.orders.fluct import phases
from tests.examples import examples


def squall_interchanging(n1: int, n2: int, k: int) -> list[int]:
    """Tuple-at-a-time transcription of Squall's StormInterchangingDataSource.nextTuple
    (relation 1 = our R, relation 2 = our S): the reference for the vectorised order."""
    out, sent1, sent2, left1, left2 = [], 0, 0, n1, n2
    current, next_to_stop, pointer = 2, 1, -1
    eof1 = eof2 = False
    while not (eof1 and eof2):
        if eof1 or eof2:
            rel = 2 if eof1 else 1
            if (left2 if rel == 2 else left1) == 0:
                eof1 = eof2 = True
                continue
        else:
            rel = current
            if (left2 if rel == 2 else left1) == 0:
                eof1, eof2 = eof1 or rel == 1, eof2 or rel == 2
                continue
        out.append(rel)
        if rel == 1:
            left1, sent1 = left1 - 1, sent1 + 1
        else:
            left2, sent2 = left2 - 1, sent2 + 1
        if not (eof1 or eof2):
            pointer += 1
            if pointer == next_to_stop:
                pointer = 0
                if rel == 2:
                    next_to_stop, current = sent2 * k - sent1, 1
                else:
                    next_to_stop, current = sent1 * k - sent2, 2
    return out


@pytest.mark.parametrize("n_r,n_s,k", [(300, 500, 2), (1000, 1000, 4), (50, 3000, 6),
                                       (7, 0, 2), (0, 5, 8)])
def test_fluct_matches_squall_source(n_r, n_s, k):
    got = orders.arrival("fluct", n_r, n_s, seed=0, k=k)
    ref = np.array(squall_interchanging(n_r, n_s, k)) == 1
    np.testing.assert_array_equal(got, ref)


def test_fluct_ratio_alternates_between_k_and_inverse():
    runs = phases(10_000, 10_000, k=4)
    assert runs[:4] == [("S", 2), ("R", 8), ("S", 30), ("R", 120)]
    sent = {"R": 0, "S": 2}
    for side, n in runs[1:-2]:  # after the 2-tuple opening; the last runs are cut by exhaustion
        sent[side] += n
        other = "S" if side == "R" else "R"
        assert sent[side] == 4 * sent[other]


def test_random_interleave_exact_counts_seeded():
    a = orders.arrival("random", 600, 400, seed=5)
    assert a.dtype == bool and a.sum() == 600 and len(a) == 1000
    np.testing.assert_array_equal(a, orders.arrival("random", 600, 400, seed=5))
    assert not np.array_equal(a, orders.arrival("random", 600, 400, seed=6))
    # no long one-sided runs: the first half holds about half of R
    assert 250 < a[:500].sum() < 350


def test_random_interleave_with_given_share_then_rest():
    a = orders.arrival("random", 2000, 2000, seed=1, p_r=0.8)
    assert a.sum() == 2000
    assert 0.75 < a[:2000].mean() < 0.85  # R at 80% until R runs out ...
    assert not a[-1000:].any()  # ... then only S


def test_rate_schedule_constant_exact_times():
    arr = orders.compute_arrival("rate", 6, 3, seed=0, times=[0, 2], rate_r=[2, 1],
                                 rate_s=[1, 0.5])
    # R: 0, .5, 1, 1.5, then 1 tuple/s from t=2: 2, 3 ; S: 0, 1, 2
    expect = [(0, True), (0, False), (0.5, True), (1, True), (1, False), (1.5, True),
              (2, True), (2, False), (3, True)]
    np.testing.assert_allclose(arr.event_time, [t for t, _ in expect])
    np.testing.assert_array_equal(arr.is_r, [r for _, r in expect])


def test_rate_schedule_pause_and_poisson_rate():
    arr = orders.compute_arrival("rate", 4, 0, seed=0, times=[0, 1, 5], rate_r=[2, 0, 2],
                                 rate_s=[1, 1, 1])
    np.testing.assert_allclose(arr.event_time, [0, 0.5, 5, 5.5])  # nothing during the pause
    arr = orders.compute_arrival("rate", 20_000, 20_000, seed=3, times=[0], rate_r=[1000],
                                 rate_s=[4000], process="poisson")
    t_r, t_s = arr.event_time[arr.is_r], arr.event_time[~arr.is_r]
    assert t_r[-1] == pytest.approx(20.0, rel=0.03) and t_s[-1] == pytest.approx(5.0, rel=0.03)
    assert np.all(np.diff(arr.event_time) >= 0)


@pytest.mark.parametrize("order,kw,msg", [
    ("sorted", {}, "valid: fluct, intervals, random, rate"),
    ("fluct", {"k": 1}, "k must be > 1"),
    ("fluct", {"kk": 2}, "valid: first, initial, k"),
    ("rate", {"rate_r": [1, 2]}, "one rate per entry"),
    ("rate", {"rate_r": [0]}, "must be > 0"),
    ("random", {"p_r": 1.5}, r"\[0, 1\]"),
])
def test_bad_orders_name_the_problem(order, kw, msg):
    with pytest.raises(GeneratorError, match=msg):
        orders.arrival(order, 10, 10, seed=0, **kw)


@settings(max_examples=examples(25), deadline=None)
@given(n_r=st.integers(0, 300), n_s=st.integers(0, 300), seed=st.integers(0, 2**32),
       which=st.sampled_from(["random", "fluct2", "fluct3.5", "rate"]))
def test_every_order_is_a_valid_interleave(n_r, n_s, seed, which):
    kw = {"fluct2": {"k": 2}, "fluct3.5": {"k": 3.5}, "rate": {"process": "poisson"}}.get(which, {})
    name = "fluct" if which.startswith("fluct") else which
    arr = orders.compute_arrival(name, n_r, n_s, seed, **kw)
    assert arr.is_r.shape == (n_r + n_s,) and arr.is_r.sum() == n_r
