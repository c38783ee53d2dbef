"""Points of a one-core kind two at a time (``jobs``): the same rows as one at a time, the same
failure paths; every other kind one at a time."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from experiments import kinds
from experiments.config import compose
from experiments.parallel import idle_cores, run_parallel
from experiments.results import compare_counts, read_results
from experiments.run import UsageError, run_point, sweep_jobs, sweep_plan
from runtime.paths import ROOT
from tests.experiments import fake_kind

SCRIPTED = "tests.experiments.fake_kind:run_point_scripted"


def test_jobs_two_only_for_one_core_kinds_on_two_idle_cores():
    one_core = next(iter(kinds.ONE_CORE_KINDS))
    assert one_core == "single_site_join"

    def jobs(setting, kind=one_core, points=10, cpus=2, idle=2.0):
        return sweep_jobs(setting, kind, points, cpus=cpus, idle=lambda: idle)[0]

    assert jobs("auto") == 2
    assert jobs("auto", cpus=8, idle=8.0) == 2
    assert jobs("auto", cpus=1, idle=1.0) == 1
    assert jobs("auto", points=1) == 1  # nothing to run beside it
    assert jobs("1") == 1  # jobs=1 forces one at a time
    assert jobs(3) == 2  # never more than the cores
    assert jobs("auto", idle=None) == 2  # idle cores unknown (not Linux): the cores count
    # other work holds a core: auto runs one at a time, a number is taken as given
    assert jobs("auto", idle=1.0) == 1 and jobs("auto", idle=1.6) == 1
    assert jobs("auto", idle=1.8) == 2 and jobs("2", idle=0.5) == 2
    assert "other work keeps the cores busy" in sweep_jobs(
        "auto", one_core, 10, cpus=2, idle=lambda: 1.0)[1]
    for kind in set(kinds.KINDS) - kinds.ONE_CORE_KINDS:  # they use every core
        assert jobs("auto", kind, cpus=8, idle=8.0) == jobs("4", kind, cpus=8, idle=8.0) == 1
    assert "use every core" in sweep_jobs("2", "batch_join", 10, cpus=2)[1]
    for bad in ("0", "two", "-1"):
        with pytest.raises(UsageError, match="jobs must be auto or a number"):
            sweep_jobs(bad, one_core)


def test_the_sweep_plan_says_how_many_points_run_at_once(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("experiments.parallel.idle_cores", lambda: 2.0)
    base = ["scale=tiny", f"results_root={tmp_path}"]
    assert sweep_plan(["figure=diner/fig17", *base])[2:] == ("single_site_join", 2)
    assert sweep_plan(["figure=diner/fig17", "jobs=1", *base])[3] == 1
    assert sweep_plan(["figure=diner/fig17", "point.series=diner", "point.x=0.1", *base])[3] == 1
    capsys.readouterr()
    assert sweep_plan(["figure=amjoin/fig5", "jobs=2", *base])[2:] == ("batch_join", 1)
    assert "jobs=2: batch_join points use every core; running 1 point at a time" in \
        capsys.readouterr().out
    with pytest.raises(UsageError, match="one value"):
        sweep_plan(["figure=diner/fig17", "jobs=1,2", *base])


def test_idle_cores_reads_the_machine():
    free = idle_cores(0.2)
    assert free is None or 0.0 <= free <= (os.cpu_count() or 1)


def _points(root, series: list[str], xs: list[float]) -> list[tuple[int, object]]:
    cfgs = [compose(["figure=amjoin/fig5", "scale=tiny", f"results_root={root}",
                     f"point.series={s}", f"point.x={x}"]) for s in series for x in xs]
    return list(enumerate(cfgs))


def _counts(root) -> pd.DataFrame:
    return read_results(root, "amjoin/fig5")


@pytest.mark.slow
def test_two_workers_write_the_rows_one_at_a_time_writes(monkeypatch, tmp_path, capfd):
    series, xs = ["hash_join", "spark3_join", "broadcast_join"], [0.0, 0.5]
    monkeypatch.setitem(kinds.KINDS, "batch_join", "tests.experiments.fake_kind:run_point")
    seq = tmp_path / "seq"
    for num, cfg in _points(seq, series, xs):
        run_point(cfg, num, 6)
    capfd.readouterr()
    par = tmp_path / "par"
    assert run_parallel(_points(par, series, xs), 6, jobs=2, target=SCRIPTED) == 0
    out = capfd.readouterr().out
    old, new = _counts(seq), _counts(par)
    compared, differ = compare_counts(old, new)
    assert compared == 4 and not differ and len(old) == len(new) == 6  # 2 times left out
    cols = ["series", "x", "metric", "value", "status", "config_hash", "point_id"]
    key = ["series", "x", "metric"]
    assert old[cols].sort_values(key).reset_index(drop=True).equals(
        new[cols].sort_values(key).reset_index(drop=True))
    # a failing point is a result (status error), and the sweep went on
    assert set(new[new.series == "spark3_join"].status) == {"error"}
    assert set(new[new.series == "broadcast_join"].status) == {"oom"}
    for k in range(1, 7):  # each point's lines, whole, with its number of the sweep
        assert out.count(f"[{k}/6] amjoin/fig5 ") == 2
    assert "ok in" in out and "error in" in out
    # finished points are skipped in a worker too
    assert run_parallel(_points(par, ["hash_join"], xs), 2, jobs=2, target=SCRIPTED) == 0
    assert capfd.readouterr().out.count("done already") == 2


@pytest.mark.slow
def test_a_dead_worker_is_replaced_and_a_raising_point_stops_the_sweep(tmp_path, capfd):
    fake_kind.CALLS.clear()
    # tree_join's worker dies mid-point: no result, the others still run, the exit code is 1
    points = _points(tmp_path, ["tree_join", "hash_join"], [0.0, 0.5])
    assert run_parallel(points, 4, jobs=2, target=SCRIPTED) == 1
    err = capfd.readouterr().err
    assert "[1/4] worker" in err and "died (exit code 3)" in err and "[2/4] worker" in err
    assert set(_counts(tmp_path).series) == {"hash_join"} and len(_counts(tmp_path)) == 2
    # an exception out of run_point (here an unknown series) stops handing out points
    bad = compose(["figure=amjoin/fig5", "scale=tiny", f"results_root={tmp_path / 'b'}",
                   "point.series=hash_join", "point.x=0.0"])
    bad.point.series = "no_such_join"
    later = _points(tmp_path / "b", ["hash_join"], [0.5])[0][1]
    assert run_parallel([(0, bad), (1, later)], 2, jobs=1, target=SCRIPTED) == 1
    assert "unknown series 'no_such_join'" in capfd.readouterr().err
    assert not (tmp_path / "b" / "amjoin" / "fig5").exists() or \
        not list((tmp_path / "b" / "amjoin" / "fig5").glob("*.parquet"))


@pytest.mark.stress  # a long end-to-end run (35 s): make stress; the scripted tests above
# check the same rows in make test
def test_a_tiny_diner_sweep_two_at_a_time_writes_the_counts_of_one_at_a_time(tmp_path):
    """The real one-core kind: the same rows, times left out, whichever way the points run."""
    def sweep(root, *extra: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "experiments.run", "figure=diner/fig17",
                               "scale=tiny", "point.series=diner,hmj", f"results_root={root}",
                               *extra], cwd=ROOT, text=True, capture_output=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    one = sweep(tmp_path / "one", "jobs=1")
    two = sweep(tmp_path / "two", "jobs=2")  # two even if other work holds a core now
    assert "at a time" not in one and "running 4 points 2 at a time" in two
    old = read_results(tmp_path / "one", "diner/fig17")
    new = read_results(tmp_path / "two", "diner/fig17")
    compared, differ = compare_counts(old, new)
    assert compared > 4 * 10 and not differ and len(old) == len(new)
    assert set(new.status) == {"ok"} and set(new.spark_master) == set(old.spark_master)
