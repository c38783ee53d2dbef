"""The engine's new paths on a Spark session, each checked against DuckDB's multiset: shared
by the test on the tests' session (local[2,2]) and the one on ``local_cluster`` (separate
executor JVMs, so state really crosses processes)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from joins.online import operators, run_stream
from joins.oracle import assert_same_rows, oracle_graph, oracle_join
from tests.frames import hot_key_streams as _inputs


def _timed(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return frame.assign(t=rng.integers(0, 60, len(frame)))


ENGINE_PATHS = ("biclique_resize", "relocate_evict", "window_ticks", "mjoin_rescale",
                "biclique_resize_evict", "grid_rescale_evict")


def run_path(spark, path: str) -> None:
    """Run one path on ``spark``'s session and check it against DuckDB's multiset."""
    r, s = _inputs()
    kw: dict = dict(collect_output=True, progress=False, partitions=2)
    if path == "biclique_resize":
        res = run_stream(spark, r, s, operator="join_biclique", joiners=4, batch_size=70,
                         rescale=[(150, (3, 1)), (400, (1, 3))], **kw)
        want = oracle_join(r, s)
        assert res.summary["migrated_tuples"] > 0
    elif path == "relocate_evict":
        res = run_stream(spark, r, s, operator=operators.relocating_shj, joiners=4, groups=16,
                         theta=0.9, batch_size=60, memory_budget_tuples=40, spill="evict", **kw)
        want = oracle_join(r, s)
        assert (res.output["phase"] == "cleanup").any() and res.summary["migrations"] >= 1
    elif path in ("biclique_resize_evict", "grid_rescale_evict"):
        # moves in flight with eviction: the clean-up subtracts the workers' output logs
        op, to = ("join_biclique", [(150, (3, 1)), (400, (1, 3))]) \
            if path == "biclique_resize_evict" else ("static_mid", [(200, (2,)), (500, (8,))])
        r, s = _timed(r, 1), _timed(s, 2)
        res = run_stream(spark, r, s, operator=op, joiners=4, batch_size=70, rescale=to,
                         memory_budget_tuples=30, spill="evict", time="t", window=30, **kw)
        want = oracle_graph({"R": r, "S": s}, [("R", "key", "S", "key")], window=30, time="t",
                            prefixes={"R": "l_", "S": "r_"})
        assert (res.output["phase"] == "cleanup").any() and res.summary["migrated_tuples"] > 0
        assert res.metrics["spilled"].sum() > 0
    elif path == "window_ticks":
        r, s = _timed(r, 1), _timed(s, 2)
        res = run_stream(spark, r, s, operator="static_mid", joiners=4, time="t", tick=5,
                         window=8, batch_size=150, **kw)
        want = oracle_graph({"R": r, "S": s}, [("R", "key", "S", "key")], window=8, time="t",
                            prefixes={"R": "l_", "S": "r_"})
        m = res.metrics
        assert m["expired"].sum() > 0
        assert m["batch"].nunique() == 12 and m["step"].nunique() < 12  # ticks share steps
    else:
        c = _timed(s.rename(columns={"b": "c"}), 3)
        frames = {"A": _timed(r, 1), "B": _timed(s, 2), "C": c}
        res = run_stream(spark, inputs=frames, on="key", operator="mjoin", joiners=4,
                         batch_size=90, time="t", window=20, rescale=[(300, (2,)), (700, (5,))],
                         **kw)
        want = oracle_graph(frames, [("A", "key", "B", "key"), ("B", "key", "C", "key")],
                            window=20, time="t")
        assert res.summary["migrated_tuples"] > 0
    assert_same_rows(res.output, want)
    assert len(res.output) == len(want) == res.summary["outputs"]
