"""The cache of finished points shared across figures: which points are the same run, and the
runner copying one instead of running it (a scripted kind, no Spark)."""

from __future__ import annotations

import copy

import pandas as pd

from experiments import run as runner
from experiments.config import compose
from experiments.figures import load_figure
from experiments.point_cache import point_key
from experiments.results import read_results
from experiments.status import own_runs
from tests.experiments import fake_kind

COPY = "+figure.series.hj_copy={algorithm:hash_join}"  # the same settings as hash_join


def test_the_same_run_in_two_figures_has_one_key():
    fig5, fig7 = load_figure("amjoin/fig5"), load_figure("amjoin/fig7")
    # amjoin/fig7 runs fig5's workload at alpha 0.65 on 16-64 executors; fig5 runs on 64
    assert point_key(fig5, "am_join", 0.65, "small", 0) == point_key(fig7, "am_join", 64,
                                                                      "small", 0)
    assert point_key(fig5, "am_join", 0.65, "small", 0) != point_key(fig7, "am_join", 32,
                                                                      "small", 0)
    assert point_key(fig5, "am_join", 0.65, "small", 0) != point_key(fig5, "am_join", 0.65,
                                                                      "small", 1)
    assert point_key(fig5, "am_join", 0.65, "small", 0) != point_key(fig5, "hash_join", 0.65,
                                                                      "small", 0)


def test_prose_does_not_change_a_key_and_a_setting_does():
    fig5 = load_figure("amjoin/fig5")
    key = point_key(fig5, "am_join", 0.5, "small", 0)
    reworded = {**copy.deepcopy(fig5), "title": "another", "targets": [], "id": "amjoin/x"}
    assert point_key(reworded, "am_join", 0.5, "small", 0) == key
    changed = copy.deepcopy(fig5)
    changed["rules"] = {**changed.get("rules", {}), "executor_memory_bytes": 1}
    assert point_key(changed, "am_join", 0.5, "small", 0) != key


def test_a_point_with_a_finished_twin_is_copied_not_run(scripted):
    run, root = scripted
    assert run("hash_join", 0.5) == "ok"
    assert run("hj_copy", 0.5, COPY) == "ok"
    assert fake_kind.CALLS == [("hash_join", 0.5)]
    frame = read_results(root, "amjoin/fig5")
    mine, theirs = (frame[frame.series == s].iloc[0] for s in ("hj_copy", "hash_join"))
    assert mine.reused_from == "amjoin/fig5 hash_join x=0.5"
    assert mine.value == theirs.value and mine.wall_time_s == theirs.wall_time_s
    assert mine.start_time == theirs.start_time and mine.point_id == "hj_copy__0.5"
    assert pd.isna(theirs.reused_from)
    own = own_runs(frame)
    assert (own.seconds, own.ran, own.copied) == (theirs.wall_time_s, 1, 1)
    # the copy is a finished point of its own
    assert run("hj_copy", 0.5, COPY) == "skipped"


def test_no_copy_from_an_unfinished_or_other_point(scripted):
    run, _ = scripted
    assert run("spark3_join", 0.5) == "error"  # not final: never copied
    assert run("hash_join", 0.25) == "ok"  # another x
    assert run("hj_copy", 0.5, COPY) == "ok"
    assert fake_kind.CALLS[-1] == ("hj_copy", 0.5)


def test_a_timeout_is_not_copied(scripted, monkeypatch):
    """A timeout depends on the wall-clock limit of the run that hit it, not on the settings."""
    from experiments.kinds import PointOutcome

    run, _ = scripted
    monkeypatch.setattr(fake_kind, "run_point", lambda pc: (
        fake_kind.CALLS.append((pc.series, pc.x)), PointOutcome(status="timeout"))[1])
    assert run("hash_join", 0.5) == "timeout"
    assert run("hj_copy", 0.5, COPY) == "timeout"
    assert len(fake_kind.CALLS) == 2


def test_reuse_false_runs_the_point(scripted):
    run, _ = scripted
    run("hash_join", 0.5)
    assert run("hj_copy", 0.5, COPY, "reuse=false") == "ok"
    assert fake_kind.CALLS == [("hash_join", 0.5), ("hj_copy", 0.5)]


def test_force_copies_only_what_this_commit_made(scripted, monkeypatch):
    run, _ = scripted
    monkeypatch.setattr(runner, "git_commit", lambda: "aaaaaaa")
    run("hash_join", 0.5)
    monkeypatch.setattr(runner, "git_commit", lambda: "bbbbbbb")
    assert run("hj_copy", 0.5, COPY, "force=true") == "ok"
    assert fake_kind.CALLS == [("hash_join", 0.5), ("hj_copy", 0.5)]
    run("hash_join", 0.5, "force=true")  # now made by bbbbbbb
    assert run("hj_copy", 0.5, COPY, "force=true") == "ok"
    assert len(fake_kind.CALLS) == 3
    monkeypatch.setattr(runner, "git_commit", lambda: "bbbbbbb-dirty")
    run("hash_join", 0.5, "force=true")
    assert run("hj_copy", 0.5, COPY, "force=true") == "ok"  # a dirty tree: never copied
    assert len(fake_kind.CALLS) == 5


def test_a_point_made_on_another_master_is_not_copied(scripted):
    run, _ = scripted
    run("hash_join", 0.5)
    assert run("hj_copy", 0.5, COPY, "spark.master='local[1]'") == "ok"
    assert len(fake_kind.CALLS) == 2


def test_elapsed_counts_points_that_ran_at_once_once():
    """Two one-core points run two at a time: the machine was busy for the union of their
    intervals, not their sum; a copied point adds nothing to either."""
    frame = pd.DataFrame({
        "point_id": ["a", "b", "c", "d"], "wall_time_s": [10.0, 10.0, 5.0, 99.0],
        "reused_from": [None, None, None, "p/f s x=1"],
        "start_time": ["2026-11-28T03:00:00+00:00", "2026-11-28T03:00:05+00:00",
                       "2026-11-28T04:00:00+00:00", "2026-11-28T03:00:00+00:00"]})
    own = own_runs(frame)
    assert (own.seconds, own.elapsed, own.ran, own.copied) == (25.0, 20.0, 3, 1)


def test_other_figures_compose_inside_a_hydra_run():
    """A sweep's point looks other figures up while its own Hydra run is on (jobs=1)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from runtime.paths import CONF

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        running = GlobalHydra.instance().hydra
        cfg = compose(["figure=amjoin/fig7"])
        assert GlobalHydra.instance().hydra is running
    assert cfg.figure.id == "amjoin/fig7"
