"""Losing an executor during a move and during the clean-up, on ``local_cluster`` (separate
executor JVMs) with ``checkpoint_dir=``: a hash rescale with eviction (a boundary move and the
evicted state's clean-up), BiStream's 2PS scale-out on a full history (a handoff move at a
rate), and the clean-up gathering of an n-way D-CAPE run with relocations and disk pushes.
Each run is exact against DuckDB, or stops with one line: never a wrong answer.

Each case starts a local cluster (about a minute here), so they run in ``make stress``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.stress]
ROOT = Path(__file__).resolve().parents[2]

_RUN = """
import json, sys
import pandas as pd
from joins.online import programs, run_stream
from joins.online.engine import StreamFailure
from runtime.spark_session import get_spark, spark_preset
from tests.online import test_faults_in_moves as case
from tests.online.killing_program import killing

marks, out, ckpt, name = sys.argv[1:5]
spark = get_spark(**spark_preset("local_cluster"))
programs.load = lambda prog: killing(prog, marks, case.CASES[name]["when"])
frames, kw = case.inputs(name)
data = dict(r=frames["R"], s=frames["S"]) if "R" in frames else dict(inputs=frames, on="key")
try:
    res = run_stream(spark, **data, checkpoint_dir=ckpt, collect_output=True, progress=False,
                     partitions=2, checkpoint_every=1, **kw)
except StreamFailure as e:
    print("STOPPED", e)
    raise SystemExit(3)
res.output.to_parquet(out + "/out.parquet")
json.dump({k: int(v) for k, v in res.summary.items() if k in ("migrated_tuples", "spilled")},
          open(out + "/summary.json", "w"))
"""

CASES = {
    "hash_rescale_evict": {"when": "receive"},  # a boundary move sends all in one step
    "twops_scale_out": {"when": "moving"},
    "dcape_cleanup_gather": {"when": "gather"},
}


def inputs(name: str) -> tuple[dict, dict]:
    """The case's inputs and run_stream keywords (shared with the oracle side)."""
    if name == "hash_rescale_evict":
        from tests.online.test_state_moves import _evicting_streams

        r, s = _evicting_streams()
        r, s = r.rename(columns={"k": "key"}), s.rename(columns={"k": "key"})
        return {"R": r, "S": s}, dict(operator="shj", joiners=4, batch_size=60,
                                      memory_budget_tuples=40, spill="evict",
                                      rescale=[(300, 6), (700, 3)])
    if name == "twops_scale_out":
        import numpy as np

        from tests.online.test_bistream import _surge

        rng = np.random.default_rng(0)
        r, s = _surge(rng, "a", 500), _surge(rng, "b", 500)
        return {"R": r, "S": s}, dict(operator="join_biclique", joiners=4, time="t",
                                      tick=60.0, elastic="2ps", capacity=150 * 50.0,
                                      tuple_bytes=(50.0, 50.0))
    from tests.online.test_dcape import _streams

    frames = _streams(5, n=500, skew=True)
    return frames, dict(operator="dcape", joiners=3, time="t", tick=20_000.0,
                        memory_budget_tuples=220, groups=30, adapt="lazy_disk",
                        assign="skewed", min_span=20_000.0)


def _oracle(name: str) -> pd.DataFrame:
    from joins.oracle import oracle_graph

    frames, kw = inputs(name)
    names = list(frames)
    edges = [(names[i], "key", names[i + 1], "key") for i in range(len(names) - 1)]
    two = names == ["R", "S"]
    return oracle_graph(frames, edges, prefixes={"R": "l_", "S": "r_"} if two else None)


@pytest.mark.parametrize("name", list(CASES))
def test_an_executor_lost_in_a_move_or_the_clean_up(tmp_path, name):
    from joins.oracle import assert_same_rows

    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _RUN, str(marks), str(tmp_path),
                           str(tmp_path / "ckpt"), name], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    killed = (marks / "killed").read_text() if (marks / "killed").exists() else ""
    assert killed, f"no executor was killed: {done.stderr[-2000:]}"
    if done.returncode == 3:  # stopped: with one line, never a wrong answer
        stopped = [ln for ln in done.stdout.splitlines() if ln.startswith("STOPPED")]
        assert len(stopped) == 1 and not (tmp_path / "out.parquet").exists()
        pytest.fail(f"{name}: stopped instead of recovering ({stopped[0]}); with "
                    "checkpoint_dir= it must recover")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Lost executor" in done.stderr
    assert_same_rows(pd.read_parquet(tmp_path / "out.parquet"), _oracle(name))
    summary = json.loads((tmp_path / "summary.json").read_text())
    if name != "dcape_cleanup_gather":
        assert summary["migrated_tuples"] > 0, summary
