"""The single-site operators' fast bookkeeping (issue 36) against the direct one it replaced,
kept here as the reference: RPJ's and XJoin's task table kept per bucket against the whole
table rebuilt at every decision (and a merge's new pairs counted group by group); the hash
baselines' counted clean-up (HMJ, RPJ, XJoin) against its merges run one by one; DINER's
memory moved in place and its per-batch pair-count index against ``np.insert`` arrays and
:func:`~joins.online.pair_counts.pairs_not_met` per block. Every metric that is not a time is
equal row by row, the output rows are equal (with their phase and virtual time), and the
output is the DuckDB oracle's join."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from joins.online import run_stream
from joins.online.pair_counts import NotMet, pairs_not_met, pairs_not_produced
from joins.online.programs import PROGRAMS
from joins.online.programs.diner import LW, MD, UP, Diner
from joins.online.programs.hmj import HashMerge
from joins.online.programs.rpj import RateBasedProgressive
from joins.online.programs.xjoin import XJoin
from joins.oracle import assert_same_rows, oracle_join

TIMES = ("seconds", "cpu_seconds", "batch_wall_seconds")


class MergeByMerge:
    """The clean-up as first written: every merge read, sorted, counted and written."""

    def _merge_counted(self, ws, cfg, c, out, j: int) -> None:
        return  # HashMerge.finish then runs the merges one by one


class RebuiltHmj(MergeByMerge, HashMerge):
    pass


class RebuiltTasks(MergeByMerge):
    """RPJ's reactive task choice as first written: every task of every bucket with segments
    listed at each decision, the highest (rate, expected output, candidates) first, ties to
    the first listed (XJoin: passes only, by candidates)."""

    def _sigma(self, ws, j: int) -> float:
        if ws.probed[j]:
            return ws.matched[j] / ws.probed[j]
        total = ws.probed.sum()
        return ws.matched.sum() / total if total else 1.0

    def _candidates(self, ws, i: int, j: int) -> int:
        mem, hist = ws.order[1 - i].get(j), ws.flushed[i].get(j)
        if not mem or not mem[2] or not hist:
            return 0
        ats = np.fromiter(mem[2], np.int64, len(mem[2]))
        dts, cum = np.array(hist[0], np.int64), np.array(hist[1], np.int64)
        last = np.where(ats <= ws.last_pass[i, j], ws.last_pass[i, j], -1)
        left_before = cum[np.searchsorted(dts, ats, "left")]
        passed = cum[np.searchsorted(dts, last, "right")]
        return int(np.maximum(left_before - passed, 0).sum())

    def _all_tasks(self, ws) -> list:
        tasks = []
        for j, segs in ws.segments.items():
            sigma = self._sigma(ws, j)
            for i in (0, 1):
                if not ws.count[1 - i, j]:
                    continue
                n = self._candidates(ws, i, j)
                if n:
                    cost = sum(self._blocks(ws, i, ids[i]) for ids in segs) * \
                        (self.c_read + self.c_join)
                    tasks.append((sigma * n / max(cost, 1e-12), sigma * n, n, ("pass", i, j)))
            if self.merges and len(segs) > 1:
                group = segs[:self.fan_in]
                a = [ws.disk[0].sizes[g[0] - 1] if g[0] else 0 for g in group]
                b = [ws.disk[1].sizes[g[1] - 1] if g[1] else 0 for g in group]
                n = sum(a) * sum(b) - sum(x * y for x, y in zip(a, b, strict=True))
                if n:
                    blocks = sum(self._blocks(ws, r, g[r]) for g in group for r in (0, 1))
                    cost = blocks * (self.c_read + self.c_join + self.c_write)
                    tasks.append((sigma * n / max(cost, 1e-12), sigma * n, n, ("merge", j)))
        return tasks

    def work_left(self, ws):
        return bool(self._all_tasks(ws))

    def _best(self, ws):
        tasks = self._all_tasks(ws)
        if not tasks:
            return None
        rank = (lambda t: (t[0], t[1], t[2])) if self.merges else (lambda t: t[2])
        return max(tasks, key=rank)[3]

    def _count_new(self, a, oa, b, ob, width=0.0):
        def count(x, y):
            return pairs_not_produced(x["key"], x["ats"], x["dts"], x["last"],
                                      y["key"], y["ats"], y["dts"], y["last"])

        return count(a, b) - sum(count(a[oa == g], b[ob == g]) for g in np.unique(oa))


class RebuiltRpj(RebuiltTasks, RateBasedProgressive):
    pass


class RebuiltXJoin(RebuiltTasks, XJoin):
    pass


class InsertMemory:
    """DINER's memory as first written: four arrays, each copied by every insert."""

    def __init__(self) -> None:
        self.key, self.tid = np.zeros(0), np.zeros(0, np.int64)
        self.ats, self.bit = np.zeros(0, np.int64), np.zeros(0, bool)

    @property
    def n(self) -> int:
        return len(self.key)

    def __len__(self) -> int:
        return len(self.key)

    def insert(self, key: float, tid: int, ats: int, bit: bool) -> None:
        i = int(np.searchsorted(self.key, key, "right"))
        self.key, self.tid = np.insert(self.key, i, key), np.insert(self.tid, i, tid)
        self.ats, self.bit = np.insert(self.ats, i, ats), np.insert(self.bit, i, bit)

    def take(self, idx: np.ndarray):
        out = self.key[idx], self.tid[idx], self.ats[idx]
        keep = np.ones(len(self.key), bool)
        keep[idx] = False
        self.key, self.tid, self.ats, self.bit = (self.key[keep], self.tid[keep],
                                                  self.ats[keep], self.bit[keep])
        return out

    def matches(self, key: float, width: float) -> tuple[int, int]:
        return (int(np.searchsorted(self.key, key - width, "left")),
                int(np.searchsorted(self.key, key + width, "right")))


