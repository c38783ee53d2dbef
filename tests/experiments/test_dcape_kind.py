"""The D-CAPE kind's clean-up times: the calibrated reading and the paper's per-result cost."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from experiments.kinds.dcape import cleanup_times
from joins.online import CostModel

COST = CostModel(per_worker=1e-4, per_probe=3e-8, per_output=1e-8, per_disk_probe=1.3e-6)


def _cleanup() -> pd.DataFrame:
    """Two machines' clean-up rows: machine 0 reads back much and produces little, machine 1
    reads back little and produces much (each machine's rows summed by the kind)."""
    m = pd.DataFrame({"worker": [0, 0, 1], "outputs": [1_000, 0, 50_000],
                      "disk_probes": [40_000, 20_000, 5_000], "probes": [70_000, 0, 9_000]})
    for c in ("received", "migrated", "sent", "spilled", "r_stored", "s_stored"):
        m[c] = 0
    return m.assign(modeled_cost=COST.worker_cost(m))


def test_calibrated_reading_is_the_slowest_machines_modeled_cost():
    m = _cleanup()
    out = cleanup_times(m, COST)
    per = m.groupby("worker")["modeled_cost"].sum()
    assert out["cleanup_modeled_seconds"] == (pytest.approx(per.max()), "modeled s")
    assert "cleanup_paper_seconds" not in out
    # machine 0 is the slowest: 60,000 tuples read back at 1.3 us, 1,000 results at 10 ns
    t = per[0]
    assert out["cleanup_modeled_readback_share"][0] == pytest.approx(60_000 * 1.3e-6 / t)
    assert out["cleanup_modeled_result_share"][0] == pytest.approx(1_000 * 1e-8 / t)
    assert out["cleanup_results_max_machine"] == (50_000.0, "rows")
    assert out["cleanup_tuples_read_max_machine"] == (60_000.0, "tuples")


def test_paper_reading_charges_each_result_the_derived_cost():
    m = _cleanup()
    each = 3.254e-4
    out = cleanup_times(m, COST, each)
    per = m.groupby("worker")["modeled_cost"].sum()
    # the same counts with per_output replaced: machine 1 (50,000 results) is now the slowest
    paper = per + (each - COST.per_output) * m.groupby("worker")["outputs"].sum()
    assert paper.idxmax() == 1
    assert out["cleanup_paper_seconds"] == (pytest.approx(paper[1]), "modeled s")
    assert out["cleanup_paper_seconds"][0] == pytest.approx(
        COST.per_worker + 5_000 * 1.3e-6 + 9_000 * 3e-8 + 50_000 * each)
    assert out["cleanup_paper_result_share"][0] == pytest.approx(50_000 * each / paper[1])
    assert out["cleanup_paper_readback_share"][0] == pytest.approx(5_000 * 1.3e-6 / paper[1])
    assert out["cleanup_per_result_s"][0] == each
    # the calibrated reading is unchanged beside it
    assert out["cleanup_modeled_seconds"][0] == pytest.approx(per.max())


def test_no_cleanup_is_zero_time():
    out = cleanup_times(_cleanup().iloc[:0], COST, 3.254e-4)
    assert out["cleanup_modeled_seconds"] == (0.0, "modeled s")
    assert out["cleanup_paper_seconds"] == (0.0, "modeled s")
    assert math.isnan(out["cleanup_paper_result_share"][0])


def test_figures_use_the_cost_derived_from_fig11():
    """The written rule: the paper's Fig 11 clean-up times over their results, pooled."""
    from experiments.figures import load_figure

    derived = (26.879 + 359.396) / (194_308 + 992_893)
    for fid in ("dcape/fig11", "dcape/long_run"):
        fig = load_figure(fid)
        assert fig["run"]["cleanup_per_result_s"] == pytest.approx(derived, rel=1e-3)
        counted = {t["check"]["metric"] for t in fig["targets"]
                   if "cleanup" in t["id"] or "time" in t["id"]
                   if t["check"].get("metric", "").endswith("_seconds")
                   and not t.get("sensitivity")}
        assert counted == {"cleanup_paper_seconds"}
