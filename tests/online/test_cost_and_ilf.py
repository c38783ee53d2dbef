"""The cost model fit recovers known constants; the engine's ILF stays within 1.25 ILF*."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from joins.online import run_stream
from joins.online.cost import CostModel, fit

COUNTS = ("received", "probes", "outputs", "migrated", "sent", "spilled", "disk_probes",
          "r_stored", "s_stored")


def _random_counts(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame({c: rng.integers(0, 50_000, n) for c in COUNTS})


def test_fit_recovers_known_constants():
    rng = np.random.default_rng(0)
    n = 400
    m = _random_counts(rng, n)
    m["batch"] = np.arange(n) // 8
    true = CostModel(per_worker=0.01, per_received=2e-6, per_probe=1e-6, per_output=3e-7,
                     per_migrated=4e-6, per_spilled=0.0, per_disk_probe=5e-6)
    m["seconds"] = true.worker_cost(m) + rng.normal(0, 1e-4, n)
    got = fit(m)
    assert got["r2"] > 0.99
    assert got["per_received"] == pytest.approx(2e-6, rel=0.1)
    assert got["per_output"] == pytest.approx(3e-7, rel=0.1)
    assert got["per_migrated"] == pytest.approx(4e-6, rel=0.1)
    assert all(v >= 0 for k, v in got.items() if k.startswith("per_"))


def test_fit_keeps_constants_measured_apart_and_fits_the_rest_without_them():
    rng = np.random.default_rng(2)
    n = 300
    m = _random_counts(rng, n)
    true = CostModel(per_worker=0.01, per_received=2e-6, per_probe=0.0, per_output=0.0,
                     per_migrated=0.0, per_spilled=3e-6, per_disk_probe=7e-6)
    m["seconds"] = true.worker_cost(m)
    # told the disk constants, the fit attributes none of their time to the other terms
    got = fit(m, known={"per_spilled": 3e-6, "per_disk_probe": 7e-6})
    assert got["per_spilled"] == 3e-6 and got["per_disk_probe"] == 7e-6
    assert got["per_received"] == pytest.approx(2e-6, rel=1e-3)
    assert got["per_probe"] == pytest.approx(0.0, abs=1e-9)
    assert got["r2"] == pytest.approx(1.0)
    # told wrong ones, the rest cannot absorb the difference: the fit gets worse
    assert fit(m, known={"per_spilled": 0.0, "per_disk_probe": 0.0})["r2"] < 0.99


def test_fixed_per_batch_is_wall_time_beyond_the_workers_share_of_cores():
    m = pd.DataFrame({"run": [0, 0, 0, 0, 1, 1], "batch": [0, 0, 1, 1, 0, 0],
                      "seconds": [0.2, 0.4, 0.1, 0.1, 0.3, 0.3]})
    for c in COUNTS:
        m[c] = 0
    wall = pd.Series([0.5, 0.3, 0.8],
                     index=pd.MultiIndex.from_tuples([(0, 0), (0, 1), (1, 0)], names=["run", "batch"]))
    # on 2 cores the workers take 0.3, 0.1 and 0.3 s of wall: 0.2, 0.2 and 0.5 s remain
    assert fit(m, wall, cores=2)["fixed_per_batch"] == pytest.approx(0.2)
    # on 1 core: 0.6, 0.2, 0.6 s of work, leaving -0.1, 0.1, 0.2: median 0.1
    assert fit(m, wall, cores=1)["fixed_per_batch"] == pytest.approx(0.1)


def test_modeled_time_is_fixed_plus_slowest_worker_per_batch():
    rng = np.random.default_rng(1)
    r = pd.DataFrame({"key": rng.integers(0, 30, 400)})
    s = pd.DataFrame({"key": rng.integers(0, 30, 400)})
    cost = CostModel(fixed_per_batch=0.5, per_worker=0.0, per_received=1.0, per_probe=0.0,
                     per_output=0.0, per_migrated=0.0)
    res = run_stream(None, r, s, operator="shj", joiners=4, batch_size=200, cost=cost,
                     progress=False, backend="local")
    per_batch = res.metrics.groupby("batch")["received"].max()
    assert res.summary["modeled_time"] == pytest.approx(0.5 * 4 + per_batch.sum())
    assert (res.metrics["modeled_cost"] == res.metrics["received"]).all()


@pytest.mark.parametrize("k", [2, 4, 8])
def test_fluct_ilf_within_1_25_of_optimal_after_warmup(k):
    """Catalogue T20 (Fig 5k) at small scale: exact controller, micro-batches small against
    the warm-up, ILF of the epoch mapping <= 1.25 ILF* at every tuple after warm-up."""
    rng = np.random.default_rng(k)
    r = pd.DataFrame({"key": rng.integers(0, 1000, 1500)})
    s = pd.DataFrame({"key": rng.integers(0, 1000, 7500)})
    res = run_stream(None, r, s, operator="dynamic", joiners=16, batch_size=60, order="fluct",
                     k=k, warmup=120, progress=False, backend="local")
    assert res.summary["migrations"] >= 1
    assert res.summary["ilf_ratio_max"] <= 1.25 + 1e-9


def test_calibrate_fits_on_tiny_runs(spark, tmp_path):
    from joins.online.calibration import CalibrationRun, calibrate

    runs = (CalibrationRun("shj", 2, 300, 600, 50, 0.0, 300),
            CalibrationRun("static_mid", 4, 300, 600, 50, 1.0, 450, spill=True))
    got = calibrate(spark, runs=runs, repeats=2, out=tmp_path / "c.json")
    # 3 + 2 micro-batches of 2 and 4 workers
    assert got["rows"] == 3 * 2 + 2 * 4
    assert got["fixed_per_batch"] >= 0 and got["calibration_id"].startswith("calibrated-")
    # the disk costs are the spill store's, measured apart, not fitted to 0
    assert got["per_spilled"] > 0 and got["per_disk_probe"] > 0 and "sqlite" in got["spill_store"]
    assert CostModel.load(tmp_path / "c.json").fixed_per_batch == got["fixed_per_batch"]