class RebuiltDiner(Diner):
    """DINER with :class:`InsertMemory`, Alg 3's regions by arrays and, per unit, the inner
    block read and counted by :func:`pairs_not_met`."""

    def new_worker(self, wid):
        ws = super().new_worker(wid)
        ws.mem = [InsertMemory(), InsertMemory()]
        return ws

    def _statistics(self, ws, rel, key, n, matched):
        ws.joins[rel, self._region(ws, rel, np.array([key]))[0]] += n
        if n and matched[0] == matched[-1]:
            ws.joins[1 - rel, self._region(ws, 1 - rel, matched[:1])[0]] += n
        elif n:
            ws.joins[1 - rel] += np.bincount(self._region(ws, 1 - rel, matched), minlength=3)

    def _join_inner(self, ws, cfg, c, out, inner, block_id, phase):
        r, block = ws.rnl, inner.read(block_id)
        if cfg.want_pairs or cfg.pairs_dir or float(getattr(cfg.kernel, "width", 0.0) or 0.0):
            self._join_blocks(ws, cfg, c, out, r.loaded, block, r.outer, phase)
            return
        c["probes"] += len(block)
        n = pairs_not_met(block["key"], block["ats"], block["dts"], r.loaded["key"],
                          r.loaded["ats"], r.loaded["dts"])
        if n:
            out.add(n, phase=phase)


REFERENCE = {"rpj": RebuiltRpj, "xjoin": RebuiltXJoin, "diner": RebuiltDiner,
             "hmj": RebuiltHmj}
PARAMS = {"rpj": dict(tups_per_block=8, n_part=60, fan_in=3, n_flush=5),
          "rpj_few": dict(tups_per_block=8, n_part=7, fan_in=3),
          "xjoin": dict(tups_per_block=8, n_part=60, fan_in=3),
          "hmj": dict(tups_per_block=8, n_part=7, fan_in=3),
          "diner": dict(tups_per_block=8, max_outer_mem=3, max_new_arr=15)}


def _stream(rng, n: int, keys, col: str, pause_at: float) -> pd.DataFrame:
    t = np.cumsum(rng.exponential(10.0, n))
    t[int(pause_at * n):] += 800.0
    return pd.DataFrame({"key": keys(rng, n), "t": t, col: np.arange(n) % 7})


def _run(monkeypatch, operator: str, r, s, budget: int, reference: bool, collect: bool, **kw):
    with monkeypatch.context() as m:
        if reference:
            cls = REFERENCE[operator]
            m.setitem(PROGRAMS, operator, f"{__name__}:{cls.__name__}")
        return run_stream(None, r, s, operator=operator, joiners=1, time="t", tick=400.0,
                          memory_budget_tuples=budget, collect_output=collect, progress=False,
                          backend="local", wait_thresh=25.0, **kw)


def _rows(res) -> pd.DataFrame:
    out = res.output
    return out.sort_values(list(out.columns), kind="stable").reset_index(drop=True)


@pytest.mark.parametrize("params", list(PARAMS))
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("collect", [True, False])
def test_fast_bookkeeping_gives_the_reference_metrics_and_rows(monkeypatch, params, seed,
                                                               collect):
    operator = params.removesuffix("_few")
    rng = np.random.default_rng(36 + seed)
    r = _stream(rng, 700, lambda g, n: g.integers(0, 40, n), "a", 0.4 + 0.2 * seed)
    s = _stream(rng, 600, lambda g, n: np.minimum(g.zipf(1.3 + 0.3 * seed, n), 500), "b", 0.5)
    budget = (40, 90, 200)[seed]
    new, ref = (_run(monkeypatch, operator, r, s, budget, reference, collect, seed=seed,
                     **PARAMS[params]) for reference in (False, True))
    if operator in ("rpj", "xjoin"):
        assert new.metrics["passes"].max() > 0
    if operator in ("rpj", "hmj"):
        assert new.metrics["merges"].max() > 0
    assert new.metrics["reactive_episodes"].max() > 0
    pd.testing.assert_frame_equal(new.metrics.drop(columns=list(TIMES)),
                                  ref.metrics.drop(columns=list(TIMES)), check_exact=True)
    expected = oracle_join(r, s)
    assert new.metrics["outputs"].sum() == len(expected)
    if collect:
        pd.testing.assert_frame_equal(_rows(new), _rows(ref), check_exact=True)
        assert_same_rows(new.output, expected)


def test_scalar_region_is_the_array_region():
    """Alg 3's region of one key (DINER's arrivals) is the region of the arrays."""
    d = Diner()
    ws = d.new_worker(0)
    ws.lw, ws.up = [2.0, -np.inf], [5.0, np.inf]
    keys = np.array([-1.0, 2.0, 3.0, 4.99, 5.0, 7.0])
    for rel in (0, 1):
        want = d._region(ws, rel, keys)
        assert [d._region_of(ws, rel, float(k)) for k in keys] == list(want)
    assert set(d._region(ws, 0, keys)) == {UP, LW, MD}


@pytest.mark.parametrize("seed", range(200))
def test_not_met_index_counts_as_pairs_not_met(seed):
    """One b side indexed once, many a sides: the counts of pairs_not_met, also with a's
    times past b's, keys b lacks, empty sides."""
    rng = np.random.default_rng(seed)
    na, nb, keys, t = rng.integers(0, 30), rng.integers(0, 40), rng.integers(1, 8), 60
    kb = rng.integers(0, keys, nb).astype(float)
    ats_b = rng.integers(0, t, nb)
    dts_b = ats_b + rng.integers(0, t, nb)
    index = NotMet(kb, ats_b, dts_b)
    for _ in range(3):
        ka = rng.integers(0, keys + 2, na).astype(float)
        ats_a = rng.integers(0, 3 * t, na)
        dts_a = ats_a + rng.integers(0, 3 * t, na)
        assert index.count(ka, ats_a, dts_a) == \
            pairs_not_met(ka, ats_a, dts_a, kb, ats_b, dts_b)
